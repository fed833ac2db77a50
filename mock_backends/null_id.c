/* Defect: GetBackendId returns NULL.
   Breaks contract 5.3 (the id is a non-empty string) -> invalid-backend-id. */
#define MOCK_BACKEND_ID NULL
#include "skeleton.h"
