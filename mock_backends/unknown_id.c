/* Defect: GetBackendId returns the reserved id "Unknown".
   Breaks contract 5.3 (the id is not "Unknown") -> invalid-backend-id. */
#define MOCK_BACKEND_ID "Unknown"
#include "skeleton.h"
