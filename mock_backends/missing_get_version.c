/* Defect: does not export GetVersion.
   Breaks contract 5.2 (three entry points with C linkage) -> missing-symbol. */
#define MOCK_BACKEND_ID "MockMissingGetVersion"
#define MOCK_NO_GET_VERSION
#include "skeleton.h"
