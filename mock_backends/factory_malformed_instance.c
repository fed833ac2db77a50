/* Defect: BackendFactory returns an instance whose struct_size is too small to hold even the
   Backend API 1.0 members.
   Breaks the factory check (a well-formed instance header) -> factory-failed. */
#define MOCK_BACKEND_ID "MockFactoryMalformed"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->struct_size = 4;
    return instance;
}
