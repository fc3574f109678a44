// Umbrella header for the system library: only includes, its shims live in CSRTPShims.
#include <srtp2/srtp.h>
