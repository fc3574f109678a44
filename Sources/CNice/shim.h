// Umbrella header for the system library: only includes, its shims live in CNiceShims.
#include <nice/agent.h>
#include <glib-object.h>
