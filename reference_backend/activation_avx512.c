/*
 * Activation functions 16 lanes at a time (AVX-512F), with an optional residual added first:
 * the epilogue of every fused convolution and GEMM runs here, a tile row at a time, so the
 * per-call cost must stay at a few instructions (no thread decisions, no function pointers).
 * The formulas, clamps and NaN handling are those of the 4-lane code (activation.c and
 * vec4.h), step for step and without contracting products into FMAs, so a result
 * does not depend on which of the two paths or which lane computed it; except the sigmoid (and
 * the swish built on it), whose exponential and reciprocal here use fused multiply-adds and
 * vrcp14ps: a third of the instructions and no division (see sigmoid16). The GELU (both
 * forms) keeps the 4-lane code's exponential, fit and division (exp16_v4_bits, gelu16): a
 * transformer's GELU is a tenth of its time, and its bits do not change with the CPU.
 */
#include "kernels_internal.h"
#include "vec16.h"

#if defined(RK_X86_AVX512)

#define RK_AVX512 __attribute__((target("avx512f"), always_inline)) static inline

RK_AVX512 __m512 splat16(float s) { return _mm512_set1_ps(s); }

/* e^t for t <= 0 (NaN kept): n = round(t log2 e), r = t - n ln 2 in two parts (|r| <= ln 2 / 2),
   e^r by its Taylor polynomial to degree 7 (Horner, fused multiply-adds), times 2^n by
   vscalefps, which rounds once into the subnormals (t below -104 gives 0). */
