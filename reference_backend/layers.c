/*
 * Layer validation and execution for the reference backend: every check a layer must pass,
 * then the workload that runs it through the kernels in kernels.c.
 */
#include "layers.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

BackendStatus ref_fail(char *message, size_t message_size, BackendStatus status, const char *format, ...)
{
    if (message != NULL && message_size > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(message, message_size, format, args);
        va_end(args);
    }
    return status;
}

#define FAIL(status, ...) ref_fail(message, message_size, (status), __VA_ARGS__)
#define INVALID(...) FAIL(BACKEND_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define UNSUPPORTED(...) FAIL(BACKEND_STATUS_UNSUPPORTED, __VA_ARGS__)

static const char *const LAYER_NAMES[BACKEND_LAYER_TYPE_COUNT] = {
    "Activation", "Addition", "Multiplication", "FullyConnected", "Convolution2d",
    "DepthwiseConvolution2d", "Pooling2d", "Softmax", "Reshape",
};

/* Largest element count accepted, so that byte sizes and index arithmetic never overflow. */
#define MAX_ELEMENTS ((int64_t)1 << 40)

/* ---- shapes ------------------------------------------------------------------------------- */

static int64_t element_count(const BackendTensorInfo *info)
{
    int64_t count = 1;
    for (uint32_t d = 0; d < info->num_dimensions; d++)
        count *= info->dimensions[d];
    return count;
}

static int same_shape(const BackendTensorInfo *a, const BackendTensorInfo *b)
{
    if (a->num_dimensions != b->num_dimensions)
        return 0;
    for (uint32_t d = 0; d < a->num_dimensions; d++)
        if (a->dimensions[d] != b->dimensions[d])
            return 0;
    return 1;
}

static void format_shape(const BackendTensorInfo *info, char *out, size_t size)
{
    size_t used = 0;
    used += (size_t)snprintf(out, size, "[");
    for (uint32_t d = 0; d < info->num_dimensions && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, d ? ", %lld" : "%lld",
                                 (long long)info->dimensions[d]);
    if (used < size)
        snprintf(out + used, size - used, "]");
}

static BackendStatus check_tensor(const BackendTensorInfo *info, const char *role, uint32_t index,
                                  char *message, size_t message_size)
{
    int64_t count = 1;
    if (info->struct_size < BACKEND_TENSOR_INFO_SIZE_1_1)
        return INVALID("%s %u: struct_size %u is too small", role, index, info->struct_size);
    if (info->data_type != BACKEND_DATA_TYPE_FLOAT32)
        return UNSUPPORTED("%s %u: data type %u is not supported, only float32", role, index,
                           info->data_type);
    if (info->num_dimensions > BACKEND_MAX_DIMENSIONS)
        return INVALID("%s %u: %u dimensions, at most %d", role, index, info->num_dimensions,
                       BACKEND_MAX_DIMENSIONS);
    for (uint32_t d = 0; d < info->num_dimensions; d++) {
        if (info->dimensions[d] < 1)
            return INVALID("%s %u: dimension %u is %lld, must be at least 1", role, index, d,
                           (long long)info->dimensions[d]);
        if (info->dimensions[d] > MAX_ELEMENTS / count)
            return UNSUPPORTED("%s %u: more than 2^40 elements", role, index);
        count *= info->dimensions[d];
    }
    return BACKEND_STATUS_OK;
}

static BackendStatus expect_rank(const BackendTensorInfo *info, uint32_t rank, const char *what,
                                 char *message, size_t message_size)
{
    if (info->num_dimensions != rank)
        return INVALID("%s must have %u dimensions, it has %u", what, rank, info->num_dimensions);
    return BACKEND_STATUS_OK;
}

static BackendStatus expect_output(const BackendLayerDescription *layer, const int64_t *dims,
                                   uint32_t rank, char *message, size_t message_size)
{
    BackendTensorInfo expected = layer->outputs[0];
    char want[160], got[160];
    expected.num_dimensions = rank;
    memcpy(expected.dimensions, dims, rank * sizeof *dims);
    if (same_shape(&expected, &layer->outputs[0]))
        return BACKEND_STATUS_OK;
    format_shape(&expected, want, sizeof want);
    format_shape(&layer->outputs[0], got, sizeof got);
    return INVALID("output shape is %s, the layer produces %s", got, want);
}

