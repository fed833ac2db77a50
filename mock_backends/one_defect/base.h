/*
 * base.h - a complete, correct and deliberately plain backend that every one-defect backend
 * starts from (mock_backends/one_defect/correct/plain.c is this file and nothing else).
 *
 * It is written independently of reference_backend/: straightforward loops, float accumulation,
 * every object allocated through the custom allocator when the runtime offers one.
 *
 * A one-defect backend replaces exactly one piece and says so in its own file. Each replaceable
 * piece is a static function declared here and defined here unless its knob is set; a backend
 * that sets the knob defines the function itself after including this file:
 *
 *   OD_OWN_FAIL                 od_fail(): writes the message of a non-OK status
 *   OD_OWN_IS_LAYER_SUPPORTED   od_is_layer_supported(): the instance's support answer
 *   OD_OWN_CHECK_BUFFERS        od_check_buffers(): execute's check of the buffers it is given
 *   OD_OWN_ACQUIRE, OD_OWN_RELEASE           the memory manager's acquire() and release()
 *   OD_OWN_USE_CUSTOM_ALLOCATOR od_use_custom_allocator()
 *   OD_OWN_FREE                 od_free(): returns memory od_alloc() gave
 *   OD_OWN_ACTIVATION, OD_OWN_BINARY, OD_OWN_FULLY_CONNECTED, OD_OWN_CONVOLUTION,
 *   OD_OWN_DEPTHWISE, OD_OWN_POOLING, OD_OWN_SOFTMAX, OD_OWN_RESHAPE      the kernels
 *
 * Other knobs (macros with a correct default):
 *   OD_BACKEND_ID               the id ("OneDefect")
 *   OD_INSTANCE_ID              what an instance's get_id() returns (OD_BACKEND_ID)
 *   OD_LAYER_TYPE_KNOWN(t)      whether layer type t exists
 *   OD_DATA_TYPE_KNOWN(t)       whether data type t is one the backend runs
 *   OD_WORKLOAD_STRUCT_SIZE     the struct_size a workload declares
 *   OD_AFTER_EXECUTE(w)         runs after a successful execute (nothing)
 *   OD_SIGMOID(v), OD_TANH(v)   the activation functions of one float (overflow-free forms)
 *   OD_WORKLOAD_STATE           extra members of OdWorkload (none); OD_FREE_STATE(w) frees them
 */
#ifndef ONE_DEFECT_BASE_H
#define ONE_DEFECT_BASE_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_api.h"

#ifndef OD_BACKEND_ID
#define OD_BACKEND_ID "OneDefect"
#endif
#ifndef OD_INSTANCE_ID
#define OD_INSTANCE_ID OD_BACKEND_ID
#endif
#ifndef OD_LAYER_TYPE_KNOWN
#define OD_LAYER_TYPE_KNOWN(t) ((t) < BACKEND_LAYER_TYPE_COUNT)
#endif
#ifndef OD_DATA_TYPE_KNOWN
#define OD_DATA_TYPE_KNOWN(t) ((t) == BACKEND_DATA_TYPE_FLOAT32)
#endif
#ifndef OD_WORKLOAD_STRUCT_SIZE
#define OD_WORKLOAD_STRUCT_SIZE ((uint32_t)sizeof(BackendWorkload))
#endif
#ifndef OD_AFTER_EXECUTE
#define OD_AFTER_EXECUTE(w) ((void)(w))
#endif
#ifndef OD_SIGMOID
#define OD_SIGMOID(v) od_sigmoid(v)
#endif
#ifndef OD_TANH
#define OD_TANH(v) tanhf(v)
#endif
#ifndef OD_WORKLOAD_STATE
#define OD_WORKLOAD_STATE
#endif
#ifndef OD_FREE_STATE
#define OD_FREE_STATE(w) ((void)(w))
#endif

/* ---- allocation: the runtime's allocator when it offered one, else malloc ------------------ */

