/* Defect: optimize_subgraph records a view for every offered layer but the last one, which
   lands in no view. Breaks rule 12.3 (the views cover the sub-graph exactly) -> the runtime
   refuses the network with InvalidOptimizationError ("leaves layer(s) ... in no view"). */
#define MOCK_BACKEND_ID "MockViewsMissALayer"
#define MOCK_NO_BACKEND_FACTORY
#include "subgraph_skeleton.h"

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    (void)self, (void)message, (void)message_size;
    for (uint32_t i = 0; i + 1 < subgraph->num_layers; i++)     /* the last layer is forgotten */
        views->add_untouched(views, subgraph->layers[i]->id);
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    return mock_new_optimizing_instance(optimize);
}
