/* Not a defect: reports the minor version before the runtime's (or the runtime's own when that
   is 0, since no older minor exists). Contract 5.4 says it is compatible -> registered. */
#include "backend_api.h"
#define MOCK_BACKEND_ID "MockMinorOlder"
#define MOCK_VERSION_MINOR (BACKEND_API_VERSION_MINOR > 0 ? BACKEND_API_VERSION_MINOR - 1 : 0)
#include "skeleton.h"