static void *od_alloc(const BackendAllocator *allocator, size_t size)
{
    void *p;
    if (allocator == NULL)
        return calloc(1, size);
    p = allocator->allocate(allocator->user_data, size, 16);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

static void od_free(const BackendAllocator *allocator, void *pointer);
#ifndef OD_OWN_FREE
static void od_free(const BackendAllocator *allocator, void *pointer)
{
    if (allocator == NULL)
        free(pointer);
    else if (pointer != NULL)
        allocator->deallocate(allocator->user_data, pointer);
}
#endif

/* ---- messages ----------------------------------------------------------------------------- */

static BackendStatus od_fail(char *message, size_t size, BackendStatus status, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
#ifndef OD_OWN_FAIL
static BackendStatus od_fail(char *message, size_t size, BackendStatus status, const char *format, ...)
{
    va_list args;
    if (message == NULL || size == 0)
        return status;
    va_start(args, format);
    vsnprintf(message, size, format, args);
    va_end(args);
    return status;
}
#endif

#define OD_INVALID(...) od_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define OD_UNSUPPORTED(...) od_fail(message, message_size, BACKEND_STATUS_UNSUPPORTED, __VA_ARGS__)
#define OD_TRY(e) do { BackendStatus s_ = (e); if (s_ != BACKEND_STATUS_OK) return s_; } while (0)

/* ---- the objects -------------------------------------------------------------------------- */

typedef struct OdInstance {
    BackendInstance base;
    const BackendAllocator *allocator;
} OdInstance;

typedef struct OdFactory {
    BackendWorkloadFactory base;
    const BackendAllocator *allocator;
} OdFactory;

typedef struct OdManager {
    BackendMemoryManager base;
    const BackendAllocator *allocator;
    int acquired;
} OdManager;

typedef struct OdWorkload {
    BackendWorkload base;
    const BackendAllocator *allocator;
    BackendLayerType type;
    uint32_t num_inputs;
    BackendTensorInfo in[3];
    BackendTensorInfo out;
    BackendActivationDescriptor activation;
    BackendFullyConnectedDescriptor fc;
    BackendConvolution2dDescriptor conv;
    BackendPooling2dDescriptor pool;
    BackendSoftmaxDescriptor softmax;
    OD_WORKLOAD_STATE
} OdWorkload;

static int64_t od_count(const BackendTensorInfo *t)
{
    int64_t n = 1;
    for (uint32_t d = 0; d < t->num_dimensions; d++)
        n *= t->dimensions[d];
    return n;
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

static BackendStatus od_check_layer(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    const BackendTensorInfo *x;
    int64_t dims[BACKEND_MAX_DIMENSIONS];
    uint32_t want_inputs = 1;
    if (layer == NULL || layer->struct_size < BACKEND_LAYER_DESCRIPTION_SIZE_1_1)
        return OD_INVALID("malformed layer description");
    if (!OD_LAYER_TYPE_KNOWN(layer->layer_type))
        return OD_UNSUPPORTED("unknown layer type %u", layer->layer_type);
    if (layer->num_inputs < 1 || layer->num_inputs > 3 || layer->num_outputs != 1 || layer->inputs == NULL ||
        layer->outputs == NULL)
        return OD_INVALID("wrong number of inputs or outputs");
    for (uint32_t i = 0; i <= layer->num_inputs; i++) {
        const BackendTensorInfo *t = i < layer->num_inputs ? &layer->inputs[i] : &layer->outputs[0];
        if (t->struct_size < BACKEND_TENSOR_INFO_SIZE_1_1 || t->num_dimensions > BACKEND_MAX_DIMENSIONS)
            return OD_INVALID("malformed tensor %u", i);
        if (!OD_DATA_TYPE_KNOWN(t->data_type))
            return OD_UNSUPPORTED("data type %u: only float32 runs here", t->data_type);
        for (uint32_t d = 0; d < t->num_dimensions; d++)
            if (t->dimensions[d] < 1 || t->dimensions[d] > ((int64_t)1 << 30))
                return OD_INVALID("tensor %u: dimension %u out of range", i, d);
    }
    x = &layer->inputs[0];
    switch (layer->layer_type) {
    case BACKEND_LAYER_ACTIVATION: {
        const BackendActivationDescriptor *d = layer->descriptor;
        if (d == NULL || d->struct_size < BACKEND_ACTIVATION_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("Activation needs its descriptor");
        if (d->function > BACKEND_ACTIVATION_LEAKY_RELU)
            return OD_UNSUPPORTED("activation function %u", d->function);
        break;
    }
    case BACKEND_LAYER_ADDITION:
    case BACKEND_LAYER_MULTIPLICATION: {
        const BackendTensorInfo *a = x, *b = &layer->inputs[1];
        uint32_t rank = a->num_dimensions > b->num_dimensions ? a->num_dimensions : b->num_dimensions;
        want_inputs = 2;
        if (layer->num_inputs != 2)
            return OD_INVALID("Addition and Multiplication take two inputs");
        for (uint32_t i = 0; i < rank; i++) {
            int64_t da = 1, db = 1;
            if (i + a->num_dimensions >= rank)
                da = a->dimensions[i + a->num_dimensions - rank];
            if (i + b->num_dimensions >= rank)
                db = b->dimensions[i + b->num_dimensions - rank];
            if (da != db && da != 1 && db != 1)
                return OD_INVALID("the inputs do not broadcast");
            dims[i] = da > db ? da : db;
        }
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
        const BackendConvolution2dDescriptor *d = layer->descriptor;
        const BackendTensorInfo *w = &layer->inputs[1];
        int depthwise = layer->layer_type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D;
        if (d == NULL || d->struct_size < BACKEND_CONVOLUTION2D_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("convolutions need their descriptor");
        want_inputs = d->bias_enabled ? 3 : 2;
        if (layer->num_inputs != want_inputs || x->num_dimensions != 4 || w->num_dimensions != 4)
            return OD_INVALID("convolutions take x [N, H, W, C], w and an optional bias");
        if (d->dilation_y < 1 || d->dilation_x < 1)
            return OD_INVALID("dilation must be at least 1");
        if (depthwise ? (w->dimensions[0] != 1 || w->dimensions[3] % x->dimensions[3] != 0)
                      : w->dimensions[3] != x->dimensions[3])
            return OD_INVALID("the weights do not match the input channels");
        dims[0] = x->dimensions[0];
        dims[3] = depthwise ? w->dimensions[3] : w->dimensions[0];
        if (d->bias_enabled && (layer->inputs[2].num_dimensions != 1 || layer->inputs[2].dimensions[0] != dims[3]))
            return OD_INVALID("the bias does not match the output channels");
        OD_TRY(od_window(x->dimensions[1], d->pad_top, d->pad_bottom, (w->dimensions[1] - 1) * d->dilation_y + 1,
                         d->stride_y, &dims[1], message, message_size));
        OD_TRY(od_window(x->dimensions[2], d->pad_left, d->pad_right, (w->dimensions[2] - 1) * d->dilation_x + 1,
                         d->stride_x, &dims[2], message, message_size));
        OD_TRY(od_expect_output(layer, dims, 4, message, message_size));
        break;
    }
    case BACKEND_LAYER_POOLING2D: {
        const BackendPooling2dDescriptor *d = layer->descriptor;
        if (d == NULL || d->struct_size < BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_1)
            return OD_INVALID("Pooling2d needs its descriptor");
        if (x->num_dimensions != 4 || d->pool_type > BACKEND_POOLING_AVERAGE || d->kernel_y < 1 || d->kernel_x < 1)
            return OD_INVALID("Pooling2d takes x [N, H, W, C], max or average, a kernel of at least 1");
        if (d->pad_top >= d->kernel_y || d->pad_bottom >= d->kernel_y || d->pad_left >= d->kernel_x ||
            d->pad_right >= d->kernel_x)
            return OD_INVALID("pooling padding must be smaller than the kernel");
        dims[0] = x->dimensions[0];
        dims[3] = x->dimensions[3];
        OD_TRY(od_window(x->dimensions[1], d->pad_top, d->pad_bottom, d->kernel_y, d->stride_y, &dims[1],
                         message, message_size));
        OD_TRY(od_window(x->dimensions[2], d->pad_left, d->pad_right, d->kernel_x, d->stride_x, &dims[2],
                         message, message_size));
        OD_TRY(od_expect_output(layer, dims, 4, message, message_size));
        break;
    }
    case BACKEND_LAYER_SOFTMAX: {
        const BackendSoftmaxDescriptor *d = layer->descriptor;
        if (d == NULL || d->struct_size < BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1 || !isfinite(d->beta))
            return OD_INVALID("Softmax needs a finite beta");
        if (x->num_dimensions < 1)
            return OD_INVALID("Softmax needs at least one dimension");
        break;
    }
    default: /* Reshape */
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

/* ---- kernels ------------------------------------------------------------------------------ */

typedef void OdKernel(OdWorkload *w, const float *const *in, float *out);

static OdKernel od_activation, od_binary, od_fully_connected, od_convolution, od_depthwise, od_pooling,
    od_softmax, od_reshape;

static __attribute__((unused)) float od_sigmoid(float v)
{
    if (v >= 0)
        return 1.0f / (1.0f + expf(-v));
    float e = expf(v);
    return e / (1.0f + e);
}

#ifndef OD_OWN_ACTIVATION
static void od_activation(OdWorkload *w, const float *const *in, float *out)
{
    const BackendActivationDescriptor *d = &w->activation;
    const float *x = in[0];
    int64_t n = od_count(&w->in[0]);
    switch (d->function) {
    case BACKEND_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] > 0 ? x[i] : 0;
        break;
    case BACKEND_ACTIVATION_BOUNDED_RELU:
        for (int64_t i = 0; i < n; i++)
            out[i] = fminf(d->a, fmaxf(d->b, x[i]));
        break;
    case BACKEND_ACTIVATION_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            out[i] = OD_SIGMOID(x[i]);
        break;
    case BACKEND_ACTIVATION_TANH:
        for (int64_t i = 0; i < n; i++)
            out[i] = OD_TANH(x[i]);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] > 0 ? x[i] : d->a * x[i];
        break;
    }
}
#endif

/* Broadcast strides of `t` right-aligned to the output's rank: 0 where the input has size 1. */
static __attribute__((unused)) void od_broadcast_strides(const BackendTensorInfo *t, const BackendTensorInfo *o, int64_t *strides)
{
    int64_t stride = 1;
    for (int i = (int)o->num_dimensions - 1; i >= 0; i--) {
        int j = i - ((int)o->num_dimensions - (int)t->num_dimensions);
        int64_t size = j >= 0 ? t->dimensions[j] : 1;
        strides[i] = size == 1 ? 0 : stride;
        stride *= size;
    }
}

#ifndef OD_OWN_BINARY
static void od_binary(OdWorkload *w, const float *const *in, float *out)
{
    int64_t sa[BACKEND_MAX_DIMENSIONS], sb[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0};
    int rank = (int)w->out.num_dimensions, add = w->type == BACKEND_LAYER_ADDITION;
    int64_t n = od_count(&w->out), inner, step_a, step_b;
    if (rank == 0) {
        out[0] = add ? in[0][0] + in[1][0] : in[0][0] * in[1][0];
        return;
    }
    od_broadcast_strides(&w->in[0], &w->out, sa);
    od_broadcast_strides(&w->in[1], &w->out, sb);
    inner = w->out.dimensions[rank - 1];
    step_a = sa[rank - 1];
    step_b = sb[rank - 1];
    /* One row of the last dimension at a time; the outer dimensions walk an index. */
    for (int64_t start = 0; start < n; start += inner) {
        const float *a = in[0], *b = in[1];
        float *y = out + start;
        for (int d = 0; d < rank - 1; d++) {
            a += index[d] * sa[d];
            b += index[d] * sb[d];
        }
        if (add)
            for (int64_t i = 0; i < inner; i++)
                y[i] = a[i * step_a] + b[i * step_b];
        else
            for (int64_t i = 0; i < inner; i++)
                y[i] = a[i * step_a] * b[i * step_b];
        for (int d = rank - 2; d >= 0; d--) {
            if (++index[d] < w->out.dimensions[d])
                break;
            index[d] = 0;
        }
    }
}
#endif

#ifndef OD_OWN_FULLY_CONNECTED
static void od_fully_connected(OdWorkload *w, const float *const *in, float *out)
{
    int64_t n = w->in[0].dimensions[0], k = w->in[0].dimensions[1], m = w->out.dimensions[1];
    for (int64_t r = 0; r < n; r++) {
        const float *x = in[0] + r * k;
        for (int64_t c = 0; c < m; c++) {
            float sum[4] = {0, 0, 0, 0};
            int64_t i = 0;
            if (w->fc.transpose_weights) { /* w is [M, K]: row c is contiguous */
                const float *f = in[1] + c * k;
                for (; i + 4 <= k; i += 4)
                    for (int lane = 0; lane < 4; lane++)
                        sum[lane] += x[i + lane] * f[i + lane];
                for (; i < k; i++)
                    sum[0] += x[i] * f[i];
            } else {
                for (; i < k; i++)
                    sum[i % 4] += x[i] * in[1][i * m + c];
            }
            out[r * m + c] = (w->fc.bias_enabled ? in[2][c] : 0.0f) + ((sum[0] + sum[1]) + (sum[2] + sum[3]));
        }
    }
}
#endif

#ifndef OD_OWN_CONVOLUTION
static void od_convolution(OdWorkload *w, const float *const *in, float *out)
{
    const BackendConvolution2dDescriptor *d = &w->conv;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t KH = w->in[1].dimensions[1], KW = w->in[1].dimensions[2];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2], O = w->out.dimensions[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t o = 0; o < O; o++) {
                    float sum = d->bias_enabled ? in[2][o] : 0.0f;
                    for (int64_t i = 0; i < KH; i++) {
                        int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                        if (iy < 0 || iy >= H)
                            continue;
                        for (int64_t j = 0; j < KW; j++) {
                            int64_t ix = ox * d->stride_x + j * d->dilation_x - d->pad_left;
                            if (ix < 0 || ix >= W)
                                continue;
                            for (int64_t c = 0; c < C; c++)
                                sum += in[0][((n * H + iy) * W + ix) * C + c] * in[1][((o * KH + i) * KW + j) * C + c];
                        }
                    }
                    out[((n * OH + oy) * OW + ox) * O + o] = sum;
                }
}
#endif

#ifndef OD_OWN_DEPTHWISE
static void od_depthwise(OdWorkload *w, const float *const *in, float *out)
{
    const BackendConvolution2dDescriptor *d = &w->conv;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t KH = w->in[1].dimensions[1], KW = w->in[1].dimensions[2];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2], O = w->out.dimensions[3];
    int64_t mult = O / C;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                float *y = out + ((n * OH + oy) * OW + ox) * O;
                for (int64_t o = 0; o < O; o++)
                    y[o] = d->bias_enabled ? in[2][o] : 0.0f;
                for (int64_t i = 0; i < KH; i++) {
                    int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                    if (iy < 0 || iy >= H)
                        continue;
                    for (int64_t j = 0; j < KW; j++) {
                        int64_t ix = ox * d->stride_x + j * d->dilation_x - d->pad_left;
                        const float *x, *f;
                        if (ix < 0 || ix >= W)
                            continue;
                        x = in[0] + ((n * H + iy) * W + ix) * C;
                        f = in[1] + (i * KW + j) * O;
                        /* output channel o reads input channel o / mult */
                        if (mult == 1)
                            for (int64_t o = 0; o < O; o++)
                                y[o] += x[o] * f[o];
                        else
                            for (int64_t o = 0; o < O; o++)
                                y[o] += x[o / mult] * f[o];
                    }
                }
            }
}
#endif

#ifndef OD_OWN_POOLING
static void od_pooling(OdWorkload *w, const float *const *in, float *out)
{
    const BackendPooling2dDescriptor *d = &w->pool;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    int max = d->pool_type == BACKEND_POOLING_MAX;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                float *y = out + ((n * OH + oy) * OW + ox) * C;
                int64_t count = 0;
                for (int64_t c = 0; c < C; c++)
                    y[c] = max ? -INFINITY : 0.0f;
                for (int64_t i = 0; i < d->kernel_y; i++) {
                    int64_t iy = oy * d->stride_y + i - d->pad_top;
                    if (iy < 0 || iy >= H)
                        continue;
                    for (int64_t j = 0; j < d->kernel_x; j++) {
                        int64_t ix = ox * d->stride_x + j - d->pad_left;
                        const float *x;
                        if (ix < 0 || ix >= W)
                            continue;
                        x = in[0] + ((n * H + iy) * W + ix) * C;
                        count++;
                        if (max)
                            for (int64_t c = 0; c < C; c++)
                                y[c] = x[c] > y[c] ? x[c] : y[c];
                        else
                            for (int64_t c = 0; c < C; c++)
                                y[c] += x[c];
                    }
                }
                if (!max) /* padding is excluded from the average */
                    for (int64_t c = 0; c < C; c++)
                        y[c] /= (float)count;
            }
}
#endif

#ifndef OD_OWN_SOFTMAX
static void od_softmax(OdWorkload *w, const float *const *in, float *out)
{
    int64_t cols = w->in[0].dimensions[w->in[0].num_dimensions - 1];
    int64_t rows = od_count(&w->in[0]) / cols;
    float beta = w->softmax.beta;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in[0] + r * cols;
        float *y = out + r * cols;
        float top = -INFINITY, sum = 0;
        for (int64_t i = 0; i < cols; i++)
            top = fmaxf(top, beta * x[i]);
        for (int64_t i = 0; i < cols; i++) {
            y[i] = expf(beta * x[i] - top);
            sum += y[i];
        }
        for (int64_t i = 0; i < cols; i++)
            y[i] /= sum;
    }
}
#endif

