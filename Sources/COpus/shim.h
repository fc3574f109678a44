// Umbrella header for the system library: only includes, its shims live in COpusShims.
#include <opus/opus.h>
