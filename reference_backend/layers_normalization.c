/*
 * Layers that normalize or reduce along axes: Softmax (and LogSoftmax), Reduce,
 * BatchNormalization and LayerNormalization.
 */
#include <math.h>
#include <stdlib.h>

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
    return ref_expect_output_like(layer, 0, message, message_size);
}

/* [outer, extent, inner] around axes [first, last] of x. */
static void split_axes(const BackendTensorInfo *x, uint32_t first, uint32_t last, rk_axis_split *s)
{
    s->outer = s->extent = s->inner = 1;
    for (uint32_t k = 0; k < x->num_dimensions; k++)
        if (k < first)
            s->outer *= x->dimensions[k];
        else if (k <= last)
            s->extent *= x->dimensions[k];
        else
            s->inner *= x->dimensions[k];
}

static void prepare_softmax(RefWorkload *w)
{
    split_axes(&w->inputs[0], w->d.softmax.axis, w->d.softmax.axis, &w->g.axis);
}

static int run_softmax(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_softmax_axis(in[0], out, &w->g.axis, w->d.softmax.beta, w->d.softmax.log != 0);
}

const RefLayerEntry ref_layer_softmax = {
    .name = "Softmax", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1,
    .descriptor_size = sizeof(BackendSoftmaxDescriptor),
    .defaults = softmax_defaults, .check = check_softmax, .prepare = prepare_softmax,
    .run = run_softmax,
};

/* ---- Reduce ------------------------------------------------------------------------------- */

static BackendStatus check_reduce(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                  char *message, size_t message_size)
{
    const BackendReduceDescriptor *d = &desc->reduce;
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t out[BACKEND_MAX_DIMENSIONS];
    uint32_t rank = 0;
    if (d->function > BACKEND_REDUCE_LOG_SUM_EXP)
        return UNSUPPORTED("reduce function %u is not supported", d->function);
    if (d->axes == 0 || (d->axes >> x->num_dimensions) != 0)
        return INVALID("Reduce axes 0x%x are not a non-empty set of the %u axes", d->axes,
                       x->num_dimensions);
    for (uint32_t k = 0; k < x->num_dimensions; k++)
        if (!((d->axes >> k) & 1u))
            out[rank++] = x->dimensions[k];
        else if (d->keep_dims)
            out[rank++] = 1;
    if (rank == 0)
        out[rank++] = 1;                /* every axis reduced away: one value, shape [1] */
    return ref_expect_output(layer, out, rank, message, message_size);
}

static void prepare_reduce(RefWorkload *w)
{
    const BackendTensorInfo *x = &w->inputs[0];
    rk_reduce_plan *g = &w->g.reduce;
    int previous = -1;
    g->rank = 0;
    g->reduced = 0;
    g->count = 1;
    g->function = (int)w->d.reduce.function;
    /* axes of extent 1 do not matter; neighbours of the same kind are one axis */
    for (uint32_t k = 0; k < x->num_dimensions; k++) {
        int reduced = (int)(w->d.reduce.axes >> k) & 1;
        if (reduced)
            g->count *= x->dimensions[k];
        if (x->dimensions[k] == 1)
            continue;
        if (reduced == previous) {
            g->extent[g->rank - 1] *= x->dimensions[k];
            continue;
        }
        g->extent[g->rank] = x->dimensions[k];
        g->reduced |= (uint32_t)reduced << g->rank;
        g->rank++;
        previous = reduced;
    }
    if (g->rank == 0) {
        g->rank = 1;
        g->extent[0] = 1;
        g->reduced = 1;
    }
}

static int run_reduce(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_reduce(in[0], out, &w->g.reduce);
}

const RefLayerEntry ref_layer_reduce = {
    .name = "Reduce", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_REDUCE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendReduceDescriptor), .since_1_3 = 1,
    .check = check_reduce, .prepare = prepare_reduce, .run = run_reduce,
};

/* ---- BatchNormalization ------------------------------------------------------------------- */

static BackendStatus check_epsilon(float epsilon, char *message, size_t message_size)
{
    if (!(epsilon > 0.0f) || !isfinite(epsilon))
        return INVALID("epsilon must be finite and greater than 0");
    return BACKEND_STATUS_OK;
}

static BackendStatus check_batch_normalization(const BackendLayerDescription *layer,
                                               const RefDescriptor *d, char *message,
                                               size_t message_size)
{
    static const char *const NAMES[] = { "mean", "variance", "scale", "bias" };
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t channels = x->dimensions[x->num_dimensions - 1];
    TRY(check_epsilon(d->batch_normalization.epsilon, message, message_size));
    for (uint32_t i = 1; i < 5; i++)
        if (layer->inputs[i].num_dimensions != 1 || layer->inputs[i].dimensions[0] != channels)
            return INVALID("BatchNormalization %s must have shape [%lld], the input's last axis",
                           NAMES[i - 1], (long long)channels);
    return ref_expect_output_like(layer, 0, message, message_size);
}

