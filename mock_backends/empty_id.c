/* Defect: GetBackendId returns "".
   Breaks contract 5.3 (the id is non-empty) -> invalid-backend-id. */
#define MOCK_BACKEND_ID ""
#include "skeleton.h"
