/*
 * subgraph_skeleton.h - the Backend API 1.2 parts the network mocks share.
 *
 * A network mock runs Activation relu (skeleton.h's MOCK_RUNS_RELU) and answers
 * optimize_subgraph() in its own file, where its one defect is. This header gives it a valid
 * compiled sub-graph to hand over: relu of its one boundary input, written to every boundary
 * output (what any chain of relu layers computes). MOCK_COMPILED_BEFORE_EXECUTE(self) runs
 * first in its execute() (empty by default).
 *
 * Include after defining the skeleton.h knobs; it includes skeleton.h itself.
 */
#ifndef MOCK_BACKENDS_SUBGRAPH_SKELETON_H
#define MOCK_BACKENDS_SUBGRAPH_SKELETON_H

#define MOCK_RUNS_RELU
#include "skeleton.h"

#ifndef MOCK_COMPILED_BEFORE_EXECUTE
#define MOCK_COMPILED_BEFORE_EXECUTE(self)
#endif

static BackendStatus mock_compiled_relu_execute(BackendCompiledSubgraph *self,
                                                const BackendBuffer *inputs, uint32_t num_inputs,
                                                const BackendBuffer *outputs, uint32_t num_outputs,
                                                char *message, size_t message_size)
{
    MOCK_COMPILED_BEFORE_EXECUTE(self);
    (void)self;
    if (num_inputs != 1) {
        if (message != NULL && message_size > 0)
            snprintf(message, message_size, "the compiled relu chain takes one input");
        return BACKEND_STATUS_INVALID_ARGUMENT;
    }
    for (uint32_t o = 0; o < num_outputs; o++) {
        const float *x = (const float *)inputs[0].data;
        float *y = (float *)outputs[o].data;
        if (outputs[o].size_bytes != inputs[0].size_bytes) {
            if (message != NULL && message_size > 0)
                snprintf(message, message_size, "output %u has another size than the input", o);
            return BACKEND_STATUS_INVALID_ARGUMENT;
        }
        for (uint64_t i = 0; i < inputs[0].size_bytes / sizeof(float); i++)
            y[i] = x[i] > 0 ? x[i] : 0;
    }
    return BACKEND_STATUS_OK;
}

static void mock_compiled_destroy(BackendCompiledSubgraph *self)
{
    free(self);
}

/* A new compiled relu chain, or NULL when out of memory. */
__attribute__((unused)) static BackendCompiledSubgraph *mock_compiled_relu_new(void)
{
    BackendCompiledSubgraph *compiled = calloc(1, sizeof *compiled);
    if (compiled == NULL)
        return NULL;
    compiled->struct_size = (uint32_t)sizeof *compiled;
    compiled->execute = mock_compiled_relu_execute;
    compiled->destroy = mock_compiled_destroy;
    return compiled;
}

/* A new instance whose optimize_subgraph is `optimize`. */
static BackendInstance *mock_new_optimizing_instance(
    BackendStatus (*optimize)(const BackendInstance *, const BackendSubgraph *,
                              BackendOptimizationViews *, char *, size_t))
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL)
        instance->optimize_subgraph = optimize;
    return instance;
}

#endif /* MOCK_BACKENDS_SUBGRAPH_SKELETON_H */