/* Spatial output size of a window of `kernel` (dilated extent `extent`) sliding with `stride`. */
static BackendStatus window_output(int64_t input, int64_t pad_before, int64_t pad_after,
                                   int64_t extent, int64_t stride, const char *axis, int64_t *out,
                                   char *message, size_t message_size)
{
    int64_t padded = input + pad_before + pad_after;
    if (extent > padded)
        return INVALID("kernel extent %lld along %s exceeds the padded input (%lld)",
                       (long long)extent, axis, (long long)padded);
    *out = (padded - extent) / stride + 1;
    return BACKEND_STATUS_OK;
}

/* ---- descriptors -------------------------------------------------------------------------- */

#define DESCRIPTOR(type, size_macro, name)                                                    \
    const type *name = (const type *)layer->descriptor;                                        \
    if (name == NULL)                                                                          \
        return INVALID("%s needs a descriptor", LAYER_NAMES[layer->layer_type]);               \
    if (name->struct_size < size_macro)                                                        \
        return INVALID("%s descriptor struct_size %u is too small", LAYER_NAMES[layer->layer_type], \
                       name->struct_size)

static BackendStatus expect_arity(const BackendLayerDescription *layer, uint32_t inputs,
                                  char *message, size_t message_size)
{
    if (layer->num_inputs != inputs)
        return INVALID("%s takes %u inputs, got %u", LAYER_NAMES[layer->layer_type], inputs,
                       layer->num_inputs);
    if (layer->num_outputs != 1)
        return INVALID("%s has 1 output, got %u", LAYER_NAMES[layer->layer_type], layer->num_outputs);
    return BACKEND_STATUS_OK;
}

#define TRY(expression)                           \
    do {                                          \
        BackendStatus try_status_ = (expression); \
        if (try_status_ != BACKEND_STATUS_OK)     \
            return try_status_;                   \
    } while (0)

/* ---- per-layer checks --------------------------------------------------------------------- */

static BackendStatus check_activation(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    DESCRIPTOR(BackendActivationDescriptor, BACKEND_ACTIVATION_DESCRIPTOR_SIZE_1_1, d);
    TRY(expect_arity(layer, 1, message, message_size));
    if (d->function > BACKEND_ACTIVATION_LEAKY_RELU)
        return UNSUPPORTED("activation function %u is not supported", d->function);
    if (!isfinite(d->a) || !isfinite(d->b))
        return INVALID("activation parameters a and b must be finite");
    return expect_output(layer, layer->inputs[0].dimensions, layer->inputs[0].num_dimensions,
                         message, message_size);
}

static BackendStatus check_elementwise(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    const BackendTensorInfo *a = &layer->inputs[0], *b = &layer->inputs[1];
    int64_t out[BACKEND_MAX_DIMENSIONS];
    uint32_t rank;
    TRY(expect_arity(layer, 2, message, message_size));
    rank = a->num_dimensions > b->num_dimensions ? a->num_dimensions : b->num_dimensions;
    for (uint32_t i = 0; i < rank; i++) {
        /* right-aligned, as NumPy broadcasts */
        int64_t da = i < rank - a->num_dimensions ? 1 : a->dimensions[i - (rank - a->num_dimensions)];
        int64_t db = i < rank - b->num_dimensions ? 1 : b->dimensions[i - (rank - b->num_dimensions)];
        if (da != db && da != 1 && db != 1) {
            char sa[160], sb[160];
            format_shape(a, sa, sizeof sa);
            format_shape(b, sb, sizeof sb);
            return INVALID("shapes %s and %s do not broadcast", sa, sb);
        }
        out[i] = da > db ? da : db;
    }
    return expect_output(layer, out, rank, message, message_size);
}

