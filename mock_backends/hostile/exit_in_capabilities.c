/* Defect: get_capabilities calls exit(0), ending the process with a "success" status.
   Breaks conformance ABI-4 (capabilities are answered) -> CRASH: a worker that exits mid-case,
   even with status 0, never counts as a pass. */
#include <stdlib.h>

#define MOCK_BACKEND_ID "MockExitInCapabilities"
#define MOCK_NO_BACKEND_FACTORY
#include "../skeleton.h"

static BackendStatus exit_instead(const BackendInstance *self, const BackendCapability **capabilities,
                                  uint32_t *count)
{
    (void)self, (void)capabilities, (void)count;
    exit(0);
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->get_capabilities = exit_instead;
    return instance;
}
