/* Defect: GetBackendId returns the reserved id "Unknown".
   Breaks the backend id check (the id is not "Unknown") -> invalid-backend-id. */
#define MOCK_BACKEND_ID "Unknown"
#include "skeleton.h"
