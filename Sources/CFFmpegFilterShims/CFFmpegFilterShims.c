#include "CFFmpegFilterShims.h"

unsigned cshim_LIBAVFILTER_VERSION_INT(void) { return LIBAVFILTER_VERSION_INT; }
int cshim_filter_AVERROR_EAGAIN(void) { return AVERROR(EAGAIN); }
int cshim_filter_AVERROR_EOF(void) { return AVERROR_EOF; }
int cshim_filter_AV_PIX_FMT_YUV420P(void) { return AV_PIX_FMT_YUV420P; }
