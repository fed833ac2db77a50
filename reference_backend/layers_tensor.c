/*
 * Layers that move data without arithmetic: Reshape, Concatenation, Slice, Transpose, Pad.
 */
#include <stdlib.h>
#include <string.h>

#include "layers_internal.h"

/* ---- Reshape ------------------------------------------------------------------------------ */

static BackendStatus check_reshape(const BackendLayerDescription *layer, const RefDescriptor *d,
                                   char *message, size_t message_size)
{
    (void)d;
    if (ref_elements(&layer->inputs[0]) != ref_elements(&layer->outputs[0]))
        return INVALID("Reshape from %lld to %lld elements",
                       (long long)ref_elements(&layer->inputs[0]),
                       (long long)ref_elements(&layer->outputs[0]));
    return BACKEND_STATUS_OK;
}

static int run_reshape(const RefWorkload *w, const float *const *in, float *out)
{
    if (out != in[0])               /* a program's Reshape output shares its input's bytes */
        memmove(out, in[0], (size_t)ref_elements(&w->output) * sizeof(float));
    return 0;
}

const RefLayerEntry ref_layer_reshape = {
    .name = "Reshape", .min_inputs = 1, .max_inputs = 1,
    .check = check_reshape, .run = run_reshape,
};

/* ---- Concatenation ------------------------------------------------------------------------ */

static BackendStatus check_concatenation(const BackendLayerDescription *layer, const RefDescriptor *d,
                                         char *message, size_t message_size)
{
    const BackendTensorInfo *first = &layer->inputs[0], *out = &layer->outputs[0];
    uint32_t axis = d->concatenation.axis, rank = first->num_dimensions;
    int64_t along = 0;
    if (axis >= rank)
        return INVALID("Concatenation axis %u is out of range for rank %u", axis, rank);
    if (out->num_dimensions != rank)
        return INVALID("the output has rank %u, the inputs %u", out->num_dimensions, rank);
    for (uint32_t i = 0; i < layer->num_inputs; i++) {
        const BackendTensorInfo *x = &layer->inputs[i];
        if (x->num_dimensions != rank)
            return INVALID("input %u has rank %u, input 0 has %u", i, x->num_dimensions, rank);
        for (uint32_t k = 0; k < rank; k++)
            if (k != axis && x->dimensions[k] != out->dimensions[k]) {
                char sx[160], so[160];
                ref_format_shape(x, sx, sizeof sx);
                ref_format_shape(out, so, sizeof so);
                return INVALID("input %u %s does not match the output %s except along axis %u", i,
                               sx, so, axis);
            }
        along += x->dimensions[axis];    /* each at most 2^40, at most 2^16 of them */
    }
    if (along != out->dimensions[axis])
        return INVALID("the inputs add up to %lld along axis %u, the output has %lld",
                       (long long)along, axis, (long long)out->dimensions[axis]);
    return BACKEND_STATUS_OK;
}

static void prepare_concatenation(RefWorkload *w)
{
    uint32_t axis = w->d.concatenation.axis;
    rk_axis_split *g = &w->g.axis;
    g->outer = g->inner = 1;
    for (uint32_t k = 0; k < w->output.num_dimensions; k++)
        if (k < axis)
            g->outer *= w->output.dimensions[k];
        else if (k > axis)
            g->inner *= w->output.dimensions[k];
    g->extent = w->output.dimensions[axis];
}

static int run_concatenation(const RefWorkload *w, const float *const *in, float *out)
{
    int64_t small[64] = { 0 }, *chunk = w->num_inputs <= 64 ? small : malloc(w->num_inputs * sizeof *chunk);
    const rk_axis_split *g = &w->g.axis;
    if (chunk == NULL)
        return 1;
    for (uint32_t i = 0; i < w->num_inputs; i++)
        chunk[i] = w->inputs[i].dimensions[w->d.concatenation.axis] * g->inner;
    rk_concat(in, chunk, w->num_inputs, g->outer, g->extent * g->inner, out);
    if (chunk != small)
        free(chunk);
    return 0;
}