RK_AVX512 __m512 exp_neg16(__m512 t)
{
    t = _mm512_max_ps(splat16(-104.0f), t);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, splat16(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, splat16(0.693145751953125f), t);
    r = _mm512_fnmadd_ps(n, splat16(1.428606765330187e-06f), r);
    __m512 p = splat16(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, splat16(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, splat16(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, splat16(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, splat16(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, splat16(0.5f));
    p = _mm512_fmadd_ps(p, r, splat16(1.0f));
    p = _mm512_fmadd_ps(p, r, splat16(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* sigmoid on 16 lanes: e = e^-|x|, then 1/(1+e) or e/(1+e), the reciprocal of 1 + e (in [1, 2])
   from vrcp14ps and one Newton step. Unlike the other functions here this is not the 4-lane
   code's arithmetic step for step (fused multiply-adds, no division): it agrees with it to a few
   units in the last place, and with the float64 reference as closely (tests/test_reference_simd.py). */
RK_AVX512 __m512 sigmoid16(__m512 x)
{
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    const __m512 e = exp_neg16(_mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(x), sign)));
    const __m512 d = _mm512_add_ps(splat16(1.0f), e);
    const __m512 r0 = _mm512_rcp14_ps(d);
    const __m512 r = _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(d, r0, splat16(1.0f)), r0);
    __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_mul_ps(r, negative, e, r);
}

/* gelu_v4 (activation.c) on 16 lanes, through erfc_nonneg_v4's fit, division included: the
   same bits. */
RK_AVX512 __m512 gelu16(__m512 x)
{
    const __m512 one = splat16(1.0f);
    const __m512 z = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_epi32(_mm512_castps_si512(x),
                                                                        _mm512_set1_epi32(INT32_MAX))),
                                   splat16(0.70710678118654752f));
    const __m512 t = _mm512_div_ps(one, _mm512_add_ps(one, _mm512_mul_ps(splat16(0.5f), z)));
    const __m512 t2 = _mm512_mul_ps(t, t), t4 = _mm512_mul_ps(t2, t2);
#define RK_LIN(c0, c1) _mm512_add_ps(splat16(c0), _mm512_mul_ps(t, splat16(c1)))
    __m512 p = _mm512_add_ps(RK_LIN(-1.26551223f, 1.00002368f), _mm512_mul_ps(t2, RK_LIN(0.37409196f, 0.09678418f)));
    const __m512 q = _mm512_add_ps(RK_LIN(-0.18628806f, 0.27886807f), _mm512_mul_ps(t2, RK_LIN(-1.13520398f, 1.48851587f)));
    p = _mm512_add_ps(_mm512_add_ps(p, _mm512_mul_ps(t4, q)),
                      _mm512_mul_ps(_mm512_mul_ps(t4, t4), RK_LIN(-0.82215223f, 0.17087277f)));
#undef RK_LIN
    const __m512 e = _mm512_mul_ps(t, exp16_v4_bits(_mm512_sub_ps(p, _mm512_mul_ps(z, z))));
    const __mmask16 nonneg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
    return _mm512_mul_ps(_mm512_mul_ps(splat16(0.5f), x), _mm512_mask_sub_ps(e, nonneg, splat16(2.0f), e));
}

/* gelu_tanh_v4 (activation.c) on 16 lanes, its sigmoid that of sigmoid_v4 with the division:
   the same bits. */
RK_AVX512 __m512 gelu_tanh16(__m512 x)
{
    const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(splat16(0.044715f), x), x), x);
    const __m512 u2 = _mm512_mul_ps(splat16(2.0f), _mm512_mul_ps(splat16(0.79788456080286536f), _mm512_add_ps(x, cube)));
    const __m512 e = exp16_v4_bits(_mm512_castsi512_ps(_mm512_or_epi32(_mm512_castps_si512(u2),
                                                                       _mm512_set1_epi32(INT32_MIN))));
    const __m512 r = _mm512_div_ps(splat16(1.0f), _mm512_add_ps(splat16(1.0f), e));
    const __mmask16 negative = _mm512_cmp_ps_mask(u2, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mul_ps(x, _mm512_mask_mul_ps(r, negative, e, r));
}

RK_AVX512 __m512 act16(__m512 x, int function, __m512 a, __m512 b)
{
    const __m512 zero = _mm512_setzero_ps();
    switch (function) {
    case RK_RELU:
        return _mm512_max_ps(zero, x);           /* x < 0 ? 0 : x, NaN kept */
    case RK_BOUNDED_RELU:
        return _mm512_min_ps(a, _mm512_max_ps(b, x));
    case RK_CLIP:
        return _mm512_min_ps(b, _mm512_max_ps(a, x));
    case RK_LEAKY_RELU:
        return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_NGT_UQ), x, a);
    case RK_HARD_SIGMOID:
        return _mm512_max_ps(zero, _mm512_min_ps(splat16(1.0f), _mm512_add_ps(_mm512_mul_ps(a, x), b)));
    case RK_HARD_SWISH:
        return _mm512_mul_ps(
            _mm512_mul_ps(x, _mm512_max_ps(zero, _mm512_min_ps(splat16(6.0f), _mm512_add_ps(x, splat16(3.0f))))),
            splat16(1.0f / 6.0f));
    case RK_SIGMOID:
        return sigmoid16(x);
    case RK_SWISH:
        return _mm512_mul_ps(x, sigmoid16(_mm512_mul_ps(a, x)));
    case RK_GELU:
        return gelu16(x);
    case RK_GELU_TANH:
        return gelu_tanh16(x);
    default:
        return x;                                /* -1: none */
    }
}

/* The loop with `function` a constant, so each instantiation keeps only its own arithmetic. */
RK_AVX512 void act16_loop(const float *x, const float *residual, float *y, int64_t n, int function,
                          float a, float b)
{
    const __m512 va = splat16(a), vb = splat16(b);
    int64_t i = 0;
    if (residual != NULL) {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(y + i, act16(_mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(residual + i)),
                                          function, va, vb));
    } else {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(y + i, act16(_mm512_loadu_ps(x + i), function, va, vb));
    }
    if (i < n) {
        /* masked lanes load zeros and are never stored */
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        if (residual != NULL)
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, residual + i));
        _mm512_mask_storeu_ps(y + i, m, act16(v, function, va, vb));
    }
}

/* act16_loop in place over rows of a block (row strides ldc, and ldr in the residual). */
RK_AVX512 void act16_rows(float *c, int64_t ldc, const float *residual, int64_t ldr, int64_t rows, int64_t n,
                          int function, float a, float b)
{
    for (int64_t i = 0; i < rows; i++)
        act16_loop(c + i * ldc, residual != NULL ? residual + i * ldr : NULL, c + i * ldc, n, function, a, b);
}

