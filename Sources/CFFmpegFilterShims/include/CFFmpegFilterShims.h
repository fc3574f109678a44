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

// FFmpeg's error codes are macros built from FFERRTAG, which Swift does not import. These two are
// `static inline` because CFFmpegShims exports functions of the same names for libavcodec's owner,
// and both shim targets link into one executable.
#include <errno.h>
#include <libavutil/error.h>

/// `AVERROR_EOF`: a filter graph's output has ended.
static inline int cshim_AVERROR_EOF(void) { return AVERROR_EOF; }
/// `AVERROR(EAGAIN)`: the graph needs more input before it can output a frame.
static inline int cshim_AVERROR_EAGAIN(void) { return AVERROR(EAGAIN); }