#ifndef OD_OWN_RESHAPE
static void od_reshape(OdWorkload *w, const float *const *in, float *out)
{
    memcpy(out, in[0], (size_t)od_count(&w->in[0]) * sizeof(float));
}
#endif

static OdKernel *const OD_KERNELS[BACKEND_LAYER_TYPE_COUNT] = {
    od_activation, od_binary, od_binary, od_fully_connected, od_convolution, od_depthwise, od_pooling,
    od_softmax, od_reshape,
};

/* ---- workloads ---------------------------------------------------------------------------- */

static BackendStatus od_check_buffers(OdWorkload *w, const BackendBuffer *inputs, uint32_t num_inputs,
                                      const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                      size_t message_size);
#ifndef OD_OWN_CHECK_BUFFERS
static BackendStatus od_check_buffers(OdWorkload *w, const BackendBuffer *inputs, uint32_t num_inputs,
                                      const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                      size_t message_size)
{
    if (num_inputs != w->num_inputs || num_outputs != 1 || inputs == NULL || outputs == NULL)
        return OD_INVALID("expected %u inputs and 1 output", w->num_inputs);
    for (uint32_t i = 0; i <= num_inputs; i++) {
        const BackendBuffer *b = i < num_inputs ? &inputs[i] : &outputs[0];
        const BackendTensorInfo *t = i < num_inputs ? &w->in[i] : &w->out;
        if (b->struct_size < BACKEND_BUFFER_SIZE_1_1 || b->data == NULL)
            return OD_INVALID("buffer %u is malformed", i);
        if (b->size_bytes < (uint64_t)od_count(t) * sizeof(float))
            return OD_INVALID("buffer %u holds %llu bytes, too few", i, (unsigned long long)b->size_bytes);
    }
    return BACKEND_STATUS_OK;
}
#endif

