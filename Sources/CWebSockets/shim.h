// Umbrella header for the system library: only includes, shims live in CWebSocketsShims.
#include <libwebsockets.h>
