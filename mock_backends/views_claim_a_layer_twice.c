/* Defect: optimize_subgraph records the first layer both as untouched and as failed. Breaks
   rule 12.3 (every layer in exactly one view) -> InvalidOptimizationError ("claims a layer more
   than once"). */
#define MOCK_BACKEND_ID "MockViewsClaimALayerTwice"
#define MOCK_NO_BACKEND_FACTORY
#include "subgraph_skeleton.h"

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    (void)self, (void)message, (void)message_size;
    for (uint32_t i = 0; i < subgraph->num_layers; i++)
        views->add_untouched(views, subgraph->layers[i]->id);
    views->add_failed(views, subgraph->layers[0]->id, "changed its mind");   /* a second view */
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    return mock_new_optimizing_instance(optimize);
}
