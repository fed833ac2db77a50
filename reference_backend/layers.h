/*
 * Layer validation and execution for the reference backend.
 *
 * ref_check_layer() is the one place that decides whether a layer description is something the
 * reference backend can run; both is_layer_supported() and create_workload() call it, so "supported"
 * and "creatable" can never disagree.
 */
#ifndef REFERENCE_BACKEND_LAYERS_H
#define REFERENCE_BACKEND_LAYERS_H

#include "backend_api.h"

/* Writes a formatted message (truncated to fit) and returns `status`. */
BackendStatus ref_fail(char *message, size_t message_size, BackendStatus status, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* BACKEND_STATUS_OK, or why the layer cannot run here (INVALID_ARGUMENT or UNSUPPORTED). */
BackendStatus ref_check_layer(const BackendLayerDescription *layer, char *message, size_t message_size);

/* A workload for a layer ref_check_layer() accepted. */
BackendStatus ref_create_workload(const BackendLayerDescription *layer, BackendWorkload **workload,
                                  char *message, size_t message_size);

/* Backend API 1.2 optimize_subgraph (optimizer.c, with optimizer_*.c): compiles the sub-graph
   into one program that runs every layer in one call, fusing Convolution2d,
   DepthwiseConvolution2d and FullyConnected with a following residual Addition and/or
   Activation, intermediates in one planned arena. */
BackendStatus ref_optimize_subgraph(const BackendInstance *self, const BackendSubgraph *subgraph,
                                    BackendOptimizationViews *views, char *message, size_t message_size);

/* Backend API 1.2 profiling (optimizer_profiling.c) and serialized compiled sub-graphs
   (optimizer_format.c). */
typedef struct RefProfiling RefProfiling;
BackendStatus ref_create_profiling_context(const BackendInstance *self,
                                           BackendProfilingContext **context, char *message,
                                           size_t message_size);
BackendStatus ref_load_compiled_subgraph(const BackendInstance *self, const void *data, uint64_t size,
                                         BackendCompiledSubgraph **compiled, char *message,
                                         size_t message_size);

#endif /* REFERENCE_BACKEND_LAYERS_H */