static BackendStatus check_fully_connected(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    DESCRIPTOR(BackendFullyConnectedDescriptor, BACKEND_FULLY_CONNECTED_DESCRIPTOR_SIZE_1_1, d);
    const BackendTensorInfo *x = &layer->inputs[0], *w;
    int64_t k, m, out[2];
    TRY(expect_arity(layer, d->bias_enabled ? 3 : 2, message, message_size));
    w = &layer->inputs[1];
    TRY(expect_rank(x, 2, "FullyConnected input", message, message_size));
    TRY(expect_rank(w, 2, "FullyConnected weights", message, message_size));
    k = x->dimensions[1];
    m = d->transpose_weights ? w->dimensions[0] : w->dimensions[1];
    if ((d->transpose_weights ? w->dimensions[1] : w->dimensions[0]) != k)
        return INVALID("weights %s must have %lld input features (input is [%lld, %lld])",
                       d->transpose_weights ? "[M, K]" : "[K, M]", (long long)k,
                       (long long)x->dimensions[0], (long long)k);
    if (d->bias_enabled) {
        TRY(expect_rank(&layer->inputs[2], 1, "FullyConnected bias", message, message_size));
        if (layer->inputs[2].dimensions[0] != m)
            return INVALID("bias has %lld elements, the layer has %lld outputs",
                           (long long)layer->inputs[2].dimensions[0], (long long)m);
    }
    out[0] = x->dimensions[0];
    out[1] = m;
    return expect_output(layer, out, 2, message, message_size);
}

static BackendStatus check_convolution(const BackendLayerDescription *layer, int depthwise,
                                       char *message, size_t message_size)
{
    DESCRIPTOR(BackendConvolution2dDescriptor, BACKEND_CONVOLUTION2D_DESCRIPTOR_SIZE_1_1, d);
    const BackendTensorInfo *x = &layer->inputs[0], *w;
    int64_t out[4], channels_out;
    TRY(expect_arity(layer, d->bias_enabled ? 3 : 2, message, message_size));
    w = &layer->inputs[1];
    TRY(expect_rank(x, 4, "input [N, H, W, C]", message, message_size));
    TRY(expect_rank(w, 4, depthwise ? "weights [1, kH, kW, C*m]" : "weights [O, kH, kW, C]",
                    message, message_size));
    if (d->stride_y < 1 || d->stride_x < 1 || d->dilation_y < 1 || d->dilation_x < 1)
        return INVALID("stride and dilation must be at least 1");
    if (depthwise) {
        if (w->dimensions[0] != 1)
            return INVALID("depthwise weights must be [1, kH, kW, C*m], first dimension is %lld",
                           (long long)w->dimensions[0]);
        if (w->dimensions[3] % x->dimensions[3] != 0)
            return INVALID("depthwise weights have %lld channels, not a multiple of the input's %lld",
                           (long long)w->dimensions[3], (long long)x->dimensions[3]);
        channels_out = w->dimensions[3];
    } else {
        if (w->dimensions[3] != x->dimensions[3])
            return INVALID("weights have %lld input channels, the input has %lld",
                           (long long)w->dimensions[3], (long long)x->dimensions[3]);
        channels_out = w->dimensions[0];
    }
    if (d->bias_enabled) {
        TRY(expect_rank(&layer->inputs[2], 1, "bias", message, message_size));
        if (layer->inputs[2].dimensions[0] != channels_out)
            return INVALID("bias has %lld elements, the layer has %lld output channels",
                           (long long)layer->inputs[2].dimensions[0], (long long)channels_out);
    }
    out[0] = x->dimensions[0];
    TRY(window_output(x->dimensions[1], d->pad_top, d->pad_bottom,
                      (w->dimensions[1] - 1) * d->dilation_y + 1, d->stride_y, "height", &out[1],
                      message, message_size));
    TRY(window_output(x->dimensions[2], d->pad_left, d->pad_right,
                      (w->dimensions[2] - 1) * d->dilation_x + 1, d->stride_x, "width", &out[2],
                      message, message_size));
    out[3] = channels_out;
    return expect_output(layer, out, 4, message, message_size);
}

