/* Not a defect: a valid backend with id "MockBeta", distinct from MockAlpha
   (registered). */
#define MOCK_BACKEND_ID "MockBeta"
#include "skeleton.h"
