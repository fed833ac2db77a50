/*
 * Activation functions, 4 lanes at a time, shared with the thread pool on large tensors.
 */
#include <math.h>

#include "kernels_internal.h"

static inline vf4 zero(void) { return vf4_splat(0.0f); }
static inline vf4 one(void) { return vf4_splat(1.0f); }

static inline vf4 elu_v4(vf4 x, vf4 a, vf4 b)
{
    (void)b;
    return vf4_select(x > zero(), x, a * expm1_v4(vf4_min(x, zero())));
}

static inline vf4 selu_v4(vf4 x, vf4 a, vf4 b) { return b * elu_v4(x, a, b); }

static inline vf4 hard_sigmoid_v4(vf4 x, vf4 a, vf4 b)
{
    return vf4_max(zero(), vf4_min(one(), a * x + b));
}

static inline vf4 hard_swish_v4(vf4 x, vf4 a, vf4 b)
{
    (void)a, (void)b;
    /* x (x + 3) / 6 rather than x (x / 6 + 1/2): x + 3 is exact near -3, where the result
       vanishes; the sixth as a product (a division costs as much as the rest together) */
    return x * vf4_max(zero(), vf4_min(vf4_splat(6.0f), x + vf4_splat(3.0f))) * vf4_splat(1.0f / 6.0f);
}

static inline vf4 swish_v4(vf4 x, vf4 a, vf4 b)
{
    (void)b;
    return x * sigmoid_v4(a * x);
}

/* x/2 (1 + erf(x/sqrt2)) through erfc, so that the tail x << 0 keeps its relative precision. */
static inline vf4 gelu_v4(vf4 x, vf4 a, vf4 b)
{
    (void)a, (void)b;
    vf4 e = erfc_nonneg_v4(vf4_abs(x) * vf4_splat(0.70710678118654752f));
    return vf4_splat(0.5f) * x * vf4_select(x >= zero(), vf4_splat(2.0f) - e, e);
}

/* 1 + tanh(u) = 2 sigmoid(2u), without the cancellation for u << 0. */
static inline vf4 gelu_tanh_v4(vf4 x, vf4 a, vf4 b)
{
    (void)a, (void)b;
    vf4 u = vf4_splat(0.79788456080286536f) * (x + vf4_splat(0.044715f) * x * x * x);
    return x * sigmoid_v4(vf4_splat(2.0f) * u);
}

/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|): never overflows. */
static inline vf4 softplus_v4(vf4 x, vf4 a, vf4 b)
{
    (void)a, (void)b;
    vf4 r = vf4_max(x, zero()) + log1p_unit_v4(exp_v4(-vf4_abs(x)));
    return vf4_select(x != x, x, r);
}

static inline vf4 softsign_v4(vf4 x, vf4 a, vf4 b)
{
    (void)a, (void)b;
    return x / (one() + vf4_abs(x));
}

/* a is the lower bound; x second so that NaN passes through */
static inline vf4 clip_v4(vf4 x, vf4 a, vf4 b) { return vf4_min(b, vf4_max(a, x)); }

static inline vf4 celu_v4(vf4 x, vf4 a, vf4 b)
{
    (void)b;
    vf4 t = a * expm1_v4(vf4_min(x, zero()) / a);
    return vf4_max(zero(), x) + vf4_min(zero(), t);
}

static inline vf4 thresholded_relu_v4(vf4 x, vf4 a, vf4 b)
{
    (void)b;
    return vf4_select(x > a, x, zero());
}

/* tanh(log(1 + n)) = n (n + 2) / (n (n + 2) + 2) with n = e^x: one exp and one division, and
   relative precision for x << 0; beyond x = 20 the factor is 1 in float. */
static inline vf4 mish_v4(vf4 x, vf4 a, vf4 b)
{
    (void)a, (void)b;
    vf4 n = exp_v4(vf4_min(x, vf4_splat(20.0f)));
    vf4 q = n * (n + vf4_splat(2.0f));
    return x * vf4_select(x > vf4_splat(20.0f), one(), q / (q + vf4_splat(2.0f)));
}

