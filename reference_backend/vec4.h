/*
 * The reference backend's 4-lane vectors and the math built on them (exp, log, sigmoid, tanh,
 * erf, ...): the portable arithmetic every kernel's results follow. vec16.h repeats some of it
 * on 16 lanes with the same bits. Included by kernels_internal.h.
 */
#ifndef RK_VEC4_H
#define RK_VEC4_H

#include <stdint.h>
#include <string.h>

/*
 * 4-lane vectors (GCC vector extensions: SSE2 on x86_64, NEON on arm64,
 * scalarized elsewhere). Used where the auto-vectorizer cannot be relied on:
 * without -ffast-math it refuses loops in which a select feeds floating-point
 * arithmetic (it turns the select into a branch and will not speculate
 * possibly-trapping operations), and it keeps accumulator arrays in memory.
 */
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef uint32_t vu4 __attribute__((vector_size(16)));

static inline vf4 vf4_load(const float *p)
{
    vf4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vf4_store(float *p, vf4 v) { memcpy(p, &v, sizeof v); }
static inline vf4 vf4_splat(float s) { return (vf4){ s, s, s, s }; }
/* lanes of a where m is all-ones, else b */
static inline vf4 vf4_select(vi4 m, vf4 a, vf4 b) { return (vf4)((m & (vi4)a) | (~m & (vi4)b)); }
/* max(a, b) = a > b ? a : b per lane; a NaN in b passes through, a NaN in a
   does not (used that way to clamp while keeping NaN). The x86 form is one
   instruction; the bitwise select above costs four and the per-lane loop is
   not reliably vectorized once inlined into a bigger loop. */
#if defined(__SSE__) && !defined(RK_NO_X86_SIMD)
#include <xmmintrin.h>
static inline vf4 vf4_max(vf4 a, vf4 b) { return (vf4)_mm_max_ps((__m128)a, (__m128)b); }
static inline vf4 vf4_min(vf4 a, vf4 b) { return (vf4)_mm_min_ps((__m128)a, (__m128)b); }
#else
static inline vf4 vf4_max(vf4 a, vf4 b)
{
    vf4 r;
    for (int l = 0; l < 4; l++)
        r[l] = a[l] > b[l] ? a[l] : b[l];
    return r;
}
static inline vf4 vf4_min(vf4 a, vf4 b)
{
    vf4 r;
    for (int l = 0; l < 4; l++)
        r[l] = a[l] < b[l] ? a[l] : b[l];
    return r;
}
#endif
static inline float vf4_hmax(vf4 v)
{
    float m = v[0];
    for (int l = 1; l < 4; l++)
        m = v[l] > m ? v[l] : m;
    return m;
}

/*
 * exp(x) = 2^n * e^r with n = round(x / ln2), |r| <= ln2/2, e^r by a degree-7
 * Taylor polynomial (truncation error < 1e-8 relative). 2^n is applied as two
 * factors so results in the subnormal range are still produced correctly.
 * Max error about 3 ulp; NaN propagates, overflow gives +inf, underflow 0.
 */
static inline vf4 exp_v4(vf4 x)
{
    const vf4 magic = vf4_splat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    /* unsigned lanes: the exponent arithmetic wraps (defined) for NaN input */
    const vu4 magic_bits = (vu4){ 0x4B400000u, 0x4B400000u, 0x4B400000u, 0x4B400000u };
    const vu4 bias = (vu4){ 127u, 127u, 127u, 127u };
    /* clamp so n stays in [-150, 128]; beyond that the result is 0 or inf
       anyway (x is the second operand, so a NaN passes through) */
    x = vf4_max(vf4_splat(-104.0f), x);
    x = vf4_min(vf4_splat(89.0f), x);
    vf4 n = (x * vf4_splat(1.44269504088896341f) + magic) - magic;
    vf4 r = x - n * vf4_splat(0.693145751953125f); /* ln2 high part: exact product for |n| < 2^9 */
    r = r - n * vf4_splat(1.428606765330187e-06f);  /* ln2 low part */
    vf4 p = vf4_splat(1.0f / 5040.0f);
    p = p * r + vf4_splat(1.0f / 720.0f);
    p = p * r + vf4_splat(1.0f / 120.0f);
    p = p * r + vf4_splat(1.0f / 24.0f);
    p = p * r + vf4_splat(1.0f / 6.0f);
    p = p * r + vf4_splat(0.5f);
    p = p * r + vf4_splat(1.0f);
    p = p * r + vf4_splat(1.0f);
    /* n = h + (n - h) with both halves in [-75, 64], so each 2^k is a normal
       float built directly in the exponent field */
    vf4 th = n * vf4_splat(0.5f) + magic;
    vf4 t2 = (n - (th - magic)) + magic;
    vf4 s1 = (vf4)((((vu4)th - magic_bits) + bias) << 23);
    vf4 s2 = (vf4)((((vu4)t2 - magic_bits) + bias) << 23);
    return (p * s1) * s2;
}

/* e^x - 1 without the cancellation near 0: |x| < 0.5 by its Taylor series through x^8 (next
   term < 1e-8 relative), exp_v4(x) - 1 beyond (where it costs at most 2 ulp). */
static inline vf4 expm1_v4(vf4 x)
{
    vf4 x2 = x * x;
    vf4 low = (vf4_splat(1.0f) + x * vf4_splat(1.0f / 2.0f)) +
              x2 * (vf4_splat(1.0f / 6.0f) + x * vf4_splat(1.0f / 24.0f));
    vf4 high = (vf4_splat(1.0f / 120.0f) + x * vf4_splat(1.0f / 720.0f)) +
               x2 * (vf4_splat(1.0f / 5040.0f) + x * vf4_splat(1.0f / 40320.0f));
    vf4 small = x * (low + (x2 * x2) * high);
    vf4 ax = (vf4)((vi4)x & (vi4){ INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX });
    return vf4_select(ax < vf4_splat(0.5f), small, exp_v4(x) - vf4_splat(1.0f));
}

static inline vf4 sigmoid_v4(vf4 x)
{
    /* e = e^-|x| <= 1: nothing overflows or cancels, and for x << 0 the
       result e/(1+e) keeps its subnormal values instead of 1/inf = 0 */
    const vi4 sign = (vi4){ INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN };
    vf4 e = exp_v4((vf4)((vi4)x | sign));
    vf4 r = vf4_splat(1.0f) / (vf4_splat(1.0f) + e);
    return vf4_select(x < vf4_splat(0.0f), e * r, r);
}

static inline vf4 tanh_v4(vf4 x)
{
    /* |x| >= 0.25: tanh|x| = (1 - e) / (1 + e), e = e^-2|x| <= 1, where the
       cancellation in 1 - e costs at most a factor 2 in relative error.
       |x| < 0.25: odd Taylor series through x^11 (next term < 3e-10 relative). */
    const vi4 sign = (vi4){ INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN };
    vf4 ax = (vf4)((vi4)x & ~sign);
    vf4 e = exp_v4(vf4_splat(-2.0f) * ax);
    vf4 big = (vf4_splat(1.0f) - e) / (vf4_splat(1.0f) + e);
    vf4 x2 = x * x;
    vf4 p = vf4_splat(-1382.0f / 155925.0f);
    p = p * x2 + vf4_splat(62.0f / 2835.0f);
    p = p * x2 + vf4_splat(-17.0f / 315.0f);
    p = p * x2 + vf4_splat(2.0f / 15.0f);
    p = p * x2 + vf4_splat(-1.0f / 3.0f);
    vf4 small = x + x * x2 * p;
    /* big is |tanh|; OR-ing in the sign of x also keeps tanh(-0) = -0 */
    return (vf4)((vi4)vf4_select(ax < vf4_splat(0.25f), small, big) | ((vi4)x & sign));
}

static inline vf4 vf4_abs(vf4 x)
{
    return (vf4)((vi4)x & (vi4){ INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX });
}

/* The sign bit of x on y. */
static inline vf4 vf4_or_sign(vf4 y, vf4 x)
{
    return (vf4)((vi4)y | ((vi4)x & (vi4){ INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN }));
}

#if defined(__SSE__) && !defined(RK_NO_X86_SIMD)
static inline vf4 vf4_sqrt(vf4 x) { return (vf4)_mm_sqrt_ps((__m128)x); }
#else
static inline vf4 vf4_sqrt(vf4 x)
{
    vf4 r;
    for (int l = 0; l < 4; l++)
        r[l] = __builtin_sqrtf(x[l]);
    return r;
}
#endif

/*
 * Round to nearest, ties to even (the default rounding mode does it: adding 1.5 * 2^23 leaves no
 * fraction bits). |x| >= 2^23, infinities and NaN are already integral and pass through; the
 * sign of x is kept on a zero result (round(-0.3) = -0).
 */
static inline vf4 round_even_v4(vf4 x)
{
    const vf4 magic = vf4_splat(12582912.0f);
    vf4 ax = vf4_abs(x);
    vf4 r = vf4_or_sign((ax + magic) - magic, x);
    return vf4_select(ax < vf4_splat(8388608.0f), r, x);
}

/*
 * log(x) = e * ln2 + log(m), m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s) with s = (m-1)/(m+1),
 * |s| <= 0.1716, by its odd series through s^13 (next term < 1e-11 relative). Subnormal inputs
 * are scaled by 2^24 first. log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays NaN.
 */
static inline vf4 log_v4(vf4 x)
{
    const vi4 tiny = (vi4)(x < vf4_splat(1.17549435e-38f));
    vf4 xs = vf4_select(tiny, x * vf4_splat(16777216.0f), x);
    vi4 bits = (vi4)xs;
    /* exponent relative to m in [sqrt(1/2), sqrt(2)): subtract the bits of sqrt(1/2) */
    vi4 e = ((bits - (vi4){ 0x3f3504f3, 0x3f3504f3, 0x3f3504f3, 0x3f3504f3 }) >> 23);
    vf4 m = (vf4)(bits - (e << 23));
    vf4 ef = __builtin_convertvector(e, vf4) - vf4_select(tiny, vf4_splat(24.0f), vf4_splat(0.0f));
    vf4 s = (m - vf4_splat(1.0f)) / (m + vf4_splat(1.0f));
    vf4 s2 = s * s;
    vf4 p = vf4_splat(2.0f / 13.0f);
    p = p * s2 + vf4_splat(2.0f / 11.0f);
    p = p * s2 + vf4_splat(2.0f / 9.0f);
    p = p * s2 + vf4_splat(2.0f / 7.0f);
    p = p * s2 + vf4_splat(2.0f / 5.0f);
    p = p * s2 + vf4_splat(2.0f / 3.0f);
    vf4 logm = s * vf4_splat(2.0f) + s * s2 * p;
    vf4 r = ef * vf4_splat(0.693145751953125f) + (logm + ef * vf4_splat(1.428606765330187e-06f));
    r = vf4_select(x == vf4_splat(0.0f), vf4_splat(-__builtin_inff()), r);
    r = vf4_select(x < vf4_splat(0.0f), vf4_splat(__builtin_nanf("")), r);
    r = vf4_select(x == vf4_splat(__builtin_inff()), x, r);
    return vf4_select(x != x, x, r);
}

/* log(1 + u) for u in [0, 1] = 2 atanh(s), s = u / (2 + u) <= 1/3: its odd series through s^15
   (next term < 2e-9 relative), with no cancellation however small u is. */
static inline vf4 log1p_unit_v4(vf4 u)
{
    vf4 s = u / (vf4_splat(2.0f) + u);
    vf4 v = s * s, v2 = v * v;
    vf4 low = (vf4_splat(1.0f) + v * vf4_splat(1.0f / 3.0f)) +
              v2 * (vf4_splat(1.0f / 5.0f) + v * vf4_splat(1.0f / 7.0f));
    vf4 high = (vf4_splat(1.0f / 9.0f) + v * vf4_splat(1.0f / 11.0f)) +
               v2 * (vf4_splat(1.0f / 13.0f) + v * vf4_splat(1.0f / 15.0f));
    return vf4_splat(2.0f) * s * (low + (v2 * v2) * high);
}

/* erfc(z) for z >= 0 with relative error below 1.2e-7 everywhere (the Chebyshev fit of
   Numerical Recipes' erfcc), so that 1 - erf and the tails of gelu keep their precision. */
static inline vf4 erfc_nonneg_v4(vf4 z)
{
    vf4 t = vf4_splat(1.0f) / (vf4_splat(1.0f) + vf4_splat(0.5f) * z);
    vf4 t2 = t * t, t4 = t2 * t2;
    /* Estrin's scheme: a quarter of Horner's dependent steps, the latency that bounds this */
    vf4 p = (vf4_splat(-1.26551223f) + t * vf4_splat(1.00002368f)) +
            t2 * (vf4_splat(0.37409196f) + t * vf4_splat(0.09678418f));
    vf4 q = (vf4_splat(-0.18628806f) + t * vf4_splat(0.27886807f)) +
            t2 * (vf4_splat(-1.13520398f) + t * vf4_splat(1.48851587f));
    p = p + t4 * q + (t4 * t4) * (vf4_splat(-0.82215223f) + t * vf4_splat(0.17087277f));
    return t * exp_v4(p - z * z);
}

/* erf(x): odd series for |x| < 0.5 (relative error < 1e-8 there), 1 - erfc beyond. */
static inline vf4 erf_v4(vf4 x)
{
    vf4 ax = vf4_abs(x);
    vf4 x2 = x * x;
    vf4 p = vf4_splat(-1.0f / 1320.0f);
    p = p * x2 + vf4_splat(1.0f / 216.0f);
    p = p * x2 + vf4_splat(-1.0f / 42.0f);
    p = p * x2 + vf4_splat(1.0f / 10.0f);
    p = p * x2 + vf4_splat(-1.0f / 3.0f);
    vf4 small = (x + x * x2 * p) * vf4_splat(1.12837916709551257f);
    vf4 big = vf4_or_sign(vf4_splat(1.0f) - erfc_nonneg_v4(ax), x);
    return vf4_select(ax < vf4_splat(0.5f), small, big);
}

/* Applies a vf4 function to count floats, the tail through a padded buffer. */
#define RK_MAP_V4(fn, x, y, count)                                          \
    do {                                                                    \
        int64_t i_ = 0;                                                     \
        for (; i_ + 4 <= (count); i_ += 4)                                  \
            vf4_store((y) + i_, fn(vf4_load((x) + i_)));                    \
        if (i_ < (count)) {                                                 \
            float tmp_[4] = { 0.0f, 0.0f, 0.0f, 0.0f };                     \
            memcpy(tmp_, (x) + i_, (size_t)((count) - i_) * sizeof(float)); \
            vf4_store(tmp_, fn(vf4_load(tmp_)));                            \
            memcpy((y) + i_, tmp_, (size_t)((count) - i_) * sizeof(float)); \
        }                                                                   \
    } while (0)

#endif
