// Umbrella header for the system library: only includes, its shims live in COpenH264Shims.
#include <wels/codec_api.h>
#include <wels/codec_app_def.h>
#include <wels/codec_def.h>
