/* Defect: built against an older major version of the Backend API than the runtime's.
   Breaks the version check (majors must be equal) -> incompatible-version. */
#include "backend_api.h"
#define MOCK_BACKEND_ID "MockMajorTooOld"
#define MOCK_VERSION_MAJOR (BACKEND_API_VERSION_MAJOR - 1)
#include "skeleton.h"
