/* Defect: declares Backend API 1.1 but leaves the required is_layer_supported NULL.
   The loader registers it (its header is well-formed; the missing function counts as absent),
   the conformance kit fails ABI-2 (every required function pointer is present). */
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
