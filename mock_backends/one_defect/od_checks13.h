/*
 * od_checks13.h - the checks of the layer types of Backend API 1.3 (od_check_layer13, called by
 * od_check_layer for them). Part of base.h. Every value of a descriptor is checked against the
 * tensor infos before anything is computed from it: ranks 1 to 6, axes, permutations, slice
 * bounds, pads, scales and groups; and the output info must be what the descriptor implies.
 */
#ifndef ONE_DEFECT_CHECKS13_H
#define ONE_DEFECT_CHECKS13_H

#define OD_LIMIT ((int64_t)1 << 40) /* most elements of a tensor; bounds pads too */

static int od_descriptor_reaches(const void *descriptor, size_t size)
{
    return descriptor != NULL && *(const uint32_t *)descriptor >= size;
}

static BackendStatus od_expect_same_shape(const BackendLayerDescription *layer, char *message,
                                          size_t message_size)
{
    const BackendTensorInfo *x = &layer->inputs[0];
    return od_expect_output(layer, x->dimensions, x->num_dimensions, message, message_size);
}

/* Slice along one axis: `count` outputs read begin, begin + step, ...; all inside [0, n). */
static int od_slice_fits(int64_t n, int64_t begin, int64_t step, int64_t count)
{
    if (step == 0 || begin < 0 || begin >= n || count < 1)
        return 0;
    if (count == 1)
        return 1;
    if (step > 0)
        return (count - 1) <= (n - 1 - begin) / step;
    return step != INT64_MIN && (count - 1) <= begin / -step;
}

/* NumPy's matmul shapes: the output of a [.., M, K] @ [.., K, N] with 1-D operands promoted
   and the promoted axes removed again. */
