// Umbrella header for the system library: only includes, shims live in CConclaveShims.
#include <opus/opus.h>
