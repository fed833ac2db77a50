/* Defect: the instance's get_id() names another backend than GetBackendId().
   Breaks the factory check (a well-formed instance) -> factory-failed. */
#define MOCK_BACKEND_ID "MockIdMismatch"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

static const char *other_id(const BackendInstance *self)
{
    (void)self;
    return "SomebodyElse";
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->get_id = other_id;
    return instance;
}
