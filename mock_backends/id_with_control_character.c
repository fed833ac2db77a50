/* Defect: the backend id contains a tab.
   Breaks the backend id check (printable ASCII without spaces) -> invalid-backend-id. */
#define MOCK_BACKEND_ID "Mock\tTab"
#include "skeleton.h"
