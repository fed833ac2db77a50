/* Defect: the backend id contains a space.
   Breaks contract 5.3 (printable ASCII without spaces) -> invalid-backend-id. */
#define MOCK_BACKEND_ID "Mock Space"
#include "skeleton.h"
