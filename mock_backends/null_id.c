/* Defect: GetBackendId returns NULL.
   Breaks the backend id check (the id is a non-empty string) -> invalid-backend-id. */
#define MOCK_BACKEND_ID NULL
#include "skeleton.h"