static BackendStatus check_pooling(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    DESCRIPTOR(BackendPooling2dDescriptor, BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_1, d);
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t out[4];
    TRY(expect_arity(layer, 1, message, message_size));
    TRY(expect_rank(x, 4, "input [N, H, W, C]", message, message_size));
    if (d->pool_type > BACKEND_POOLING_AVERAGE)
        return UNSUPPORTED("pooling type %u is not supported", d->pool_type);
    if (d->kernel_y < 1 || d->kernel_x < 1 || d->stride_y < 1 || d->stride_x < 1)
        return INVALID("kernel and stride must be at least 1");
    /* A window made only of padding would have no value to take. */
    if (d->pad_top >= d->kernel_y || d->pad_bottom >= d->kernel_y || d->pad_left >= d->kernel_x ||
        d->pad_right >= d->kernel_x)
        return INVALID("padding must be smaller than the pooling kernel");
    out[0] = x->dimensions[0];
    TRY(window_output(x->dimensions[1], d->pad_top, d->pad_bottom, d->kernel_y, d->stride_y,
                      "height", &out[1], message, message_size));
    TRY(window_output(x->dimensions[2], d->pad_left, d->pad_right, d->kernel_x, d->stride_x,
                      "width", &out[2], message, message_size));
    out[3] = x->dimensions[3];
    return expect_output(layer, out, 4, message, message_size);
}

static BackendStatus check_softmax(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    DESCRIPTOR(BackendSoftmaxDescriptor, BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1, d);
    TRY(expect_arity(layer, 1, message, message_size));
    if (layer->inputs[0].num_dimensions < 1)
        return INVALID("Softmax needs at least one dimension");
    if (!isfinite(d->beta))
        return INVALID("beta must be finite");
    return expect_output(layer, layer->inputs[0].dimensions, layer->inputs[0].num_dimensions,
                         message, message_size);
}

static BackendStatus check_reshape(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    TRY(expect_arity(layer, 1, message, message_size));
    if (element_count(&layer->inputs[0]) != element_count(&layer->outputs[0]))
        return INVALID("Reshape from %lld to %lld elements",
                       (long long)element_count(&layer->inputs[0]),
                       (long long)element_count(&layer->outputs[0]));
    return BACKEND_STATUS_OK;
}

BackendStatus ref_check_layer(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    if (layer == NULL)
        return INVALID("no layer description");
    if (layer->struct_size < BACKEND_LAYER_DESCRIPTION_SIZE_1_1)
        return INVALID("layer description struct_size %u is too small", layer->struct_size);
    if (layer->layer_type >= BACKEND_LAYER_TYPE_COUNT)
        return UNSUPPORTED("layer type %u is not supported", layer->layer_type);
    if ((layer->num_inputs > 0 && layer->inputs == NULL) || (layer->num_outputs > 0 && layer->outputs == NULL))
        return INVALID("tensor list is NULL");
    if (layer->num_inputs > 3 || layer->num_outputs > 1 || layer->num_inputs == 0 || layer->num_outputs == 0)
        return INVALID("%s: %u inputs and %u outputs", LAYER_NAMES[layer->layer_type],
                       layer->num_inputs, layer->num_outputs);
    for (uint32_t i = 0; i < layer->num_inputs; i++)
        TRY(check_tensor(&layer->inputs[i], "input", i, message, message_size));
    TRY(check_tensor(&layer->outputs[0], "output", 0, message, message_size));

    switch (layer->layer_type) {
    case BACKEND_LAYER_ACTIVATION:
        return check_activation(layer, message, message_size);
    case BACKEND_LAYER_ADDITION:
    case BACKEND_LAYER_MULTIPLICATION:
        return check_elementwise(layer, message, message_size);
    case BACKEND_LAYER_FULLY_CONNECTED:
        return check_fully_connected(layer, message, message_size);
    case BACKEND_LAYER_CONVOLUTION2D:
        return check_convolution(layer, 0, message, message_size);
    case BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D:
        return check_convolution(layer, 1, message, message_size);
    case BACKEND_LAYER_POOLING2D:
        return check_pooling(layer, message, message_size);
    case BACKEND_LAYER_SOFTMAX:
        return check_softmax(layer, message, message_size);
    default:
        return check_reshape(layer, message, message_size);
    }
}

/* ---- workloads ---------------------------------------------------------------------------- */

typedef struct RefWorkload {
    BackendWorkload base;               /* first: the runtime sees a BackendWorkload */
    BackendLayerType layer_type;
    uint32_t num_inputs;
    BackendTensorInfo inputs[3];
    BackendTensorInfo output;
    union {                             /* a copy of the descriptor, the call's is borrowed */
        BackendActivationDescriptor activation;
        BackendFullyConnectedDescriptor fully_connected;
        BackendConvolution2dDescriptor convolution;
        BackendPooling2dDescriptor pooling;
        BackendSoftmaxDescriptor softmax;
    } descriptor;
    rk_conv_params window;              /* convolution and pooling geometry */
} RefWorkload;

