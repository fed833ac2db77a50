/* Not a defect: built against Backend API 1.0, an older minor version than the runtime's. Its
   instance is the 1.0 struct (struct_size BACKEND_INSTANCE_SIZE_1_0, no 1.1 members).
   The version check says it is compatible -> registered, with the 1.1 features missing. */
#define MOCK_BACKEND_ID "MockMinorOlder"
#define MOCK_VERSION_MINOR 0
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->struct_size = (uint32_t)BACKEND_INSTANCE_SIZE_1_0;
    return instance;
}
