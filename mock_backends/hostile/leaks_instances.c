/* Defect: destroy() does not free the instance, so every create/destroy cycle leaks it.
   Breaks conformance LIFE-1 (repeated create/destroy does not grow memory) -> FAIL. */
#define MOCK_BACKEND_ID "MockLeaksInstances"
#define MOCK_NO_BACKEND_FACTORY
#include "../skeleton.h"

static void forget(BackendInstance *self)
{
    (void)self;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->destroy = forget;
    return instance;
}
