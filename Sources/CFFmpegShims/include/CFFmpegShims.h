#pragma once
// Shims for libavformat/libavcodec/libavutil, used only by ConclaveAV.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
//
// FFmpeg's error codes (AVERROR_EOF, AVERROR(EAGAIN), ...) are function-like macros built from
// FFERRTAG, which Swift does not import; each one we compare against is exposed as a function.
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/error.h>

/// `AVERROR_EOF`: end of file reached by a read or a decoder drain.
int cshim_AVERROR_EOF(void);
/// `AVERROR(EAGAIN)`: the codec needs more input (or output must be drained first).
int cshim_AVERROR_EAGAIN(void);
/// `AVERROR_INVALIDDATA`: the bitstream is malformed.
int cshim_AVERROR_INVALIDDATA(void);
/// `AVERROR_DECODER_NOT_FOUND` and friends, so errors can say "unsupported codec".
int cshim_AVERROR_DECODER_NOT_FOUND(void);
/// `AV_NOPTS_VALUE` is a cast expression macro (`(int64_t)UINT64_C(0x8000000000000000)`).
int64_t cshim_AV_NOPTS_VALUE(void);
