/* Defect: a different file that claims the id "MockAlpha" of alpha.c.
   Breaks the registration rule (the first id wins) -> duplicate-backend-id when loaded
   after MockAlpha. */
#define MOCK_BACKEND_ID "MockAlpha"
#include "skeleton.h"
