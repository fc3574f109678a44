// Umbrella header for the system library. libpulse's API is plain functions and enums, so it
// needs no shim target: ConclavePulse calls it directly.
#include <pulse/pulseaudio.h>
