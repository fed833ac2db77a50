/* Defect: the backend id contains a tab.
   Breaks contract 5.3 (printable ASCII without spaces) -> invalid-backend-id. */
#define MOCK_BACKEND_ID "Mock\tTab"
#include "skeleton.h"
