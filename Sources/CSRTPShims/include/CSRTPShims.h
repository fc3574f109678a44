#pragma once
// libsrtp2 shims, used only by ConclaveSRTP.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
#include <srtp2/srtp.h>

/// SRTP_MAX_TRAILER_LEN is an expression macro: the room srtp_protect() may append.
static const int cshim_SRTP_MAX_TRAILER_LEN = SRTP_MAX_TRAILER_LEN;