static BackendStatus od_execute(BackendWorkload *self, const BackendBuffer *inputs, uint32_t num_inputs,
                                const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                size_t message_size)
{
    OdWorkload *w = (OdWorkload *)self;
    const float *in[3] = {NULL, NULL, NULL};
    OD_TRY(od_check_buffers(w, inputs, num_inputs, outputs, num_outputs, message, message_size));
    for (uint32_t i = 0; i < num_inputs && i < 3; i++)
        in[i] = inputs[i].data;
    OD_KERNELS[w->type](w, in, outputs[0].data);
    OD_AFTER_EXECUTE(w);
    return BACKEND_STATUS_OK;
}

static void od_workload_destroy(BackendWorkload *self)
{
    OdWorkload *w = (OdWorkload *)self;
    OD_FREE_STATE(w);
    od_free(w->allocator, w);
}

static BackendStatus od_create_workload(BackendWorkloadFactory *self, const BackendLayerDescription *layer,
                                        BackendWorkload **workload, char *message, size_t message_size)
{
    OdFactory *factory = (OdFactory *)self;
    OdWorkload *w;
    *workload = NULL;
    OD_TRY(od_check_layer(layer, message, message_size));
    w = od_alloc(factory->allocator, sizeof *w);
    if (w == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    w->base.struct_size = OD_WORKLOAD_STRUCT_SIZE;
    w->base.execute = od_execute;
    w->base.destroy = od_workload_destroy;
    w->allocator = factory->allocator;
    w->type = layer->layer_type;
    w->num_inputs = layer->num_inputs;
    memcpy(w->in, layer->inputs, layer->num_inputs * sizeof w->in[0]);
    w->out = layer->outputs[0];
    switch (layer->layer_type) {
    case BACKEND_LAYER_ACTIVATION: w->activation = *(const BackendActivationDescriptor *)layer->descriptor; break;
    case BACKEND_LAYER_FULLY_CONNECTED: w->fc = *(const BackendFullyConnectedDescriptor *)layer->descriptor; break;
    case BACKEND_LAYER_CONVOLUTION2D:
    case BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D:
        w->conv = *(const BackendConvolution2dDescriptor *)layer->descriptor;
        break;
    case BACKEND_LAYER_POOLING2D: w->pool = *(const BackendPooling2dDescriptor *)layer->descriptor; break;
    case BACKEND_LAYER_SOFTMAX: w->softmax = *(const BackendSoftmaxDescriptor *)layer->descriptor; break;
    default: break;
    }
    *workload = &w->base;
    return BACKEND_STATUS_OK;
}

static void od_factory_destroy(BackendWorkloadFactory *self)
{
    od_free(((OdFactory *)self)->allocator, self);
}

/* ---- memory manager ----------------------------------------------------------------------- */

static BackendStatus od_acquire(BackendMemoryManager *self, char *message, size_t message_size);
static BackendStatus od_release(BackendMemoryManager *self, char *message, size_t message_size);
#ifndef OD_OWN_ACQUIRE
static BackendStatus od_acquire(BackendMemoryManager *self, char *message, size_t message_size)
{
    OdManager *m = (OdManager *)self;
    if (m->acquired)
        return od_fail(message, message_size, BACKEND_STATUS_INVALID_STATE, "already acquired");
    m->acquired = 1;
    return BACKEND_STATUS_OK;
}
#endif
#ifndef OD_OWN_RELEASE
static BackendStatus od_release(BackendMemoryManager *self, char *message, size_t message_size)
{
    OdManager *m = (OdManager *)self;
    if (!m->acquired)
        return od_fail(message, message_size, BACKEND_STATUS_INVALID_STATE, "release without acquire");
    m->acquired = 0;
    return BACKEND_STATUS_OK;
}
#endif

static void od_manager_destroy(BackendMemoryManager *self)
{
    od_free(((OdManager *)self)->allocator, self);
}

/* ---- instance ----------------------------------------------------------------------------- */

static const BackendCapability OD_CAPABILITIES[] = {
    {BACKEND_CAPABILITY_SIZE_1_1, 1, "NonConstWeights"},
};

static const char *od_get_id(const BackendInstance *self)
{
    (void)self;
    return OD_INSTANCE_ID;
}

static void od_instance_destroy(BackendInstance *self)
{
    free(self);
}

static BackendStatus od_get_capabilities(const BackendInstance *self, const BackendCapability **capabilities,
                                         uint32_t *count)
{
    (void)self;
    *capabilities = OD_CAPABILITIES;
    *count = 1;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_is_layer_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                           char *message, size_t message_size);
#ifndef OD_OWN_IS_LAYER_SUPPORTED
static BackendStatus od_is_layer_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                           char *message, size_t message_size)
{
    (void)self;
    return od_check_layer(layer, message, message_size);
}
#endif

