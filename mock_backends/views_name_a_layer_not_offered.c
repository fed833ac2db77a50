/* Defect: besides a correct view of every offered layer, optimize_subgraph records a layer id
   that was not offered. Breaks rule 12.3 (no layer that was not offered) ->
   InvalidOptimizationError ("names layer id(s) ... that were not offered"). */
#define MOCK_BACKEND_ID "MockViewsNameALayerNotOffered"
#define MOCK_NO_BACKEND_FACTORY
#include "subgraph_skeleton.h"

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    (void)self, (void)message, (void)message_size;
    for (uint32_t i = 0; i < subgraph->num_layers; i++)
        views->add_untouched(views, subgraph->layers[i]->id);
    views->add_untouched(views, 424242);                          /* never offered */
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    return mock_new_optimizing_instance(optimize);
}