const RefLayerEntry ref_layer_concatenation = {
    .name = "Concatenation", .min_inputs = 1, .max_inputs = REF_MAX_INPUTS,
    .descriptor_min_size = BACKEND_CONCATENATION_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendConcatenationDescriptor), .since_1_3 = 1,
    .check = check_concatenation, .prepare = prepare_concatenation, .run = run_concatenation,
};

/* ---- Slice -------------------------------------------------------------------------------- */

static BackendStatus check_slice(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                 char *message, size_t message_size)
{
    const BackendSliceDescriptor *d = &desc->slice;
    const BackendTensorInfo *x = &layer->inputs[0], *out = &layer->outputs[0];
    if (out->num_dimensions != x->num_dimensions)
        return INVALID("the output has rank %u, the input %u", out->num_dimensions, x->num_dimensions);
    for (uint32_t k = 0; k < x->num_dimensions; k++) {
        int64_t n = x->dimensions[k], begin = d->begin[k], step = d->step[k];
        int64_t count = out->dimensions[k];
        if (step == 0)
            return INVALID("Slice step along axis %u is 0", k);
        if (begin < 0 || begin >= n)
            return INVALID("Slice begins at %lld along axis %u, outside the input's 0 to %lld",
                           (long long)begin, k, (long long)(n - 1));
        /* the last index read, begin + (count - 1) * step, inside [0, n): without overflow */
        if (count > 1 && (step > 0 ? step > n || (count - 1) > (n - 1 - begin) / step
                                   : step < -n || (count - 1) > begin / -step))
            return INVALID("Slice reads %lld elements from %lld in steps of %lld along axis %u, "
                           "past the input's extent %lld", (long long)count, (long long)begin,
                           (long long)step, k, (long long)n);
    }
    return BACKEND_STATUS_OK;
}

/* Input strides (dense, in elements) of a tensor info. */
static void dense_strides(const BackendTensorInfo *x, int64_t *stride)
{
    int64_t s = 1;
    for (uint32_t k = x->num_dimensions; k-- > 0;) {
        stride[k] = s;
        s *= x->dimensions[k];
    }
}

static void prepare_slice(RefWorkload *w)
{
    rk_strided_copy *g = &w->g.copy;
    int64_t stride[BACKEND_MAX_DIMENSIONS];
    dense_strides(&w->inputs[0], stride);
    g->rank = (int)w->output.num_dimensions;
    g->offset = 0;
    for (int k = 0; k < g->rank; k++) {
        g->extent[k] = w->output.dimensions[k];
        g->stride[k] = w->d.slice.step[k] * stride[k];
        g->offset += w->d.slice.begin[k] * stride[k];
    }
    rk_strided_copy_plan(g);
}

static int run_copy(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_copy_strided(in[0], out, &w->g.copy);
}

const RefLayerEntry ref_layer_slice = {
    .name = "Slice", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_SLICE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendSliceDescriptor), .since_1_3 = 1,
    .check = check_slice, .prepare = prepare_slice, .run = run_copy,
};

/* ---- Transpose ---------------------------------------------------------------------------- */

static BackendStatus check_transpose(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                     char *message, size_t message_size)
{
    const BackendTransposeDescriptor *d = &desc->transpose;
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t out[BACKEND_MAX_DIMENSIONS];
    uint32_t seen = 0, rank = x->num_dimensions;
    for (uint32_t k = 0; k < rank; k++) {
        if (d->perm[k] >= rank || (seen >> d->perm[k]) & 1u)
            return INVALID("Transpose perm is not a permutation of the %u axes (entry %u is %u)",
                           rank, k, d->perm[k]);
        seen |= 1u << d->perm[k];
        out[k] = x->dimensions[d->perm[k]];
    }
    return ref_expect_output(layer, out, rank, message, message_size);
}