static BackendStatus od_create_memory_manager(const BackendInstance *self, BackendMemoryManager **manager,
                                              char *message, size_t message_size)
{
    const BackendAllocator *allocator = ((const OdInstance *)self)->allocator;
    OdManager *m = od_alloc(allocator, sizeof *m);
    if (m == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    m->base.struct_size = sizeof m->base;
    m->base.acquire = od_acquire;
    m->base.release = od_release;
    m->base.destroy = od_manager_destroy;
    m->allocator = allocator;
    *manager = &m->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_create_workload_factory(const BackendInstance *self, BackendMemoryManager *manager,
                                                BackendWorkloadFactory **factory, char *message,
                                                size_t message_size)
{
    const BackendAllocator *allocator = ((const OdInstance *)self)->allocator;
    OdFactory *f = od_alloc(allocator, sizeof *f);
    (void)manager;
    if (f == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    f->base.struct_size = sizeof f->base;
    f->base.create_workload = od_create_workload;
    f->base.destroy = od_factory_destroy;
    f->allocator = allocator;
    *factory = &f->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_use_custom_allocator(const BackendInstance *self, const BackendAllocator *allocator,
                                             char *message, size_t message_size);
#ifndef OD_OWN_USE_CUSTOM_ALLOCATOR
static BackendStatus od_use_custom_allocator(const BackendInstance *self, const BackendAllocator *allocator,
                                             char *message, size_t message_size)
{
    if (allocator == NULL || allocator->struct_size < BACKEND_ALLOCATOR_SIZE_1_1 || allocator->allocate == NULL ||
        allocator->deallocate == NULL)
        return OD_INVALID("malformed allocator");
    /* The instance is the runtime's: later objects it creates allocate through `allocator`. */
    ((OdInstance *)self)->allocator = allocator;
    return BACKEND_STATUS_OK;
}
#endif

BACKEND_EXPORT const char *GetBackendId(void)
{
    return OD_BACKEND_ID;
}

BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{
    *major = BACKEND_API_VERSION_MAJOR;
    *minor = BACKEND_API_VERSION_MINOR;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    OdInstance *instance = calloc(1, sizeof *instance);
    if (instance == NULL)
        return NULL;
    instance->base.struct_size = sizeof instance->base;
    instance->base.api_major = BACKEND_API_VERSION_MAJOR;
    instance->base.api_minor = BACKEND_API_VERSION_MINOR;
    instance->base.get_id = od_get_id;
    instance->base.destroy = od_instance_destroy;
    instance->base.get_capabilities = od_get_capabilities;
    instance->base.is_layer_supported = od_is_layer_supported;
    instance->base.create_memory_manager = od_create_memory_manager;
    instance->base.create_workload_factory = od_create_workload_factory;
    instance->base.use_custom_allocator = od_use_custom_allocator;
    return &instance->base;
}

#endif /* ONE_DEFECT_BASE_H */
