/*
 * Layers over the spatial axes of NHWC tensors: Convolution2d, DepthwiseConvolution2d,
 * Pooling2d, TransposeConvolution2d and Resize.
 */
#include "layers_internal.h"

/* Spatial output size of a window of dilated extent `extent` sliding with `stride`. */
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

static void fill_window(RefWorkload *w, uint32_t stride_y, uint32_t stride_x, uint32_t dilation_y,
                        uint32_t dilation_x, uint32_t pad_top, uint32_t pad_bottom, uint32_t pad_left,
                        uint32_t pad_right, int64_t kh, int64_t kw)
{
    const int64_t *x = w->inputs[0].dimensions;
    w->g.window = (rk_conv_params){
        .n = x[0], .h = x[1], .w = x[2], .c = x[3], .kh = kh, .kw = kw,
        .stride_h = stride_y, .stride_w = stride_x, .dil_h = dilation_y, .dil_w = dilation_x,
        .pad_top = pad_top, .pad_bottom = pad_bottom, .pad_left = pad_left, .pad_right = pad_right,
        .oh = w->output.dimensions[1], .ow = w->output.dimensions[2],
    };
}

/* ---- Convolution2d and DepthwiseConvolution2d -------------------------------------------- */

static void convolution_defaults(RefDescriptor *d, const BackendLayerDescription *layer)
{
    (void)layer;
    if (!BACKEND_STRUCT_HAS(BackendConvolution2dDescriptor, &d->convolution, groups))
        d->convolution.groups = 1;
}

static BackendStatus check_convolution(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                       char *message, size_t message_size)
{
    const BackendConvolution2dDescriptor *d = &desc->convolution;
    int depthwise = layer->layer_type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D;
    const BackendTensorInfo *x = &layer->inputs[0], *w = &layer->inputs[1];
    int64_t out[4], channels_out;
    TRY(ref_expect_inputs(layer, d->bias_enabled ? 3 : 2, message, message_size));
    TRY(ref_expect_rank(x, 4, "input [N, H, W, C]", message, message_size));
    TRY(ref_expect_rank(w, 4, depthwise ? "weights [1, kH, kW, C*m]" : "weights [O, kH, kW, C]",
                        message, message_size));
    if (d->stride_y < 1 || d->stride_x < 1 || d->dilation_y < 1 || d->dilation_x < 1)
        return INVALID("stride and dilation must be at least 1");
    if (depthwise && d->groups != 1)
        return INVALID("DepthwiseConvolution2d has groups 1, got %u", d->groups);
    if (!depthwise && d->groups != 1)
        return UNSUPPORTED("grouped convolution (groups %u) is not supported", d->groups);
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
        TRY(ref_expect_rank(&layer->inputs[2], 1, "bias", message, message_size));
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
    return ref_expect_output(layer, out, 4, message, message_size);
}

static void prepare_convolution(RefWorkload *w)
{
    const BackendConvolution2dDescriptor *d = &w->d.convolution;
    fill_window(w, d->stride_y, d->stride_x, d->dilation_y, d->dilation_x, d->pad_top, d->pad_bottom,
                d->pad_left, d->pad_right, w->inputs[1].dimensions[1], w->inputs[1].dimensions[2]);
}

static int run_convolution(const RefWorkload *w, const float *const *in, float *out)
{
    const float *bias = w->d.convolution.bias_enabled ? in[2] : NULL;
    if (w->layer_type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D)
        return rk_depthwise_conv2d(in[0], in[1], bias, out, &w->g.window,
                                   w->output.dimensions[3] / w->inputs[0].dimensions[3]);
    return rk_conv2d(in[0], in[1], bias, out, &w->g.window, w->output.dimensions[3]);
}

#define CONVOLUTION_ENTRY(name_)                                                               \
    {                                                                                          \
        .name = (name_), .min_inputs = 2, .max_inputs = 3,                                     \
        .descriptor_min_size = BACKEND_CONVOLUTION2D_DESCRIPTOR_SIZE_1_1,                      \
        .descriptor_size = sizeof(BackendConvolution2dDescriptor),                             \
        .defaults = convolution_defaults, .check = check_convolution,                          \
        .prepare = prepare_convolution, .run = run_convolution,                                \
    }

const RefLayerEntry ref_layer_convolution2d = CONVOLUTION_ENTRY("Convolution2d");
const RefLayerEntry ref_layer_depthwise_convolution2d = CONVOLUTION_ENTRY("DepthwiseConvolution2d");

/* ---- Pooling2d ---------------------------------------------------------------------------- */

static void pooling_defaults(RefDescriptor *d, const BackendLayerDescription *layer)
{
    BackendPooling2dDescriptor *p = &d->pooling;
    (void)layer;
    if (!BACKEND_STRUCT_HAS(BackendPooling2dDescriptor, p, ceil_mode))
        p->ceil_mode = 0;
    if (!BACKEND_STRUCT_HAS(BackendPooling2dDescriptor, p, count_include_pad))
        p->count_include_pad = 0;
    if (!BACKEND_STRUCT_HAS(BackendPooling2dDescriptor, p, dilation_y))
        p->dilation_y = 1;
    if (!BACKEND_STRUCT_HAS(BackendPooling2dDescriptor, p, dilation_x))
        p->dilation_x = 1;
}

static BackendStatus check_pooling(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                   char *message, size_t message_size)
{
    const BackendPooling2dDescriptor *d = &desc->pooling;
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t out[4];
    TRY(ref_expect_rank(x, 4, "input [N, H, W, C]", message, message_size));
    if (d->pool_type > BACKEND_POOLING_AVERAGE)
        return UNSUPPORTED("pooling type %u is not supported", d->pool_type);
    if (d->ceil_mode != 0 || d->count_include_pad != 0 || d->dilation_y != 1 || d->dilation_x != 1)
        return UNSUPPORTED("pooling with ceil_mode, count_include_pad or dilation is not supported");
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
    return ref_expect_output(layer, out, 4, message, message_size);
}

static void prepare_pooling(RefWorkload *w)
{
    const BackendPooling2dDescriptor *d = &w->d.pooling;
    fill_window(w, d->stride_y, d->stride_x, 1, 1, d->pad_top, d->pad_bottom, d->pad_left,
                d->pad_right, d->kernel_y, d->kernel_x);
}

static int run_pooling(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_pool2d(in[0], out, &w->g.window,
                     w->d.pooling.pool_type == BACKEND_POOLING_MAX ? RK_POOL_MAX : RK_POOL_AVERAGE);
}

const RefLayerEntry ref_layer_pooling2d = {
    .name = "Pooling2d", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_1,
    .descriptor_size = sizeof(BackendPooling2dDescriptor),
    .defaults = pooling_defaults, .check = check_pooling, .prepare = prepare_pooling,
    .run = run_pooling,
};

/* ---- TransposeConvolution2d and Resize (not yet run by this build) ------------------------ */

const RefLayerEntry ref_layer_transpose_convolution2d = {
    .name = "TransposeConvolution2d", .min_inputs = 2, .max_inputs = 3,
    .descriptor_min_size = BACKEND_TRANSPOSE_CONVOLUTION2D_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendTransposeConvolution2dDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};

const RefLayerEntry ref_layer_resize = {
    .name = "Resize", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_RESIZE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendResizeDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};