static void prepare_transpose(RefWorkload *w)
{
    rk_strided_copy *g = &w->g.copy;
    int64_t stride[BACKEND_MAX_DIMENSIONS];
    dense_strides(&w->inputs[0], stride);
    g->rank = (int)w->output.num_dimensions;
    g->offset = 0;
    for (int k = 0; k < g->rank; k++) {
        g->extent[k] = w->output.dimensions[k];
        g->stride[k] = stride[w->d.transpose.perm[k]];
    }
    rk_strided_copy_plan(g);
}

const RefLayerEntry ref_layer_transpose = {
    .name = "Transpose", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_TRANSPOSE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendTransposeDescriptor), .since_1_3 = 1,
    .check = check_transpose, .prepare = prepare_transpose, .run = run_copy,
};

/* ---- Pad ---------------------------------------------------------------------------------- */

static BackendStatus check_pad(const BackendLayerDescription *layer, const RefDescriptor *desc,
                               char *message, size_t message_size)
{
    const BackendPadDescriptor *d = &desc->pad;
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t out[BACKEND_MAX_DIMENSIONS];
    if (d->mode > BACKEND_PAD_EDGE)
        return UNSUPPORTED("pad mode %u is not supported", d->mode);
    for (uint32_t k = 0; k < x->num_dimensions; k++) {
        int64_t n = x->dimensions[k], b = d->pad_begin[k], e = d->pad_end[k];
        /* (constant mode may remove more than the axis holds on one side and add some back
           on the other: those outputs are the value) */
        if (b < -REF_MAX_ELEMENTS || b > REF_MAX_ELEMENTS || e < -REF_MAX_ELEMENTS ||
            e > REF_MAX_ELEMENTS)
            return INVALID("pads %lld and %lld along axis %u are out of range for extent %lld",
                           (long long)b, (long long)e, k, (long long)n);
        out[k] = n + b + e;
        if (out[k] < 1)
            return INVALID("pads %lld and %lld leave axis %u of extent %lld empty", (long long)b,
                           (long long)e, k, (long long)n);
        if (d->mode != BACKEND_PAD_CONSTANT && n + (b < 0 ? b : 0) + (e < 0 ? e : 0) < 1)
            return INVALID("the negative pads along axis %u leave nothing to %s", k,
                           d->mode == BACKEND_PAD_REFLECT ? "reflect" : "repeat");
        if (d->mode == BACKEND_PAD_REFLECT && (b >= n || e >= n))
            return INVALID("reflect pads along axis %u must be smaller than its extent %lld, got "
                           "%lld and %lld", k, (long long)n, (long long)b, (long long)e);
    }
    return ref_expect_output(layer, out, x->num_dimensions, message, message_size);
}

static void prepare_pad(RefWorkload *w)
{
    const BackendPadDescriptor *d = &w->d.pad;
    const BackendTensorInfo *x = &w->inputs[0];
    rk_pad_plan *g = &w->g.pad;
    int last = -1;                      /* the last axis with a pad */
    for (uint32_t k = 0; k < x->num_dimensions; k++)
        if (d->pad_begin[k] != 0 || d->pad_end[k] != 0)
            last = (int)k;
    g->element = 1;
    for (uint32_t k = (uint32_t)(last + 1); k < x->num_dimensions; k++)
        g->element *= x->dimensions[k];
    g->rank = last < 0 ? 1 : last + 1;
    for (int k = 0; k < g->rank; k++) {
        int64_t n = last < 0 ? 1 : x->dimensions[k];
        int64_t b = last < 0 ? 0 : d->pad_begin[k], e = last < 0 ? 0 : d->pad_end[k];
        g->in[k] = n;
        g->out[k] = n + b + e;
        g->begin[k] = b;
        g->lo[k] = b < 0 ? -b : 0;
        g->hi[k] = e < 0 ? n + e : n;
    }
    g->mode = (int)d->mode;
    g->value = d->value;
}

static int run_pad(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_pad(in[0], out, &w->g.pad);
}

const RefLayerEntry ref_layer_pad = {
    .name = "Pad", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_PAD_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendPadDescriptor), .since_1_3 = 1,
    .check = check_pad, .prepare = prepare_pad, .run = run_pad,
};
