/* Defect: its compiled relu chain serializes, but load_compiled_subgraph() dereferences NULL.
   The conformance kit's NET-5 reports the crash by the call's name. */
#define MOCK_BACKEND_ID "MockBlobCrashesOnLoad"
#define MOCK_NO_BACKEND_FACTORY
#include <string.h>

#include "../subgraph_skeleton.h"

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
    volatile int *nowhere = NULL;
    (void)self, (void)data, (void)size, (void)compiled, (void)message, (void)message_size;
    *nowhere = 1;                        /* the defect */
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
