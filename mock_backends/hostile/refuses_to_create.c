/* Defect: says Activation relu is supported, then refuses to create its workload.
   Breaks conformance SUP-1 (supported implies creatable) -> FAIL. */
#define MOCK_BACKEND_ID "MockRefusesToCreate"
#define MOCK_RUNS_RELU
#define MOCK_NO_BACKEND_FACTORY
#include "../skeleton.h"

static BackendStatus refuse(BackendWorkloadFactory *self, const BackendLayerDescription *layer,
                            BackendWorkload **workload, char *message, size_t message_size)
{
    (void)self, (void)layer;
    *workload = NULL;
    snprintf(message, message_size, "changed my mind");
    return BACKEND_STATUS_UNSUPPORTED;
}

static BackendStatus refusing_factory(const BackendInstance *self, BackendMemoryManager *manager,
                                      BackendWorkloadFactory **factory, char *message, size_t size)
{
    BackendStatus status = mock_create_workload_factory(self, manager, factory, message, size);
    if (status == BACKEND_STATUS_OK)
        (*factory)->create_workload = refuse;
    return status;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->create_workload_factory = refusing_factory;
    return instance;
}