int rk_act16_covers(int function)
{
    return function < 0 || function == RK_RELU || function == RK_BOUNDED_RELU || function == RK_CLIP ||
           function == RK_LEAKY_RELU || function == RK_HARD_SIGMOID || function == RK_HARD_SWISH ||
           function == RK_SIGMOID || function == RK_SWISH || function == RK_GELU || function == RK_GELU_TANH;
}

__attribute__((target("avx512f")))
void rk_act16(const float *x, const float *residual, float *y, int64_t n, int function, float a, float b)
{
    switch (function) {
    case RK_RELU: act16_loop(x, residual, y, n, RK_RELU, a, b); break;
    case RK_BOUNDED_RELU: act16_loop(x, residual, y, n, RK_BOUNDED_RELU, a, b); break;
    case RK_CLIP: act16_loop(x, residual, y, n, RK_CLIP, a, b); break;
    case RK_LEAKY_RELU: act16_loop(x, residual, y, n, RK_LEAKY_RELU, a, b); break;
    case RK_HARD_SIGMOID: act16_loop(x, residual, y, n, RK_HARD_SIGMOID, a, b); break;
    case RK_HARD_SWISH: act16_loop(x, residual, y, n, RK_HARD_SWISH, a, b); break;
    case RK_SIGMOID: act16_loop(x, residual, y, n, RK_SIGMOID, a, b); break;
    case RK_SWISH: act16_loop(x, residual, y, n, RK_SWISH, a, b); break;
    case RK_GELU: act16_loop(x, residual, y, n, RK_GELU, a, b); break;
    case RK_GELU_TANH: act16_loop(x, residual, y, n, RK_GELU_TANH, a, b); break;
    default: act16_loop(x, residual, y, n, -1, a, b); break;
    }
}

__attribute__((target("avx512f")))
void rk_act16_rows(float *c, int64_t ldc, const float *residual, int64_t ldr, int64_t rows, int64_t n,
                   int function, float a, float b)
{
    switch (function) {
    case RK_RELU: act16_rows(c, ldc, residual, ldr, rows, n, RK_RELU, a, b); break;
    case RK_BOUNDED_RELU: act16_rows(c, ldc, residual, ldr, rows, n, RK_BOUNDED_RELU, a, b); break;
    case RK_CLIP: act16_rows(c, ldc, residual, ldr, rows, n, RK_CLIP, a, b); break;
    case RK_LEAKY_RELU: act16_rows(c, ldc, residual, ldr, rows, n, RK_LEAKY_RELU, a, b); break;
    case RK_HARD_SIGMOID: act16_rows(c, ldc, residual, ldr, rows, n, RK_HARD_SIGMOID, a, b); break;
    case RK_HARD_SWISH: act16_rows(c, ldc, residual, ldr, rows, n, RK_HARD_SWISH, a, b); break;
    case RK_SIGMOID: act16_rows(c, ldc, residual, ldr, rows, n, RK_SIGMOID, a, b); break;
    case RK_SWISH: act16_rows(c, ldc, residual, ldr, rows, n, RK_SWISH, a, b); break;
    case RK_GELU: act16_rows(c, ldc, residual, ldr, rows, n, RK_GELU, a, b); break;
    case RK_GELU_TANH: act16_rows(c, ldc, residual, ldr, rows, n, RK_GELU_TANH, a, b); break;
    default: act16_rows(c, ldc, residual, ldr, rows, n, -1, a, b); break;
    }
}

#else

void rk_act16_rows(float *c, int64_t ldc, const float *residual, int64_t ldr, int64_t rows, int64_t n,
                   int function, float a, float b)
{
    (void)c, (void)ldc, (void)residual, (void)ldr, (void)rows, (void)n, (void)function, (void)a, (void)b;
}

int rk_act16_covers(int function)
{
    (void)function;
    return 0;
}

void rk_act16(const float *x, const float *residual, float *y, int64_t n, int function, float a, float b)
{
    (void)x, (void)residual, (void)y, (void)n, (void)function, (void)a, (void)b;
}

#endif
