#pragma once
// CConclaveShims: the libwebsockets shims, used only by JanusClient.
//
// Swift cannot import C function-like macros or call variadic functions, and some expression
// macros (LWS_PRE) do not import as constants. Like every shim target (one per C library, each
// depending only on its library and imported only by the module that owns it), this one turns
// such macros into typed functions or constants named `cshim_<C name>`, so that a search for the
// C name finds its wrapper; no state, no policy.
#include "shims_lws.h"
