#include "CSRTPShims.h"
