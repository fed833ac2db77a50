/* Defect: the compiled sub-graph that replaces a chain of relu layers computes x + 1 instead
   of relu(x). The views are valid, so the runtime accepts them; the conformance kit's NET-2
   (a substitution computes what the layers it replaces compute) catches it. */
#define MOCK_BACKEND_ID "MockCompiledWrongResult"
#define MOCK_NO_BACKEND_FACTORY
#include "subgraph_skeleton.h"

static BackendStatus wrong_execute(BackendCompiledSubgraph *self, const BackendBuffer *inputs,
                                   uint32_t num_inputs, const BackendBuffer *outputs,
                                   uint32_t num_outputs, char *message, size_t message_size)
{
    (void)self, (void)message, (void)message_size;
    for (uint32_t o = 0; o < num_outputs && num_inputs == 1; o++)
        for (uint64_t i = 0; i < outputs[o].size_bytes / sizeof(float); i++)
            ((float *)outputs[o].data)[i] = ((const float *)inputs[0].data)[i] + 1.0f;  /* wrong */
    return BACKEND_STATUS_OK;
}

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    uint64_t ids[64];
    uint32_t n = subgraph->num_layers < 64 ? subgraph->num_layers : 64;
    BackendCompiledSubgraph *compiled = mock_compiled_relu_new();
    (void)self, (void)message, (void)message_size;
    if (compiled != NULL)
        compiled->execute = wrong_execute;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = subgraph->layers[i]->id;
    views->add_substitution(views, ids, n, subgraph->inputs, subgraph->num_inputs,
                            subgraph->outputs, subgraph->num_outputs, compiled);
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    return mock_new_optimizing_instance(optimize);
}
