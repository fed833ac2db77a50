/* A well-formed backend whose device is absent: is_available() says so, and the runtime skips
   it at load with backend-unavailable and this message. */
#define MOCK_BACKEND_ID "MockUnavailable"
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

static BackendStatus unavailable(const BackendInstance *self, char *message, size_t message_size)
{
    (void)self;
    snprintf(message, message_size, "no MockUnavailable device on this machine");
    return BACKEND_STATUS_UNSUPPORTED;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->is_available = unavailable;
    return instance;
}
