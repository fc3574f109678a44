#include "CWebSocketsShims.h"
