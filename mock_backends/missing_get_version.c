/* Defect: does not export GetVersion.
   Breaks the entry-point check (three entry points with C linkage) -> missing-symbol. */
#define MOCK_BACKEND_ID "MockMissingGetVersion"
#define MOCK_NO_GET_VERSION
#include "skeleton.h"
