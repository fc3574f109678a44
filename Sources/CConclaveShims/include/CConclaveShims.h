#pragma once
// CConclaveShims: the C shims of the libraries that have no shim target of their own yet.
//
// Swift cannot import C function-like macros or call variadic functions, and a few expression
// macros (SRTP_MAX_TRAILER_LEN) do not import as constants. Each shim here turns one of
// those into a real, typed function or constant, named `cshim_<original name>` so that a search for
// the C name finds its wrapper. Shims are grouped by library, one header and one source file each,
// and each group is used only by the Swift module that owns that library. libwebsockets has its
// own target, CWebSocketsShims.
#include "shims_nice.h"
#include "shims_openssl.h"
#include "shims_srtp.h"
#include "shims_codecs.h"
#include "shims_av.h"
