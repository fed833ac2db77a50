/*
 * Layers over the spatial axes of NHWC tensors: Convolution2d, DepthwiseConvolution2d,
 * Pooling2d, TransposeConvolution2d and Resize.
 */
#include <math.h>

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
    if (d->groups < 1)
        return INVALID("groups must be at least 1");
    if (depthwise) {
        if (w->dimensions[0] != 1)
            return INVALID("depthwise weights must be [1, kH, kW, C*m], first dimension is %lld",
                           (long long)w->dimensions[0]);
        if (w->dimensions[3] % x->dimensions[3] != 0)
            return INVALID("depthwise weights have %lld channels, not a multiple of the input's %lld",
                           (long long)w->dimensions[3], (long long)x->dimensions[3]);
        channels_out = w->dimensions[3];
    } else {
        if (x->dimensions[3] % d->groups != 0 || w->dimensions[0] % d->groups != 0)
            return INVALID("%u groups do not divide the input channels (%lld) and the outputs "
                           "(%lld) evenly", d->groups, (long long)x->dimensions[3],
                           (long long)w->dimensions[0]);
        if (w->dimensions[3] != x->dimensions[3] / d->groups)
            return INVALID("weights have %lld input channels per group, the input with %u groups "
                           "has %lld", (long long)w->dimensions[3], d->groups,
                           (long long)(x->dimensions[3] / d->groups));
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
    return rk_grouped_conv2d_fused(in[0], in[1], bias, out, &w->g.window, w->output.dimensions[3],
                                   w->d.convolution.groups, NULL);
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

/* ONNX's (and ONNX Runtime's) pooled extent; with ceil_mode, a last window that would start in
   the end padding is not made. */
static BackendStatus pooled_output(int64_t input, int64_t pad_before, int64_t pad_after,
                                   int64_t extent, int64_t stride, int ceil_mode, const char *axis,
                                   int64_t *out, char *message, size_t message_size)
{
    const int64_t span = input + pad_before + pad_after - extent;
    if (span < 0)
        return INVALID("kernel extent %lld along %s exceeds the padded input (%lld)",
                       (long long)extent, axis, (long long)(input + pad_before + pad_after));
    if (!ceil_mode) {
        *out = span / stride + 1;
        return BACKEND_STATUS_OK;
    }
    *out = (span + stride - 1) / stride + 1;
    if ((*out - 1) * stride >= input + pad_before)
        *out -= 1;
    return BACKEND_STATUS_OK;
}

static BackendStatus check_pooling(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                   char *message, size_t message_size)
{
    const BackendPooling2dDescriptor *d = &desc->pooling;
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t out[4];
    TRY(ref_expect_rank(x, 4, "input [N, H, W, C]", message, message_size));
    if (d->pool_type > BACKEND_POOLING_L2)
        return UNSUPPORTED("pooling type %u is not supported", d->pool_type);
    if (d->kernel_y < 1 || d->kernel_x < 1 || d->stride_y < 1 || d->stride_x < 1 ||
        d->dilation_y < 1 || d->dilation_x < 1)
        return INVALID("kernel, stride and dilation must be at least 1");
    const int64_t extent_y = ((int64_t)d->kernel_y - 1) * d->dilation_y + 1;
    const int64_t extent_x = ((int64_t)d->kernel_x - 1) * d->dilation_x + 1;
    /* every window starts inside the padded input and reaches past the padding */
    if (d->pad_top >= extent_y || d->pad_bottom >= extent_y || d->pad_left >= extent_x ||
        d->pad_right >= extent_x)
        return INVALID("padding must be smaller than the pooling kernel's extent");
    out[0] = x->dimensions[0];
    TRY(pooled_output(x->dimensions[1], d->pad_top, d->pad_bottom, extent_y, d->stride_y,
                      d->ceil_mode != 0, "height", &out[1], message, message_size));
    TRY(pooled_output(x->dimensions[2], d->pad_left, d->pad_right, extent_x, d->stride_x,
                      d->ceil_mode != 0, "width", &out[2], message, message_size));
    out[3] = x->dimensions[3];
    return ref_expect_output(layer, out, 4, message, message_size);
}

static void prepare_pooling(RefWorkload *w)
{
    const BackendPooling2dDescriptor *d = &w->d.pooling;
    fill_window(w, d->stride_y, d->stride_x, d->dilation_y, d->dilation_x, d->pad_top,
                d->pad_bottom, d->pad_left, d->pad_right, d->kernel_y, d->kernel_x);
}

static int run_pooling(const RefWorkload *w, const float *const *in, float *out)
{
    static const int POOLS[] = { RK_POOL_MAX, RK_POOL_AVERAGE, RK_POOL_L2 };
    return rk_pool2d(in[0], out, &w->g.window, POOLS[w->d.pooling.pool_type],
                     w->d.pooling.count_include_pad != 0);
}

const RefLayerEntry ref_layer_pooling2d = {
    .name = "Pooling2d", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_1,
    .descriptor_size = sizeof(BackendPooling2dDescriptor),
    .defaults = pooling_defaults, .check = check_pooling, .prepare = prepare_pooling,
    .run = run_pooling,
};

/* ---- TransposeConvolution2d ------------------------------------------------------------ */

/* stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - pads, as ONNX's
   ConvTranspose; every product bounded so that nothing overflows. */
static BackendStatus transposed_output(int64_t input, int64_t kernel, int64_t stride, int64_t dilation,
                                       int64_t extra, int64_t pad_before, int64_t pad_after,
                                       const char *axis, int64_t *out, char *message,
                                       size_t message_size)
{
    const int64_t limit = REF_MAX_ELEMENTS;
    if (input - 1 > limit / stride || kernel - 1 > limit / dilation)
        return INVALID("the transposed convolution's output along %s is too large", axis);
    *out = stride * (input - 1) + extra + (kernel - 1) * dilation + 1 - pad_before - pad_after;
    if (*out < 1)
        return INVALID("the padding leaves no output along %s", axis);
    return BACKEND_STATUS_OK;
}

static BackendStatus check_transpose_convolution(const BackendLayerDescription *layer,
                                                 const RefDescriptor *desc, char *message,
                                                 size_t message_size)
{
    const BackendTransposeConvolution2dDescriptor *d = &desc->transpose_convolution;
    const BackendTensorInfo *x = &layer->inputs[0], *w = &layer->inputs[1];
    int64_t out[4], channels_out;
    TRY(ref_expect_inputs(layer, d->bias_enabled ? 3 : 2, message, message_size));
    TRY(ref_expect_rank(x, 4, "input [N, H, W, C]", message, message_size));
    TRY(ref_expect_rank(w, 4, "weights [C, kH, kW, O/groups]", message, message_size));
    if (d->stride_y < 1 || d->stride_x < 1 || d->dilation_y < 1 || d->dilation_x < 1)
        return INVALID("stride and dilation must be at least 1");
    if (d->groups < 1 || x->dimensions[3] % d->groups != 0)
        return INVALID("%u groups do not divide the input channels (%lld)", d->groups,
                       (long long)x->dimensions[3]);
    if (w->dimensions[0] != x->dimensions[3])
        return INVALID("weights have %lld input channels, the input has %lld",
                       (long long)w->dimensions[0], (long long)x->dimensions[3]);
    if ((d->output_padding_y >= d->stride_y && d->output_padding_y >= d->dilation_y) ||
        (d->output_padding_x >= d->stride_x && d->output_padding_x >= d->dilation_x))
        return INVALID("output_padding must be smaller than the stride or the dilation");
    if (w->dimensions[3] > REF_MAX_ELEMENTS / d->groups)
        return INVALID("too many output channels");
    channels_out = w->dimensions[3] * d->groups;
    if (d->bias_enabled) {
        TRY(ref_expect_rank(&layer->inputs[2], 1, "bias", message, message_size));
        if (layer->inputs[2].dimensions[0] != channels_out)
            return INVALID("bias has %lld elements, the layer has %lld output channels",
                           (long long)layer->inputs[2].dimensions[0], (long long)channels_out);
    }
    out[0] = x->dimensions[0];
    TRY(transposed_output(x->dimensions[1], w->dimensions[1], d->stride_y, d->dilation_y,
                          d->output_padding_y, d->pad_top, d->pad_bottom, "height", &out[1],
                          message, message_size));
    TRY(transposed_output(x->dimensions[2], w->dimensions[2], d->stride_x, d->dilation_x,
                          d->output_padding_x, d->pad_left, d->pad_right, "width", &out[2],
                          message, message_size));
    out[3] = channels_out;
    return ref_expect_output(layer, out, 4, message, message_size);
}

static void prepare_transpose_convolution(RefWorkload *w)
{
    const BackendTransposeConvolution2dDescriptor *d = &w->d.transpose_convolution;
    fill_window(w, d->stride_y, d->stride_x, d->dilation_y, d->dilation_x, d->pad_top, d->pad_bottom,
                d->pad_left, d->pad_right, w->inputs[1].dimensions[1], w->inputs[1].dimensions[2]);
}

static int run_transpose_convolution(const RefWorkload *w, const float *const *in, float *out)
{
    const BackendTransposeConvolution2dDescriptor *d = &w->d.transpose_convolution;
    return rk_transpose_conv2d(in[0], in[1], d->bias_enabled ? in[2] : NULL, out, &w->g.window,
                               w->output.dimensions[3], d->groups);
}

const RefLayerEntry ref_layer_transpose_convolution2d = {
    .name = "TransposeConvolution2d", .min_inputs = 2, .max_inputs = 3,
    .descriptor_min_size = BACKEND_TRANSPOSE_CONVOLUTION2D_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendTransposeConvolution2dDescriptor), .since_1_3 = 1,
    .check = check_transpose_convolution, .prepare = prepare_transpose_convolution,
    .run = run_transpose_convolution,
};

