/* Defect: says Activation relu is supported, then segfaults creating its workload.
   Breaks conformance ABI-1 (the first case to create a workload) and SUP-1 (supported implies
   creatable) -> CRASH, named create_workload. */
#define MOCK_BACKEND_ID "MockCrashInCreateWorkload"
#define MOCK_RUNS_RELU
#define MOCK_NO_BACKEND_FACTORY
#include "../skeleton.h"

static BackendStatus crash(BackendWorkloadFactory *self, const BackendLayerDescription *layer,
                           BackendWorkload **workload, char *message, size_t message_size)
{
    volatile int *nowhere = NULL;
    (void)self, (void)layer, (void)workload, (void)message, (void)message_size;
    *nowhere = 1;                        /* the defect */
    return BACKEND_STATUS_OK;
}

static BackendStatus crashing_factory(const BackendInstance *self, BackendMemoryManager *manager,
                                      BackendWorkloadFactory **factory, char *message, size_t size)
{
    BackendStatus status = mock_create_workload_factory(self, manager, factory, message, size);
    if (status == BACKEND_STATUS_OK)
        (*factory)->create_workload = crash;
    return status;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->create_workload_factory = crashing_factory;
    return instance;
}
