#include "CFFmpegShims.h"
#include <errno.h>

int cshim_AVERROR_EOF(void) { return AVERROR_EOF; }
int cshim_AVERROR_EAGAIN(void) { return AVERROR(EAGAIN); }
int cshim_AVERROR_INVALIDDATA(void) { return AVERROR_INVALIDDATA; }
int cshim_AVERROR_DECODER_NOT_FOUND(void) { return AVERROR_DECODER_NOT_FOUND; }
int64_t cshim_AV_NOPTS_VALUE(void) { return AV_NOPTS_VALUE; }