static void fill_window(RefWorkload *w, uint32_t stride_y, uint32_t stride_x, uint32_t dilation_y,
                        uint32_t dilation_x, uint32_t pad_top, uint32_t pad_bottom, uint32_t pad_left,
                        uint32_t pad_right, int64_t kh, int64_t kw)
{
    const int64_t *x = w->inputs[0].dimensions;
    w->window = (rk_conv_params){
        .n = x[0], .h = x[1], .w = x[2], .c = x[3], .kh = kh, .kw = kw,
        .stride_h = stride_y, .stride_w = stride_x, .dil_h = dilation_y, .dil_w = dilation_x,
        .pad_top = pad_top, .pad_bottom = pad_bottom, .pad_left = pad_left, .pad_right = pad_right,
        .oh = w->output.dimensions[1], .ow = w->output.dimensions[2],
    };
}

static BackendStatus run(RefWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *x = &w->inputs[0];
    int failed = 0;
    switch (w->layer_type) {
    case BACKEND_LAYER_ACTIVATION:
        failed = rk_activation(in[0], out, element_count(x), (int)w->descriptor.activation.function,
                               w->descriptor.activation.a, w->descriptor.activation.b);
        break;
    case BACKEND_LAYER_ADDITION:
    case BACKEND_LAYER_MULTIPLICATION: {
        int64_t a[BACKEND_MAX_DIMENSIONS], b[BACKEND_MAX_DIMENSIONS], o[BACKEND_MAX_DIMENSIONS];
        int rank = (int)w->output.num_dimensions;
        if (rank == 0) {
            out[0] = w->layer_type == BACKEND_LAYER_ADDITION ? in[0][0] + in[1][0] : in[0][0] * in[1][0];
            break;
        }
        for (int i = 0; i < rank; i++) {
            int ia = i - (rank - (int)w->inputs[0].num_dimensions);
            int ib = i - (rank - (int)w->inputs[1].num_dimensions);
            a[i] = ia < 0 ? 1 : w->inputs[0].dimensions[ia];
            b[i] = ib < 0 ? 1 : w->inputs[1].dimensions[ib];
            o[i] = w->output.dimensions[i];
        }
        failed = rk_binary(w->layer_type == BACKEND_LAYER_ADDITION ? RK_ADD : RK_MUL, in[0], a, in[1],
                           b, out, o, rank);
        break;
    }
    case BACKEND_LAYER_FULLY_CONNECTED:
        failed = rk_fully_connected(in[0], in[1], w->descriptor.fully_connected.bias_enabled ? in[2] : NULL,
                                    out, x->dimensions[0], x->dimensions[1], w->output.dimensions[1],
                                    (int)w->descriptor.fully_connected.transpose_weights);
        break;
    case BACKEND_LAYER_CONVOLUTION2D:
        failed = rk_conv2d(in[0], in[1], w->descriptor.convolution.bias_enabled ? in[2] : NULL, out,
                           &w->window, w->output.dimensions[3]);
        break;
    case BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D:
        failed = rk_depthwise_conv2d(in[0], in[1], w->descriptor.convolution.bias_enabled ? in[2] : NULL,
                                     out, &w->window, w->output.dimensions[3] / x->dimensions[3]);
        break;
    case BACKEND_LAYER_POOLING2D:
        failed = rk_pool2d(in[0], out, &w->window,
                           w->descriptor.pooling.pool_type == BACKEND_POOLING_MAX ? RK_POOL_MAX : RK_POOL_AVERAGE);
        break;
    case BACKEND_LAYER_SOFTMAX: {
        int64_t cols = x->dimensions[x->num_dimensions - 1];
        failed = rk_softmax(in[0], out, element_count(x) / cols, cols, w->descriptor.softmax.beta);
        break;
    }
    default:
        memmove(out, in[0], (size_t)element_count(x) * sizeof(float));
        break;
    }
    return failed ? BACKEND_STATUS_OUT_OF_MEMORY : BACKEND_STATUS_OK;
}