static int run_batch_normalization(const RefWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *x = &w->inputs[0];
    int64_t channels = x->dimensions[x->num_dimensions - 1];
    return rk_batch_normalization(in[0], in[1], in[2], in[3], in[4], out, ref_elements(x) / channels,
                                  channels, w->d.batch_normalization.epsilon);
}

const RefLayerEntry ref_layer_batch_normalization = {
    .name = "BatchNormalization", .min_inputs = 5, .max_inputs = 5,
    .descriptor_min_size = BACKEND_BATCH_NORMALIZATION_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendBatchNormalizationDescriptor), .since_1_3 = 1,
    .check = check_batch_normalization, .run = run_batch_normalization,
};

/* ---- LayerNormalization ------------------------------------------------------------------- */

static BackendStatus check_layer_normalization(const BackendLayerDescription *layer,
                                               const RefDescriptor *desc, char *message,
                                               size_t message_size)
{
    const BackendLayerNormalizationDescriptor *d = &desc->layer_normalization;
    const BackendTensorInfo *x = &layer->inputs[0];
    uint32_t rank = x->num_dimensions;
    TRY(ref_expect_inputs(layer, d->bias_enabled ? 3 : 2, message, message_size));
    TRY(check_epsilon(d->epsilon, message, message_size));
    if (d->axis >= rank)
        return INVALID("LayerNormalization axis %u is out of range for rank %u", d->axis, rank);
    for (uint32_t i = 1; i < layer->num_inputs; i++) {
        /* right-aligned against the normalized axes, each 1 or equal */
        const BackendTensorInfo *p = &layer->inputs[i];
        int fits = p->num_dimensions <= rank - d->axis;
        for (uint32_t k = 0; fits && k < p->num_dimensions; k++) {
            int64_t n = x->dimensions[rank - p->num_dimensions + k];
            fits = p->dimensions[k] == 1 || p->dimensions[k] == n;
        }
        if (!fits) {
            char sp[160];
            ref_format_shape(p, sp, sizeof sp);
            return INVALID("LayerNormalization %s %s does not broadcast to the normalized axes "
                           "from %u", i == 1 ? "scale" : "bias", sp, d->axis);
        }
    }
    return ref_expect_output_like(layer, 0, message, message_size);
}

static void prepare_layer_normalization(RefWorkload *w)
{
    split_axes(&w->inputs[0], w->d.layer_normalization.axis, w->inputs[0].num_dimensions - 1,
               &w->g.axis);
}

/* The scale or bias as one value per normalized element: as given when it has them all, else
   broadcast into `room` (a multiplication by 1 of the NumPy broadcasting kernel). */
static const float *spread(const RefWorkload *w, uint32_t index, const float *given, float *room)
{
    const BackendTensorInfo *x = &w->inputs[0], *p = &w->inputs[index];
    uint32_t axis = w->d.layer_normalization.axis, rank = x->num_dimensions - axis;
    int64_t shape[BACKEND_MAX_DIMENSIONS], ones[BACKEND_MAX_DIMENSIONS];
    static const float one = 1.0f;
    if (ref_elements(p) == w->g.axis.extent)
        return given;                   /* every normalized element has its own value */
    for (uint32_t k = 0; k < rank; k++) {
        shape[k] = k < rank - p->num_dimensions ? 1 : p->dimensions[k - (rank - p->num_dimensions)];
        ones[k] = 1;
    }
    rk_binary(RK_MUL, given, shape, &one, ones, room, x->dimensions + axis, (int)rank);
    return room;
}

static int run_layer_normalization(const RefWorkload *w, const float *const *in, float *out)
{
    const rk_axis_split *g = &w->g.axis;
    int bias = w->d.layer_normalization.bias_enabled != 0;
    float *room = malloc((size_t)(2 * g->extent) * sizeof *room);
    if (room == NULL)
        return 1;
    const float *scale = spread(w, 1, in[1], room);
    const float *shift = bias ? spread(w, 2, in[2], room + g->extent) : NULL;
    rk_layer_normalization(in[0], scale, shift, out, g->outer, g->extent,
                           w->d.layer_normalization.epsilon);
    free(room);
    return 0;
}

const RefLayerEntry ref_layer_layer_normalization = {
    .name = "LayerNormalization", .min_inputs = 2, .max_inputs = 3,
    .descriptor_min_size = BACKEND_LAYER_NORMALIZATION_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendLayerNormalizationDescriptor), .since_1_3 = 1,
    .check = check_layer_normalization, .prepare = prepare_layer_normalization,
    .run = run_layer_normalization,
};
