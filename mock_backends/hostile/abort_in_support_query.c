/* Defect: is_layer_supported calls abort() instead of answering.
   Breaks conformance SUP-2 (an unsupported layer gets a clean status) -> CRASH (SIGABRT). */
#include <stdlib.h>

#define MOCK_BACKEND_ID "MockAbortInSupport"
#define MOCK_NO_BACKEND_FACTORY
#include "../skeleton.h"

static BackendStatus abort_instead(const BackendInstance *self, const BackendLayerDescription *layer,
                                   char *message, size_t message_size)
{
    (void)self, (void)layer, (void)message, (void)message_size;
    abort();
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->is_layer_supported = abort_instead;
    return instance;
}
