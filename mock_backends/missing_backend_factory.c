/* Defect: does not export BackendFactory.
   Breaks contract 5.2 (three entry points with C linkage) -> missing-symbol. */
#define MOCK_BACKEND_ID "MockMissingBackendFactory"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"
