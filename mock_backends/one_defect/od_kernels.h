/*
 * od_kernels.h - one plain kernel per layer type of Backend API 1.1 and 1.2. Part of base.h: a
 * one-defect backend includes base.h, which sets the knobs' defaults before it includes this.
 * What 1.3 added (its layer types, its activation functions, grouped convolution, the pooling
 * and softmax members) runs in the kernels of od_kernels13.h and od_spatial13.h, so that a
 * backend that replaces one of these replaces nothing of 1.3.
 */
#ifndef ONE_DEFECT_KERNELS_H
#define ONE_DEFECT_KERNELS_H

/* ---- kernels ------------------------------------------------------------------------------ */

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

#endif /* ONE_DEFECT_KERNELS_H */
