/* Not a defect: built against Backend API 1.1, the minor version before the runtime's. Its
   instance is the 1.1 struct (struct_size BACKEND_INSTANCE_SIZE_1_1, no 1.2 members), so it has
   no optimize_subgraph. The version check says it is compatible -> registered; in a network every
   layer it takes runs as one workload (rule 12.3), it never receives a sub-graph. It runs
   Activation relu so that it can take part in networks. */
#define MOCK_BACKEND_ID "MockMinorPrevious"
#define MOCK_VERSION_MINOR 1
#define MOCK_RUNS_RELU
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->struct_size = (uint32_t)BACKEND_INSTANCE_SIZE_1_1;
    return instance;
}
