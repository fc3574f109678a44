#pragma once
// Shims for libavfilter/libswscale/libswresample, used only by ConclaveCompose.
// Like every shim target: only macros and variadics turned into typed functions or constants,
// named `cshim_<C name>`; no state, no policy.
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libswscale/swscale.h>
#include <libswresample/swresample.h>

/// `LIBAVFILTER_VERSION_INT` of the headers built against (a macro), for error lines.
unsigned cshim_LIBAVFILTER_VERSION_INT(void);
/// `AVERROR(EAGAIN)` and `AVERROR_EOF` (function-like macros): a filter graph's sink is empty for now, or done.
int cshim_filter_AVERROR_EAGAIN(void);
int cshim_filter_AVERROR_EOF(void);
/// `AV_PIX_FMT_YUV420P` as an int (the value of AVFrame's `format`): libavutil's pixel format enum
/// is not always visible through this module (its header may belong to CFFmpeg's module).
int cshim_filter_AV_PIX_FMT_YUV420P(void);
