/* Defect: the backend id contains a space.
   Breaks the backend id check (printable ASCII without spaces) -> invalid-backend-id. */
#define MOCK_BACKEND_ID "Mock Space"
#include "skeleton.h"