static BackendStatus od_mat_mul_shape(const BackendTensorInfo *a, const BackendTensorInfo *b, int64_t *dims,
                                      uint32_t *rank, char *message, size_t message_size)
{
    uint32_t ra = a->num_dimensions, rb = b->num_dimensions;
    int64_t k_a = a->dimensions[ra - 1], k_b = rb == 1 ? b->dimensions[0] : b->dimensions[rb - 2];
    uint32_t batch_a = ra > 2 ? ra - 2 : 0, batch_b = rb > 2 ? rb - 2 : 0;
    uint32_t batch = batch_a > batch_b ? batch_a : batch_b;
    if (k_a != k_b)
        return OD_INVALID("MatMul: the inner dimensions differ");
    for (uint32_t i = 0; i < batch; i++) {
        int64_t da = i + batch_a >= batch ? a->dimensions[i + batch_a - batch] : 1;
        int64_t db = i + batch_b >= batch ? b->dimensions[i + batch_b - batch] : 1;
        if (da != db && da != 1 && db != 1)
            return OD_INVALID("MatMul: the batch dimensions do not broadcast");
        dims[i] = da > db ? da : db;
    }
    *rank = batch;
    if (ra > 1)
        dims[(*rank)++] = a->dimensions[ra - 2];
    if (rb > 1)
        dims[(*rank)++] = b->dimensions[rb - 1];
    if (*rank == 0)
        dims[(*rank)++] = 1;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_check_resize(const BackendLayerDescription *layer, const BackendResizeDescriptor *d,
                                     char *message, size_t message_size)
{
    const BackendTensorInfo *x = &layer->inputs[0], *o = &layer->outputs[0];
    if (x->num_dimensions != 4 || o->num_dimensions != 4 || o->dimensions[0] != x->dimensions[0] ||
        o->dimensions[3] != x->dimensions[3])
        return OD_INVALID("Resize takes [N, H, W, C] to [N, H', W', C]");
    if (d->mode > BACKEND_RESIZE_CUBIC || d->coordinate_transformation > BACKEND_RESIZE_TF_HALF_PIXEL_FOR_NN ||
        d->nearest_mode > BACKEND_RESIZE_CEIL || d->exclude_outside > 1)
        return OD_INVALID("Resize: unknown mode, coordinate transformation or nearest mode");
    if (!(d->scale_y > 0) || !(d->scale_x > 0) || !isfinite(d->scale_y) || !isfinite(d->scale_x) ||
        !isfinite(d->cubic_coeff_a))
        return OD_INVALID("Resize: scales must be finite and greater than 0");
    return BACKEND_STATUS_OK;
}

static BackendStatus od_check_transpose_convolution(const BackendLayerDescription *layer,
                                                    const BackendTransposeConvolution2dDescriptor *d,
                                                    char *message, size_t message_size)
{
    const BackendTensorInfo *x = &layer->inputs[0], *w = &layer->inputs[1];
    int64_t dims[4];
    const uint32_t stride[2] = {d->stride_y, d->stride_x}, dilation[2] = {d->dilation_y, d->dilation_x};
    const uint32_t extra[2] = {d->output_padding_y, d->output_padding_x};
    const uint32_t before[2] = {d->pad_top, d->pad_left}, after[2] = {d->pad_bottom, d->pad_right};
    if (layer->num_inputs != (d->bias_enabled ? 3u : 2u) || x->num_dimensions != 4 || w->num_dimensions != 4)
        return OD_INVALID("TransposeConvolution2d takes x [N, H, W, C], w [C, kH, kW, O/groups] and a bias");
    if (d->groups < 1 || x->dimensions[3] % d->groups != 0 || w->dimensions[0] != x->dimensions[3])
        return OD_INVALID("TransposeConvolution2d: groups %u and the weights do not fit the channels", d->groups);
    dims[0] = x->dimensions[0];
    dims[3] = w->dimensions[3] * d->groups;
    for (int a = 0; a < 2; a++) {
        if (stride[a] < 1 || dilation[a] < 1 || (extra[a] >= stride[a] && extra[a] >= dilation[a]))
            return OD_INVALID("TransposeConvolution2d: stride, dilation or output padding out of range");
        dims[1 + a] = (int64_t)stride[a] * (x->dimensions[1 + a] - 1) + extra[a] +
                      (w->dimensions[1 + a] - 1) * (int64_t)dilation[a] + 1 - before[a] - after[a];
        if (dims[1 + a] < 1)
            return OD_INVALID("TransposeConvolution2d: the padding leaves no output");
    }
    if (d->bias_enabled && (layer->inputs[2].num_dimensions != 1 || layer->inputs[2].dimensions[0] != dims[3]))
        return OD_INVALID("the bias does not match the output channels");
    return od_expect_output(layer, dims, 4, message, message_size);
}

static BackendStatus od_check_layer13(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    const BackendTensorInfo *x = &layer->inputs[0];
    const void *descriptor = layer->descriptor;
    int64_t dims[BACKEND_MAX_DIMENSIONS];
    uint32_t rank = x->num_dimensions;
    for (uint32_t i = 0; i <= layer->num_inputs; i++) {
        const BackendTensorInfo *t = i < layer->num_inputs ? &layer->inputs[i] : &layer->outputs[0];
        if (!OD_RANK_KNOWN(t->num_dimensions))
            return OD_INVALID("tensor %u has rank %u; layers of Backend API 1.3 take ranks 1 to %d", i,
                              t->num_dimensions, BACKEND_MAX_LAYER_RANK);
    }
    switch (layer->layer_type) {
    case BACKEND_LAYER_SUBTRACTION:
    case BACKEND_LAYER_DIVISION:
    case BACKEND_LAYER_MAXIMUM:
    case BACKEND_LAYER_MINIMUM:
    case BACKEND_LAYER_POWER:
        if (layer->num_inputs != 2)
            return OD_INVALID("binary layers take two inputs");
        OD_TRY(od_broadcast(x, &layer->inputs[1], dims, &rank, message, message_size));
        return od_expect_output(layer, dims, rank, message, message_size);
    case BACKEND_LAYER_ELEMENTWISE_UNARY: {
        const BackendElementwiseUnaryDescriptor *d = descriptor;
        if (layer->num_inputs != 1 || !od_descriptor_reaches(d, BACKEND_ELEMENTWISE_UNARY_DESCRIPTOR_SIZE_1_3))
            return OD_INVALID("ElementwiseUnary takes one input and its descriptor");
        if (d->function > BACKEND_UNARY_ATANH)
            return OD_UNSUPPORTED("unary function %u", d->function);
        return od_expect_same_shape(layer, message, message_size);
    }
    case BACKEND_LAYER_PRELU: {
        const BackendTensorInfo *slope = &layer->inputs[1];
        if (layer->num_inputs != 2 || slope->num_dimensions > rank)
            return OD_INVALID("Prelu takes x and a slope of no higher rank");
        for (uint32_t i = 0; i < slope->num_dimensions; i++) {
            int64_t s = slope->dimensions[i], n = x->dimensions[i + rank - slope->num_dimensions];
            if (s != 1 && s != n)
                return OD_INVALID("Prelu: the slope does not broadcast to the input");
        }
        return od_expect_same_shape(layer, message, message_size);
    }
    case BACKEND_LAYER_CONCATENATION: {
        const BackendConcatenationDescriptor *d = descriptor;
        int64_t along = 0;
        if (!od_descriptor_reaches(d, BACKEND_CONCATENATION_DESCRIPTOR_SIZE_1_3) || d->axis >= rank)
            return OD_INVALID("Concatenation: no descriptor, or an axis past the rank");
        for (uint32_t i = 0; i < layer->num_inputs; i++) {
            const BackendTensorInfo *t = &layer->inputs[i];
            if (t->num_dimensions != rank)
                return OD_INVALID("Concatenation: input %u has another rank", i);
            for (uint32_t k = 0; k < rank; k++)
                if (k != d->axis && t->dimensions[k] != x->dimensions[k])
                    return OD_INVALID("Concatenation: input %u differs off the axis", i);
            along += t->dimensions[d->axis];
        }
        memcpy(dims, x->dimensions, rank * sizeof dims[0]);
        dims[d->axis] = along;
        return od_expect_output(layer, dims, rank, message, message_size);
    }
    case BACKEND_LAYER_SLICE: {
        const BackendSliceDescriptor *d = descriptor;
        const BackendTensorInfo *o = &layer->outputs[0];
        if (layer->num_inputs != 1 || !od_descriptor_reaches(d, BACKEND_SLICE_DESCRIPTOR_SIZE_1_3) ||
            o->num_dimensions != rank)
            return OD_INVALID("Slice takes one input, its descriptor and an output of its rank");
        for (uint32_t k = 0; k < rank; k++)
            if (!od_slice_fits(x->dimensions[k], d->begin[k], d->step[k], o->dimensions[k]))
                return OD_INVALID("Slice: axis %u: begin %lld, step %lld and %lld outputs leave the input", k,
                                  (long long)d->begin[k], (long long)d->step[k], (long long)o->dimensions[k]);
        return BACKEND_STATUS_OK;
    }
    case BACKEND_LAYER_TRANSPOSE: {
        const BackendTransposeDescriptor *d = descriptor;
        uint32_t seen = 0;
        if (layer->num_inputs != 1 || !od_descriptor_reaches(d, BACKEND_TRANSPOSE_DESCRIPTOR_SIZE_1_3))
            return OD_INVALID("Transpose takes one input and its descriptor");
        for (uint32_t k = 0; k < rank; k++) {
            if (d->perm[k] >= rank || (seen >> d->perm[k]) & 1u)
                return OD_INVALID("Transpose: perm is not a permutation of the %u axes", rank);
            seen |= 1u << d->perm[k];
            dims[k] = x->dimensions[d->perm[k]];
        }
        return od_expect_output(layer, dims, rank, message, message_size);
    }
    case BACKEND_LAYER_PAD: {
        const BackendPadDescriptor *d = descriptor;
        if (layer->num_inputs != 1 || !od_descriptor_reaches(d, BACKEND_PAD_DESCRIPTOR_SIZE_1_3))
            return OD_INVALID("Pad takes one input and its descriptor");
        if (d->mode > BACKEND_PAD_EDGE || !isfinite(d->value))
            return OD_INVALID("Pad: unknown mode %u, or a value that is not finite", d->mode);
        for (uint32_t k = 0; k < rank; k++) {
            int64_t n = x->dimensions[k], b = d->pad_begin[k], e = d->pad_end[k], kept;
            if (b < -OD_LIMIT || b > OD_LIMIT || e < -OD_LIMIT || e > OD_LIMIT || n + b + e < 1)
                return OD_INVALID("Pad: the pads of axis %u leave it empty or are out of range", k);
            kept = n - (b < 0 ? -b : 0) - (e < 0 ? -e : 0);
            if (d->mode != BACKEND_PAD_CONSTANT && (kept < 1 || (d->mode == BACKEND_PAD_REFLECT &&
                                                                 (b >= kept || e >= kept))))
                return OD_INVALID("Pad: reflect and edge pads of axis %u need what is kept to reach", k);
            dims[k] = n + b + e;
        }
        return od_expect_output(layer, dims, rank, message, message_size);
    }
    case BACKEND_LAYER_RESIZE:
        if (layer->num_inputs != 1 || !od_descriptor_reaches(descriptor, BACKEND_RESIZE_DESCRIPTOR_SIZE_1_3))
            return OD_INVALID("Resize takes one input and its descriptor");
        return od_check_resize(layer, descriptor, message, message_size);
    case BACKEND_LAYER_REDUCE: {
        const BackendReduceDescriptor *d = descriptor;
        uint32_t kept = 0;
        if (layer->num_inputs != 1 || !od_descriptor_reaches(d, BACKEND_REDUCE_DESCRIPTOR_SIZE_1_3))
            return OD_INVALID("Reduce takes one input and its descriptor");
        if (d->function > BACKEND_REDUCE_LOG_SUM_EXP || d->keep_dims > 1)
            return OD_INVALID("Reduce: unknown function %u or keep_dims %u", d->function, d->keep_dims);
        if (d->axes == 0 || (rank < 32 && (d->axes >> rank) != 0))
            return OD_INVALID("Reduce: the axis mask 0x%x is empty or names an axis past the rank %u", d->axes, rank);
        for (uint32_t k = 0; k < rank; k++) {
            int reduced = (d->axes >> k) & 1u;
            if (OD_REDUCE_KEEPS_DIMS(d))
                dims[kept++] = reduced ? 1 : x->dimensions[k];
            else if (!reduced)
                dims[kept++] = x->dimensions[k];
        }
        if (kept == 0)
            dims[kept++] = 1;
        return od_expect_output(layer, dims, kept, message, message_size);
    }
    case BACKEND_LAYER_BATCH_NORMALIZATION: {
        const BackendBatchNormalizationDescriptor *d = descriptor;
        if (layer->num_inputs != 5 || !od_descriptor_reaches(d, BACKEND_BATCH_NORMALIZATION_DESCRIPTOR_SIZE_1_3) ||
            !(d->epsilon > 0) || !isfinite(d->epsilon))
            return OD_INVALID("BatchNormalization takes x, mean, variance, scale, bias and an epsilon above 0");
        for (uint32_t i = 1; i < 5; i++)
            if (layer->inputs[i].num_dimensions != 1 || layer->inputs[i].dimensions[0] != x->dimensions[rank - 1])
                return OD_INVALID("BatchNormalization: input %u must be [C], C the last axis", i);
        return od_expect_same_shape(layer, message, message_size);
    }
    case BACKEND_LAYER_LAYER_NORMALIZATION: {
        const BackendLayerNormalizationDescriptor *d = descriptor;
        if (!od_descriptor_reaches(d, BACKEND_LAYER_NORMALIZATION_DESCRIPTOR_SIZE_1_3) || d->axis >= rank ||
            !(d->epsilon > 0) || !isfinite(d->epsilon) || d->bias_enabled > 1 ||
            layer->num_inputs != 2 + d->bias_enabled)
            return OD_INVALID("LayerNormalization: an axis below the rank, an epsilon above 0, scale and bias");
        for (uint32_t i = 1; i < layer->num_inputs; i++) {
            const BackendTensorInfo *t = &layer->inputs[i];
            if (t->num_dimensions > rank - d->axis)
                return OD_INVALID("LayerNormalization: input %u has more axes than are normalized", i);
            for (uint32_t k = 0; k < t->num_dimensions; k++) {
                int64_t s = t->dimensions[k], n = x->dimensions[k + rank - t->num_dimensions];
                if (s != 1 && s != n)
                    return OD_INVALID("LayerNormalization: input %u does not broadcast to the normalized axes", i);
            }
        }
        return od_expect_same_shape(layer, message, message_size);
    }
    case BACKEND_LAYER_MAT_MUL:
        if (layer->num_inputs != 2)
            return OD_INVALID("MatMul takes two inputs");
        OD_TRY(od_mat_mul_shape(x, &layer->inputs[1], dims, &rank, message, message_size));
        return od_expect_output(layer, dims, rank, message, message_size);
    default: /* BACKEND_LAYER_TRANSPOSE_CONVOLUTION2D */
        if (!od_descriptor_reaches(descriptor, BACKEND_TRANSPOSE_CONVOLUTION2D_DESCRIPTOR_SIZE_1_3))
            return OD_INVALID("TransposeConvolution2d needs its descriptor");
        return od_check_transpose_convolution(layer, descriptor, message, message_size);
    }
}

#endif /* ONE_DEFECT_CHECKS13_H */