/* ---- Resize ------------------------------------------------------------------------------- */

static BackendStatus check_resize(const BackendLayerDescription *layer, const RefDescriptor *desc,
                                  char *message, size_t message_size)
{
    const BackendResizeDescriptor *d = &desc->resize;
    const BackendTensorInfo *x = &layer->inputs[0], *y = &layer->outputs[0];
    TRY(ref_expect_rank(x, 4, "input [N, H, W, C]", message, message_size));
    TRY(ref_expect_rank(y, 4, "output [N, H, W, C]", message, message_size));
    if (d->mode > BACKEND_RESIZE_CUBIC)
        return UNSUPPORTED("resize mode %u is not supported", d->mode);
    if (d->coordinate_transformation > BACKEND_RESIZE_TF_HALF_PIXEL_FOR_NN)
        return UNSUPPORTED("coordinate transformation %u is not supported",
                           d->coordinate_transformation);
    if (d->nearest_mode > BACKEND_RESIZE_CEIL)
        return UNSUPPORTED("nearest mode %u is not supported", d->nearest_mode);
    if (!(d->scale_y > 0.0f) || !(d->scale_x > 0.0f) || !isfinite(d->scale_y) || !isfinite(d->scale_x))
        return INVALID("resize scales must be positive and finite");
    if (!isfinite(d->cubic_coeff_a))
        return INVALID("cubic_coeff_a must be finite");
    /* the taps index the input with 32-bit integers */
    if (x->dimensions[1] > INT32_MAX || x->dimensions[2] > INT32_MAX)
        return UNSUPPORTED("Resize of inputs of 2^31 rows or columns or more");
    if (y->dimensions[0] != x->dimensions[0] || y->dimensions[3] != x->dimensions[3]) {
        char want[160], got[160];
        ref_format_shape(x, want, sizeof want);
        ref_format_shape(y, got, sizeof got);
        return INVALID("Resize keeps N and C: input %s, output %s", want, got);
    }
    return BACKEND_STATUS_OK;
}

