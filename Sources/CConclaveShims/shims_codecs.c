#include "CConclaveShims.h"
