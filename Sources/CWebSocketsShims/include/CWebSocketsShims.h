#pragma once
// CWebSocketsShims: libwebsockets' macros as typed constants (owner: ConclaveWebSocket).
//
// Swift cannot import expression macros such as LWS_PRE. Each shim here turns one into a real,
// typed constant named `cshim_<original name>`, so that a search for the C name finds its wrapper.
// Only ConclaveWebSocket links libwebsockets; nothing else includes this header.
#include <libwebsockets.h>

/// LWS_PRE is an expression macro: the headroom lws_write() needs before the payload.
static const size_t cshim_LWS_PRE = LWS_PRE;
