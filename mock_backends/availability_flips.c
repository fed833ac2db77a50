/* Defect: is_available() answers yes and no in turn, so whether the backend loads depends on
   how often it was asked. The conformance kit's availability case (deterministic answer)
   catches it. */
#define MOCK_BACKEND_ID "MockAvailabilityFlips"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

static int calls;

static BackendStatus flipping(const BackendInstance *self, char *message, size_t message_size)
{
    (void)self;
    if (__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED) % 2 == 0)
        return BACKEND_STATUS_OK;
    snprintf(message, message_size, "the device went away");
    return BACKEND_STATUS_UNSUPPORTED;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->is_available = flipping;
    return instance;
}
