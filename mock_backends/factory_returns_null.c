/* Defect: BackendFactory returns NULL.
   Breaks the factory check (the factory returns a non-NULL instance) -> factory-failed. */
#define MOCK_BACKEND_ID "MockFactoryNull"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

BACKEND_EXPORT void *BackendFactory(void)
{
    return NULL;
}
