/* Defect: runs Activation relu, and optimize_subgraph() segfaults on any sub-graph it is offered.
   Breaks conformance NET-1 (the views cover the sub-graph) -> CRASH, named optimize_subgraph. */
#define MOCK_BACKEND_ID "MockCrashInOptimizer"
#define MOCK_NO_BACKEND_FACTORY
#include "../subgraph_skeleton.h"

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    volatile int *nowhere = NULL;
    (void)self, (void)subgraph, (void)views, (void)message, (void)message_size;
    *nowhere = 1;                        /* the defect */
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    return mock_new_optimizing_instance(optimize);
}
