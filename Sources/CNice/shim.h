// Umbrella header for the system library: only includes, shims live in CConclaveShims.
#include <nice/agent.h>
#include <glib-object.h>
