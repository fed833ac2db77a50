/* Defect: its compiled relu chain serializes, but the compiled sub-graph made again from those
   bytes computes x + 1 instead of relu(x). The runtime cannot tell; the conformance kit's
   NET-5 (a serialized compiled sub-graph loads again with identical results) catches it. */
#define MOCK_BACKEND_ID "MockBlobNotRoundTrip"
#define MOCK_NO_BACKEND_FACTORY
#include <string.h>

#include "subgraph_skeleton.h"

static BackendStatus plus_one(BackendCompiledSubgraph *self, const BackendBuffer *inputs,
                              uint32_t num_inputs, const BackendBuffer *outputs,
                              uint32_t num_outputs, char *message, size_t message_size)
{
    (void)self, (void)message, (void)message_size;
    for (uint32_t o = 0; o < num_outputs && num_inputs == 1; o++)
        for (uint64_t i = 0; i < outputs[o].size_bytes / sizeof(float); i++)
            ((float *)outputs[o].data)[i] = ((const float *)inputs[0].data)[i] + 1.0f;  /* wrong */
    return BACKEND_STATUS_OK;
}

static BackendStatus serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                               uint64_t *size, char *message, size_t message_size)
{
    (void)self, (void)message, (void)message_size;
    *size = 4;
    if (buffer == NULL || capacity < 4)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    memcpy(buffer, "RELU", 4);
    return BACKEND_STATUS_OK;
}

static BackendStatus load(const BackendInstance *self, const void *data, uint64_t size,
                          BackendCompiledSubgraph **compiled, char *message, size_t message_size)
{
    (void)self;
    if (size != 4 || memcmp(data, "RELU", 4) != 0) {
        snprintf(message, message_size, "not a relu chain");
        return BACKEND_STATUS_INVALID_ARGUMENT;
    }
    *compiled = mock_compiled_relu_new();
    if (*compiled == NULL)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    (*compiled)->execute = plus_one;
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
        compiled->serialize = serialize;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = subgraph->layers[i]->id;
    views->add_substitution(views, ids, n, subgraph->inputs, subgraph->num_inputs,
                            subgraph->outputs, subgraph->num_outputs, compiled);
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_optimizing_instance(optimize);
    if (instance != NULL)
        instance->load_compiled_subgraph = load;
    return instance;
}
