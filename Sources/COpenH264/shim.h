// Umbrella header for the system library: only includes, shims live in CConclaveShims.
#include <wels/codec_api.h>
#include <wels/codec_app_def.h>
#include <wels/codec_def.h>
