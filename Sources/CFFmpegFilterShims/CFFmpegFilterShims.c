#include "CFFmpegFilterShims.h"

unsigned cshim_LIBAVFILTER_VERSION_INT(void) { return LIBAVFILTER_VERSION_INT; }