/* The taps of both axes: [oh + ow][taps] indices, then as many weights. */
static size_t resize_extra_bytes(const BackendLayerDescription *layer, const RefDescriptor *d)
{
    const int64_t lengths = layer->outputs[0].dimensions[1] + layer->outputs[0].dimensions[2];
    return (size_t)(lengths * rk_resize_taps((int)d->resize.mode)) * (sizeof(int32_t) + sizeof(float));
}

static void prepare_resize(RefWorkload *w)
{
    const BackendResizeDescriptor *d = &w->d.resize;
    const int64_t *x = w->inputs[0].dimensions, *y = w->output.dimensions;
    const int taps = rk_resize_taps((int)d->mode);
    int32_t *index = w->extra;
    float *weight = (float *)(void *)(index + (y[1] + y[2]) * taps);
    rk_resize_plan *r = &w->g.resize;
    *r = (rk_resize_plan){ .n = x[0], .h = x[1], .w = x[2], .c = x[3], .oh = y[1], .ow = y[2],
                           .taps = taps, .y_index = index, .x_index = index + y[1] * taps,
                           .y_weight = weight, .x_weight = weight + y[1] * taps };
    rk_resize_axis(x[1], y[1], d->scale_y, (int)d->mode, (int)d->coordinate_transformation,
                   (int)d->nearest_mode, d->cubic_coeff_a, d->exclude_outside != 0, index, weight);
    rk_resize_axis(x[2], y[2], d->scale_x, (int)d->mode, (int)d->coordinate_transformation,
                   (int)d->nearest_mode, d->cubic_coeff_a, d->exclude_outside != 0,
                   index + y[1] * taps, weight + y[1] * taps);
}

static int run_resize(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_resize(in[0], out, &w->g.resize);
}

const RefLayerEntry ref_layer_resize = {
    .name = "Resize", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_RESIZE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendResizeDescriptor), .since_1_3 = 1,
    .check = check_resize, .extra_bytes = resize_extra_bytes, .prepare = prepare_resize,
    .run = run_resize,
};
