/* Defect: does not export GetBackendId.
   Breaks the entry-point check (three entry points with C linkage) -> missing-symbol. */
#define MOCK_BACKEND_ID "MockMissingGetBackendId"
#define MOCK_NO_GET_BACKEND_ID
#include "skeleton.h"
