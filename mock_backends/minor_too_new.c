/* Defect: built against a newer minor version of the Backend API than the runtime's.
   Breaks the version check (backend minor <= runtime minor) -> incompatible-version. */
#include "backend_api.h"
#define MOCK_BACKEND_ID "MockMinorTooNew"
#define MOCK_VERSION_MINOR (BACKEND_API_VERSION_MINOR + 1)
#include "skeleton.h"
