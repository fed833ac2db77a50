/*
 * Layers that normalize or reduce along axes: Softmax (and LogSoftmax), Reduce,
 * BatchNormalization and LayerNormalization.
 */
#include <math.h>

#include "layers_internal.h"

/* ---- Softmax ------------------------------------------------------------------------------ */

static void softmax_defaults(RefDescriptor *d, const BackendLayerDescription *layer)
{
    BackendSoftmaxDescriptor *s = &d->softmax;
    if (!BACKEND_STRUCT_HAS(BackendSoftmaxDescriptor, s, axis))
        s->axis = layer->inputs[0].num_dimensions ? layer->inputs[0].num_dimensions - 1 : 0;
    if (!BACKEND_STRUCT_HAS(BackendSoftmaxDescriptor, s, log))
        s->log = 0;
}

static BackendStatus check_softmax(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                   char *message, size_t message_size)
{
    const BackendSoftmaxDescriptor *d = &desc->softmax;
    uint32_t rank = layer->inputs[0].num_dimensions;
    if (rank < 1)
        return INVALID("Softmax needs at least one dimension");
    if (!isfinite(d->beta))
        return INVALID("beta must be finite");
    if (d->axis >= rank)
        return INVALID("Softmax axis %u is out of range for rank %u", d->axis, rank);
    if (d->axis != rank - 1 || d->log != 0)
        return UNSUPPORTED("Softmax over an axis other than the last, or its log, is not supported");
    return ref_expect_output_like(layer, 0, message, message_size);
}

static int run_softmax(const RefWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *x = &w->inputs[0];
    int64_t cols = x->dimensions[x->num_dimensions - 1];
    return rk_softmax(in[0], out, ref_elements(x) / cols, cols, w->d.softmax.beta);
}

const RefLayerEntry ref_layer_softmax = {
    .name = "Softmax", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1,
    .descriptor_size = sizeof(BackendSoftmaxDescriptor),
    .defaults = softmax_defaults, .check = check_softmax, .run = run_softmax,
};

/* ---- Reduce, BatchNormalization, LayerNormalization --------------------------------------- */

const RefLayerEntry ref_layer_reduce = {
    .name = "Reduce", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_REDUCE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendReduceDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};

const RefLayerEntry ref_layer_batch_normalization = {
    .name = "BatchNormalization", .min_inputs = 5, .max_inputs = 5,
    .descriptor_min_size = BACKEND_BATCH_NORMALIZATION_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendBatchNormalizationDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};

const RefLayerEntry ref_layer_layer_normalization = {
    .name = "LayerNormalization", .min_inputs = 2, .max_inputs = 3,
    .descriptor_min_size = BACKEND_LAYER_NORMALIZATION_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendLayerNormalizationDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};
