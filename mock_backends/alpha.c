/* Not a defect: a valid backend with id "MockAlpha" (contract 5: registered). */
#define MOCK_BACKEND_ID "MockAlpha"
#include "skeleton.h"
