#pragma once
// libsrtp2 shims (owner: ConclaveSRTP).
#include <srtp2/srtp.h>

/// SRTP_MAX_TRAILER_LEN is an expression macro: the room srtp_protect() may append.
static const int cshim_SRTP_MAX_TRAILER_LEN = SRTP_MAX_TRAILER_LEN;
