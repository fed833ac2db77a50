/* Defect: does not export BackendFactory.
   Breaks the entry-point check (three entry points with C linkage) -> missing-symbol. */
#define MOCK_BACKEND_ID "MockMissingBackendFactory"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"
