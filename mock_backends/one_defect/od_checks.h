/*
 * od_checks.h - the checks of a layer description, shared by is_layer_supported
 * and create_workload. Part of base.h: a one-defect backend includes base.h, which sets the
 * knobs' defaults before it includes this. The layer types of Backend API 1.3 are checked in
 * od_checks13.h; the members 1.3 appended to older descriptors here.
 */
#ifndef ONE_DEFECT_CHECKS_H
#define ONE_DEFECT_CHECKS_H

/* ---- the descriptors of 1.1, with the members 1.3 appended (read only as far as struct_size
   reaches; the defaults are the behaviour before 1.3) ------------------------------------------ */

static BackendConvolution2dDescriptor od_conv_descriptor(const void *descriptor)
{
    BackendConvolution2dDescriptor d;
    memset(&d, 0, sizeof d);
    d.groups = 1;
    od_read_descriptor(&d, sizeof d, descriptor);
    return d;
}

static BackendPooling2dDescriptor od_pool_descriptor(const void *descriptor)
{
    BackendPooling2dDescriptor d;
    memset(&d, 0, sizeof d);
    d.dilation_y = d.dilation_x = 1;
    od_read_descriptor(&d, sizeof d, descriptor);
    return d;
}

static BackendSoftmaxDescriptor od_softmax_descriptor(const void *descriptor, uint32_t rank)
{
    BackendSoftmaxDescriptor d;
    memset(&d, 0, sizeof d);
    d.axis = rank > 0 ? rank - 1 : 0;
    od_read_descriptor(&d, sizeof d, descriptor);
    return d;
}

/* ---- layer checks ------------------------------------------------------------------------- */

static BackendStatus od_expect_output(const BackendLayerDescription *layer, const int64_t *dims, uint32_t rank,
                                      char *message, size_t message_size)
{
    const BackendTensorInfo *o = &layer->outputs[0];
    int same = o->num_dimensions == rank;
    for (uint32_t d = 0; same && d < rank; d++)
        same = o->dimensions[d] == dims[d];
    return same ? BACKEND_STATUS_OK : OD_INVALID("the output shape does not follow from the inputs");
}

static BackendStatus od_window(int64_t size, int64_t before, int64_t after, int64_t extent, int64_t stride,
                               int64_t *out, char *message, size_t message_size)
{
    if (stride < 1)
        return OD_INVALID("stride must be at least 1");
    if (size + before + after < extent)
        return OD_INVALID("the window is larger than the padded input");
    *out = (size + before + after - extent) / stride + 1;
    return BACKEND_STATUS_OK;
}

/* Pooling's output extent with ceil_mode: one more window when the last would be partial,
   unless it would start in the end padding (ONNX Runtime's rule). */
static BackendStatus od_pool_window(int64_t size, int64_t before, int64_t after, int64_t extent, int64_t stride,
                                    uint32_t ceil_mode, int64_t *out, char *message, size_t message_size)
{
    OD_TRY(od_window(size, before, after, extent, stride, out, message, message_size));
    if (ceil_mode && (size + before + after - extent) % stride != 0) {
        *out += 1;
        if ((*out - 1) * stride >= size + before)
            *out -= 1;
    }
    return BACKEND_STATUS_OK;
}

static BackendStatus od_broadcast(const BackendTensorInfo *a, const BackendTensorInfo *b, int64_t *dims,
                                  uint32_t *rank, char *message, size_t message_size)
{
    *rank = a->num_dimensions > b->num_dimensions ? a->num_dimensions : b->num_dimensions;
    for (uint32_t i = 0; i < *rank; i++) {
        int64_t da = 1, db = 1;
        if (i + a->num_dimensions >= *rank)
            da = a->dimensions[i + a->num_dimensions - *rank];
        if (i + b->num_dimensions >= *rank)
            db = b->dimensions[i + b->num_dimensions - *rank];
        if (da != db && da != 1 && db != 1)
            return OD_INVALID("the inputs do not broadcast");
        dims[i] = da > db ? da : db;
    }
    return BACKEND_STATUS_OK;
}

static BackendStatus od_check_layer13(const BackendLayerDescription *layer, char *message, size_t message_size);

