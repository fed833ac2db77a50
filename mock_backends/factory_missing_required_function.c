/* Defect: declares Backend API 1.1 but leaves the required is_layer_supported NULL.
   Breaks contract 5.5 (a well-formed instance) -> factory-failed. */
#define MOCK_BACKEND_ID "MockMissingRequired"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->is_layer_supported = NULL;
    return instance;
}
