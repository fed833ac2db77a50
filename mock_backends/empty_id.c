/* Defect: GetBackendId returns "".
   Breaks the backend id check (the id is non-empty) -> invalid-backend-id. */
#define MOCK_BACKEND_ID ""
#include "skeleton.h"