static BackendStatus od_check_layer(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    const BackendTensorInfo *x;
    int64_t dims[BACKEND_MAX_DIMENSIONS];
    uint32_t want_inputs = 1;
    if (layer == NULL || layer->struct_size < BACKEND_LAYER_DESCRIPTION_SIZE_1_1)
        return OD_INVALID("malformed layer description");
    if (!OD_LAYER_TYPE_KNOWN(layer->layer_type))
        return OD_UNSUPPORTED("unknown layer type %u", layer->layer_type);
    if (layer->num_inputs < 1 || layer->num_inputs > OD_MAX_INPUTS || layer->num_outputs != 1 ||
        layer->inputs == NULL || layer->outputs == NULL)
        return OD_INVALID("wrong number of inputs or outputs (at most %d inputs here)", OD_MAX_INPUTS);
    for (uint32_t i = 0; i <= layer->num_inputs; i++) {
        const BackendTensorInfo *t = i < layer->num_inputs ? &layer->inputs[i] : &layer->outputs[0];
        int64_t count = 1;
        if (t->struct_size < BACKEND_TENSOR_INFO_SIZE_1_1 || t->num_dimensions > BACKEND_MAX_DIMENSIONS)
            return OD_INVALID("malformed tensor %u", i);
        if (!OD_DATA_TYPE_KNOWN(t->data_type))
            return OD_UNSUPPORTED("data type %u: only float32 runs here", t->data_type);
        for (uint32_t d = 0; d < t->num_dimensions; d++) {
            if (t->dimensions[d] < 1 || t->dimensions[d] > ((int64_t)1 << 30))
                return OD_INVALID("tensor %u: dimension %u out of range", i, d);
            count *= t->dimensions[d];
            if (count > ((int64_t)1 << 40))
                return OD_INVALID("tensor %u has more than 2^40 elements", i);
        }
    }
    if (layer->layer_type >= BACKEND_LAYER_SUBTRACTION && layer->layer_type < BACKEND_LAYER_TYPE_COUNT_1_3)
        return od_check_layer13(layer, message, message_size);
    x = &layer->inputs[0];
    switch (layer->layer_type) {
    case BACKEND_LAYER_ACTIVATION: {
        const BackendActivationDescriptor *d = layer->descriptor;
        if (d == NULL || d->struct_size < BACKEND_ACTIVATION_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("Activation needs its descriptor");
        if (d->function > BACKEND_ACTIVATION_MISH)
            return OD_UNSUPPORTED("activation function %u", d->function);
        if (d->function == BACKEND_ACTIVATION_CELU && !(d->a != 0.0f))
            return OD_INVALID("celu divides by a, which is 0");
        break;
    }
    case BACKEND_LAYER_ADDITION:
    case BACKEND_LAYER_MULTIPLICATION: {
        uint32_t rank;
        want_inputs = 2;
        if (layer->num_inputs != 2)
            return OD_INVALID("Addition and Multiplication take two inputs");
        OD_TRY(od_broadcast(x, &layer->inputs[1], dims, &rank, message, message_size));
        OD_TRY(od_expect_output(layer, dims, rank, message, message_size));
        break;
    }
    case BACKEND_LAYER_FULLY_CONNECTED: {
        const BackendFullyConnectedDescriptor *d = layer->descriptor;
        const BackendTensorInfo *w = &layer->inputs[1];
        if (d == NULL || d->struct_size < BACKEND_FULLY_CONNECTED_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("FullyConnected needs its descriptor");
        want_inputs = d->bias_enabled ? 3 : 2;
        if (layer->num_inputs != want_inputs || x->num_dimensions != 2 || w->num_dimensions != 2)
            return OD_INVALID("FullyConnected takes x [N, K], w and an optional bias");
        dims[0] = x->dimensions[0];
        dims[1] = d->transpose_weights ? w->dimensions[0] : w->dimensions[1];
        if ((d->transpose_weights ? w->dimensions[1] : w->dimensions[0]) != x->dimensions[1])
            return OD_INVALID("the weights do not match K");
        if (d->bias_enabled && (layer->inputs[2].num_dimensions != 1 || layer->inputs[2].dimensions[0] != dims[1]))
            return OD_INVALID("the bias does not match M");
        OD_TRY(od_expect_output(layer, dims, 2, message, message_size));
        break;
    }
    case BACKEND_LAYER_CONVOLUTION2D:
    case BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D: {
        BackendConvolution2dDescriptor d;
        const BackendTensorInfo *w = &layer->inputs[1];
        int depthwise = layer->layer_type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D;
        if (layer->descriptor == NULL ||
            ((const BackendConvolution2dDescriptor *)layer->descriptor)->struct_size <
                BACKEND_CONVOLUTION2D_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("convolutions need their descriptor");
        d = od_conv_descriptor(layer->descriptor);
        want_inputs = d.bias_enabled ? 3 : 2;
        if (layer->num_inputs != want_inputs || x->num_dimensions != 4 || w->num_dimensions != 4)
            return OD_INVALID("convolutions take x [N, H, W, C], w and an optional bias");
        if (d.dilation_y < 1 || d.dilation_x < 1)
            return OD_INVALID("dilation must be at least 1");
        if (d.groups < 1 || (depthwise && d.groups != 1))
            return OD_INVALID("groups is %u: at least 1, and 1 for DepthwiseConvolution2d", d.groups);
        if (x->dimensions[3] % d.groups != 0 || w->dimensions[0] % d.groups != 0)
            return OD_INVALID("%u groups do not divide the channels evenly", d.groups);
        if (depthwise ? (w->dimensions[0] != 1 || w->dimensions[3] % x->dimensions[3] != 0)
                      : w->dimensions[3] * d.groups != x->dimensions[3])
            return OD_INVALID("the weights do not match the input channels");
        dims[0] = x->dimensions[0];
        dims[3] = depthwise ? w->dimensions[3] : w->dimensions[0];
        if (d.bias_enabled && (layer->inputs[2].num_dimensions != 1 || layer->inputs[2].dimensions[0] != dims[3]))
            return OD_INVALID("the bias does not match the output channels");
        OD_TRY(od_window(x->dimensions[1], d.pad_top, d.pad_bottom, (w->dimensions[1] - 1) * d.dilation_y + 1,
                         d.stride_y, &dims[1], message, message_size));
        OD_TRY(od_window(x->dimensions[2], d.pad_left, d.pad_right, (w->dimensions[2] - 1) * d.dilation_x + 1,
                         d.stride_x, &dims[2], message, message_size));
        OD_TRY(od_expect_output(layer, dims, 4, message, message_size));
        break;
    }
    case BACKEND_LAYER_POOLING2D: {
        BackendPooling2dDescriptor d;
        if (layer->descriptor == NULL ||
            ((const BackendPooling2dDescriptor *)layer->descriptor)->struct_size < BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("Pooling2d needs its descriptor");
        d = od_pool_descriptor(layer->descriptor);
        if (x->num_dimensions != 4 || d.pool_type > BACKEND_POOLING_L2 || d.kernel_y < 1 || d.kernel_x < 1)
            return OD_INVALID("Pooling2d takes x [N, H, W, C], max, average or l2, a kernel of at least 1");
        if (d.dilation_y < 1 || d.dilation_x < 1 || d.ceil_mode > 1 || d.count_include_pad > 1)
            return OD_INVALID("pooling dilation must be at least 1, ceil_mode and count_include_pad 0 or 1");
        if (d.pad_top >= d.kernel_y || d.pad_bottom >= d.kernel_y || d.pad_left >= d.kernel_x ||
            d.pad_right >= d.kernel_x)
            return OD_INVALID("pooling padding must be smaller than the kernel");
        dims[0] = x->dimensions[0];
        dims[3] = x->dimensions[3];
        OD_TRY(od_pool_window(x->dimensions[1], d.pad_top, d.pad_bottom, ((int64_t)d.kernel_y - 1) * d.dilation_y + 1,
                              d.stride_y, d.ceil_mode, &dims[1], message, message_size));
        OD_TRY(od_pool_window(x->dimensions[2], d.pad_left, d.pad_right, ((int64_t)d.kernel_x - 1) * d.dilation_x + 1,
                              d.stride_x, d.ceil_mode, &dims[2], message, message_size));
        OD_TRY(od_expect_output(layer, dims, 4, message, message_size));
        break;
    }
    case BACKEND_LAYER_SOFTMAX: {
        BackendSoftmaxDescriptor d;
        if (layer->descriptor == NULL ||
            ((const BackendSoftmaxDescriptor *)layer->descriptor)->struct_size < BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("Softmax needs its descriptor");
        d = od_softmax_descriptor(layer->descriptor, x->num_dimensions);
        if (!isfinite(d.beta) || x->num_dimensions < 1)
            return OD_INVALID("Softmax needs a finite beta and at least one dimension");
        if (d.axis >= x->num_dimensions || d.log > 1)
            return OD_INVALID("Softmax: axis %u is not below the rank %u, or log is not 0 or 1", d.axis,
                              x->num_dimensions);
        break;
    }
    default: /* Reshape (and any type OD_LAYER_TYPE_KNOWN lets through) */
        if (od_count(x) != od_count(&layer->outputs[0]))
            return OD_INVALID("Reshape must keep the element count");
        return layer->num_inputs == 1 ? BACKEND_STATUS_OK : OD_INVALID("Reshape takes one input");
    }
    if (layer->num_inputs != want_inputs)
        return OD_INVALID("wrong number of inputs");
    if (layer->layer_type == BACKEND_LAYER_ACTIVATION || layer->layer_type == BACKEND_LAYER_SOFTMAX) {
        uint32_t rank = x->num_dimensions;
        memcpy(dims, x->dimensions, rank * sizeof dims[0]);
        return od_expect_output(layer, dims, rank, message, message_size);
    }
    return BACKEND_STATUS_OK;
}

#endif /* ONE_DEFECT_CHECKS_H */