static BackendStatus workload_execute(BackendWorkload *self, const BackendBuffer *inputs, uint32_t num_inputs,
                                      const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                      size_t message_size)
{
    RefWorkload *w = (RefWorkload *)self;
    const float *in[3];
    if (num_inputs != w->num_inputs || num_outputs != 1)
        return INVALID("%s workload takes %u inputs and 1 output, got %u and %u",
                       LAYER_NAMES[w->layer_type], w->num_inputs, num_inputs, num_outputs);
    if (inputs == NULL || outputs == NULL)
        return INVALID("buffer list is NULL");
    for (uint32_t i = 0; i <= num_inputs; i++) {
        const BackendBuffer *buffer = i < num_inputs ? &inputs[i] : &outputs[0];
        const BackendTensorInfo *info = i < num_inputs ? &w->inputs[i] : &w->output;
        uint64_t need = (uint64_t)element_count(info) * sizeof(float);
        const char *role = i < num_inputs ? "input" : "output";
        uint32_t index = i < num_inputs ? i : 0;
        if (buffer->struct_size < BACKEND_BUFFER_SIZE_1_1)
            return INVALID("%s %u: buffer struct_size %u is too small", role, index, buffer->struct_size);
        if (buffer->data == NULL)
            return INVALID("%s %u: buffer is NULL", role, index);
        if (buffer->size_bytes < need)
            return INVALID("%s %u: buffer holds %llu bytes, the tensor needs %llu", role, index,
                           (unsigned long long)buffer->size_bytes, (unsigned long long)need);
        if (i < num_inputs)
            in[i] = (const float *)buffer->data;
    }
    if (run(w, in, (float *)outputs[0].data) != BACKEND_STATUS_OK)
        return FAIL(BACKEND_STATUS_OUT_OF_MEMORY, "out of memory for %s scratch space",
                    LAYER_NAMES[w->layer_type]);
    return BACKEND_STATUS_OK;
}

static void workload_destroy(BackendWorkload *self)
{
    free(self);
}

BackendStatus ref_create_workload(const BackendLayerDescription *layer, BackendWorkload **workload,
                                  char *message, size_t message_size)
{
    RefWorkload *w;
    if (workload == NULL)
        return INVALID("no place to return the workload");
    *workload = NULL;
    TRY(ref_check_layer(layer, message, message_size));
    w = calloc(1, sizeof *w);
    if (w == NULL)
        return FAIL(BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    w->base.struct_size = sizeof w->base;
    w->base.execute = workload_execute;
    w->base.destroy = workload_destroy;
    w->layer_type = layer->layer_type;
    w->num_inputs = layer->num_inputs;
    memcpy(w->inputs, layer->inputs, layer->num_inputs * sizeof *layer->inputs);
    w->output = layer->outputs[0];
    switch (layer->layer_type) {
    case BACKEND_LAYER_ACTIVATION:
        memcpy(&w->descriptor.activation, layer->descriptor, sizeof w->descriptor.activation);
        break;
    case BACKEND_LAYER_FULLY_CONNECTED:
        memcpy(&w->descriptor.fully_connected, layer->descriptor, sizeof w->descriptor.fully_connected);
        break;
    case BACKEND_LAYER_CONVOLUTION2D:
    case BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D: {
        const BackendConvolution2dDescriptor *d = layer->descriptor;
        w->descriptor.convolution = *d;
        fill_window(w, d->stride_y, d->stride_x, d->dilation_y, d->dilation_x, d->pad_top, d->pad_bottom,
                    d->pad_left, d->pad_right, layer->inputs[1].dimensions[1], layer->inputs[1].dimensions[2]);
        break;
    }
    case BACKEND_LAYER_POOLING2D: {
        const BackendPooling2dDescriptor *d = layer->descriptor;
        w->descriptor.pooling = *d;
        fill_window(w, d->stride_y, d->stride_x, 1, 1, d->pad_top, d->pad_bottom, d->pad_left, d->pad_right,
                    d->kernel_y, d->kernel_x);
        break;
    }
    case BACKEND_LAYER_SOFTMAX:
        memcpy(&w->descriptor.softmax, layer->descriptor, sizeof w->descriptor.softmax);
        break;
    default:
        break;
    }
    *workload = &w->base;
    return BACKEND_STATUS_OK;
}