#define MAP_AB(fn)                                                              \
    do {                                                                        \
        const vf4 va = vf4_splat(a), vb = vf4_splat(b);                         \
        int64_t i_ = 0;                                                         \
        for (; i_ + 4 <= count; i_ += 4)                                        \
            vf4_store(y + i_, fn(vf4_load(x + i_), va, vb));                    \
        if (i_ < count) {                                                       \
            float tmp_[4] = { 0.0f, 0.0f, 0.0f, 0.0f };                         \
            memcpy(tmp_, x + i_, (size_t)(count - i_) * sizeof(float));         \
            vf4_store(tmp_, fn(vf4_load(tmp_), va, vb));                        \
            memcpy(y + i_, tmp_, (size_t)(count - i_) * sizeof(float));         \
        }                                                                       \
    } while (0)

/* One thread's part: y[i] = f(x[i]) for i < count. */
void rk_activation_serial(const float *x, float *y, int64_t count, int function, float a, float b)
{
    int64_t i = 0;
    if (rk_use_avx512() && rk_act16_covers(function)) {
        rk_act16(x, NULL, y, count, function, a, b);
        return;
    }
    switch (function) {
    case RK_RELU:
        for (; i < count; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case RK_BOUNDED_RELU:
        for (; i < count; i++) {
            float v = x[i] < b ? b : x[i];
            y[i] = v > a ? a : v;
        }
        break;
    case RK_SIGMOID:
        RK_MAP_V4(sigmoid_v4, x, y, count);
        break;
    case RK_TANH:
        RK_MAP_V4(tanh_v4, x, y, count);
        break;
    case RK_LEAKY_RELU:
        for (; i + 4 <= count; i += 4) {
            vf4 v = vf4_load(x + i);
            vf4_store(y + i, vf4_select(v > vf4_splat(0.0f), v, v * vf4_splat(a)));
        }
        for (; i < count; i++)
            y[i] = x[i] > 0.0f ? x[i] : a * x[i];
        break;
    case RK_ELU: MAP_AB(elu_v4); break;
    case RK_SELU: MAP_AB(selu_v4); break;
    case RK_HARD_SIGMOID: MAP_AB(hard_sigmoid_v4); break;
    case RK_HARD_SWISH: MAP_AB(hard_swish_v4); break;
    case RK_SWISH: MAP_AB(swish_v4); break;
    case RK_GELU: MAP_AB(gelu_v4); break;
    case RK_GELU_TANH: MAP_AB(gelu_tanh_v4); break;
    case RK_SOFTPLUS: MAP_AB(softplus_v4); break;
    case RK_SOFTSIGN: MAP_AB(softsign_v4); break;
    case RK_CLIP: MAP_AB(clip_v4); break;
    case RK_CELU: MAP_AB(celu_v4); break;
    case RK_THRESHOLDED_RELU: MAP_AB(thresholded_relu_v4); break;
    case RK_MISH: MAP_AB(mish_v4); break;
    default:
        break;
    }
}

typedef struct activation_call {
    const float *x;
    float *y;
    int function;
    float a, b;
} activation_call;

static void activation_range(void *ctx, int64_t begin, int64_t end)
{
    const activation_call *c = ctx;
    rk_activation_serial(c->x + begin, c->y + begin, end - begin, c->function, c->a, c->b);
}

static int is_cheap(int function)
{
    return function == RK_RELU || function == RK_BOUNDED_RELU || function == RK_LEAKY_RELU ||
           function == RK_HARD_SIGMOID || function == RK_HARD_SWISH || function == RK_SOFTSIGN ||
           function == RK_CLIP || function == RK_THRESHOLDED_RELU;
}

/*
 * rk_activation: y[i] = f(x[i]) for i < count. y may equal x. relu, bounded_relu, leaky_relu and
 * clip propagate NaN. The others are vectorized polynomial/exp/log/erf evaluations accurate to
 * a few ulp (about 1e-7 relative where erf is involved). Threads take parts in whole cache
 * lines, so that they never share one of y.
 */
int rk_activation(const float *x, float *y, int64_t count, int function, float a, float b)
{
    activation_call call = { x, y, function, a, b };
    rk_parallel_for(count, 16, 1.0, is_cheap(function) ? RK_COPY_MIN_PER_THREAD : RK_MATH_MIN_PER_THREAD,
                    activation_range, &call);
    return 0;
}
