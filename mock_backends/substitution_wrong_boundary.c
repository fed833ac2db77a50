/* Defect: optimize_subgraph replaces every offered layer with one compiled sub-graph, but gives
   the sub-graph's boundary outputs as the substitution's inputs and its inputs as outputs.
   Breaks rule 12.3 (each substitution's inputs and outputs are the tensors that cross its
   boundary) -> InvalidOptimizationError ("has boundary inputs ..."). */
#define MOCK_BACKEND_ID "MockSubstitutionWrongBoundary"
#define MOCK_NO_BACKEND_FACTORY
#include "subgraph_skeleton.h"

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    uint64_t ids[64];
    uint32_t n = subgraph->num_layers < 64 ? subgraph->num_layers : 64;
    (void)self, (void)message, (void)message_size;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = subgraph->layers[i]->id;
    views->add_substitution(views, ids, n,
                            subgraph->outputs, subgraph->num_outputs,   /* swapped */
                            subgraph->inputs, subgraph->num_inputs,
                            mock_compiled_relu_new());
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    return mock_new_optimizing_instance(optimize);
}
