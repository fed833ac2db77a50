/* Not a defect: a valid backend with id "MockAlpha" (registered). */
#define MOCK_BACKEND_ID "MockAlpha"
#include "skeleton.h"
