#pragma once
// libwebsockets shims (owner: JanusClient).
#include <libwebsockets.h>

/// LWS_PRE is an expression macro: the headroom lws_write() needs before the payload.
static const size_t cshim_LWS_PRE = LWS_PRE;
