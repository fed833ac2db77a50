/*
 * Softmax and LogSoftmax over any axis: along contiguous rows when the axis is the last, else
 * down columns, a strip of columns at a time so that their maxima and sums stay in registers
 * and L1.
 */
#include <math.h>

#include "kernels_internal.h"
#include "vec16.h"

/* Columns of one strip: their maxima and sums are two stack arrays of this many floats. */
#define STRIP 256

#if defined(RK_X86_AVX512)
/* softmax_row's Softmax 16 values at a time, with its bits: the maximum is exact in any order
   (a NaN enters it only from x[0], whose lanes then stay NaN, as in softmax_row), each
   exponential and quotient is computed as there (exp16_v4_bits), and the sum takes the
   exponentials in softmax_row's order: two 4-lane sums over steps of 8, then the rest one by
   one. */
__attribute__((target("avx512f")))
static void softmax_row16(const float *xr, float *yr, int64_t cols, float beta)
{
    const __m512 vb = _mm512_set1_ps(beta);
    int64_t i = 0;
    __m512 m = _mm512_set1_ps(beta * xr[0]);
    for (; i + 16 <= cols; i += 16)
        m = _mm512_max_ps(_mm512_mul_ps(vb, _mm512_loadu_ps(xr + i)), m);
    float lanes[16];
    _mm512_storeu_ps(lanes, m);
    float mx = lanes[0];
    for (int l = 1; l < 16; l++)
        mx = lanes[l] > mx ? lanes[l] : mx;
    for (; i < cols; i++) {
        float v = beta * xr[i];
        mx = v > mx ? v : mx;
    }

    const __m512 vm = _mm512_set1_ps(mx);
    __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps();
    for (i = 0; i + 16 <= cols; i += 16) {
        const __m512 e = exp16_v4_bits(_mm512_sub_ps(_mm512_mul_ps(vb, _mm512_loadu_ps(xr + i)), vm));
        _mm512_storeu_ps(yr + i, e);
        s0 = _mm_add_ps(s0, _mm512_castps512_ps128(e));
        s1 = _mm_add_ps(s1, _mm512_extractf32x4_ps(e, 1));
        s0 = _mm_add_ps(s0, _mm512_extractf32x4_ps(e, 2));
        s1 = _mm_add_ps(s1, _mm512_extractf32x4_ps(e, 3));
    }
    const int64_t rest = cols - i;              /* < 16: one step of 8 first if there is one */
    const __mmask16 live = (__mmask16)((1u << rest) - 1u);
    const __m512 e = exp16_v4_bits(_mm512_sub_ps(_mm512_mul_ps(vb, _mm512_maskz_loadu_ps(live, xr + i)), vm));
    _mm512_mask_storeu_ps(yr + i, live, e);
    if (rest >= 8) {
        s0 = _mm_add_ps(s0, _mm512_castps512_ps128(e));
        s1 = _mm_add_ps(s1, _mm512_extractf32x4_ps(e, 1));
    }
    _mm_storeu_ps(lanes, _mm_add_ps(s0, s1));
    float sum = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
    for (int64_t l = rest >= 8 ? 8 : 0; l < rest; l++)
        sum += yr[i + l];

    const __m512 vs = _mm512_set1_ps(1.0f / sum);
    for (i = 0; i + 16 <= cols; i += 16)
        _mm512_storeu_ps(yr + i, _mm512_mul_ps(_mm512_loadu_ps(yr + i), vs));
    const __mmask16 tail = (__mmask16)((1u << (cols - i)) - 1u);
    _mm512_mask_storeu_ps(yr + i, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, yr + i), vs));
}
#endif

/* One row of `cols` contiguous values: exp(beta*x - max), normalized, or its log. y may be x. */
static void softmax_row(const float *xr, float *yr, int64_t cols, float beta, int log)
{
#if defined(RK_X86_AVX512)
    if (!log && rk_use_avx512()) {
        softmax_row16(xr, yr, cols, beta);
        return;
    }
#endif
    const vf4 vb = vf4_splat(beta);
    int64_t i = 0;

    /* two accumulators per pass hide the add/select latency */
    vf4 m0 = vf4_splat(beta * xr[0]), m1 = m0;
    for (; i + 8 <= cols; i += 8) {
        m0 = vf4_max(vb * vf4_load(xr + i), m0);
        m1 = vf4_max(vb * vf4_load(xr + i + 4), m1);
    }
    float mx = vf4_hmax(vf4_max(m0, m1));
    for (; i < cols; i++) {
        float v = beta * xr[i];
        mx = v > mx ? v : mx;
    }

    /* the exponentials are kept (in y) only for Softmax: LogSoftmax needs just their sum */
    const vf4 vm = vf4_splat(mx);
    vf4 s0 = vf4_splat(0.0f), s1 = s0;
    for (i = 0; i + 8 <= cols; i += 8) {
        vf4 e0 = exp_v4(vb * vf4_load(xr + i) - vm);
        vf4 e1 = exp_v4(vb * vf4_load(xr + i + 4) - vm);
        if (!log) {
            vf4_store(yr + i, e0);
            vf4_store(yr + i + 4, e1);
        }
        s0 += e0;
        s1 += e1;
    }
    s0 += s1;
    float sum = (s0[0] + s0[2]) + (s0[1] + s0[3]);
    for (; i < cols; i += 4) {
        const int64_t len = min_i64(4, cols - i);
        float tmp[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
        memcpy(tmp, xr + i, (size_t)len * sizeof(float));
        vf4_store(tmp, exp_v4(vb * vf4_load(tmp) - vm));
        for (int64_t l = 0; l < len; l++)
            sum += tmp[l];
        if (!log)
            memcpy(yr + i, tmp, (size_t)len * sizeof(float));
    }

    if (log) {
        const float shift = mx + logf(sum);
        for (i = 0; i < cols; i++)
            yr[i] = beta * xr[i] - shift;
        return;
    }
    const float inverse = 1.0f / sum;
    const vf4 vs = vf4_splat(inverse);
    for (i = 0; i + 4 <= cols; i += 4)
        vf4_store(yr + i, vf4_load(yr + i) * vs);
    for (; i < cols; i++)
        yr[i] *= inverse;
}

/* exp(beta * x[j] - m[j]) for j < n into e (x, m and e of n floats). */
static void exp_shifted(const float *x, const float *m, float *e, int64_t n, float beta)
{
    const vf4 vb = vf4_splat(beta);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        vf4_store(e + j, exp_v4(vb * vf4_load(x + j) - vf4_load(m + j)));
    if (j < n) {
        float tx[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, tm[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
        memcpy(tx, x + j, (size_t)(n - j) * sizeof(float));
        memcpy(tm, m + j, (size_t)(n - j) * sizeof(float));
        vf4_store(tx, exp_v4(vb * vf4_load(tx) - vf4_load(tm)));
        memcpy(e + j, tx, (size_t)(n - j) * sizeof(float));
    }
}

/* Columns [j0, j0 + n) of one [extent, inner] block, n <= STRIP. y may be x. */
static void softmax_strip(const float *x, float *y, int64_t extent, int64_t inner, int64_t n,
                          float beta, int log)
{
    float m[STRIP], s[STRIP], e[STRIP];
    for (int64_t j = 0; j < n; j++) {
        m[j] = beta * x[j];
        s[j] = 0.0f;
    }
    for (int64_t k = 1; k < extent; k++)
        for (int64_t j = 0; j < n; j++) {
            float v = beta * x[k * inner + j];
            m[j] = v > m[j] ? v : m[j];
        }
    for (int64_t k = 0; k < extent; k++) {
        exp_shifted(x + k * inner, m, e, n, beta);
        for (int64_t j = 0; j < n; j++)
            s[j] += e[j];
        if (!log)
            memcpy(y + k * inner, e, (size_t)n * sizeof(float));
    }
    if (log) {
        for (int64_t j = 0; j < n; j++)
            m[j] += logf(s[j]);
        for (int64_t k = 0; k < extent; k++)
            for (int64_t j = 0; j < n; j++)
                y[k * inner + j] = beta * x[k * inner + j] - m[j];
        return;
    }
    for (int64_t j = 0; j < n; j++)
        s[j] = 1.0f / s[j];
    for (int64_t k = 0; k < extent; k++)
        for (int64_t j = 0; j < n; j++)
            y[k * inner + j] *= s[j];
}

typedef struct softmax_call {
    const float *x;
    float *y;
    rk_axis_split s;
    int64_t strips;                     /* per outer block */
    float beta;
    int log;
} softmax_call;

static void softmax_rows(void *ctx, int64_t first, int64_t last)
{
    const softmax_call *c = ctx;
    for (int64_t r = first; r < last; r++)
        softmax_row(c->x + r * c->s.extent, c->y + r * c->s.extent, c->s.extent, c->beta, c->log);
}

static void softmax_strips(void *ctx, int64_t first, int64_t last)
{
    const softmax_call *c = ctx;
    const int64_t block = c->s.extent * c->s.inner;
    for (int64_t u = first; u < last; u++) {
        int64_t o = u / c->strips, j0 = u % c->strips * STRIP;
        softmax_strip(c->x + o * block + j0, c->y + o * block + j0, c->s.extent, c->s.inner,
                      min_i64(STRIP, c->s.inner - j0), c->beta, c->log);
    }
}

/*
 * rk_softmax_axis: the maximum of beta*x is subtracted before exp (numerically stable for any
 * sign of beta); exp is the vectorized exp_v4 (about 3 ulp). No scratch.
 */
int rk_softmax_axis(const float *x, float *y, const rk_axis_split *s, float beta, int log)
{
    softmax_call c = { x, y, *s, ceil_div(s->inner, STRIP), beta, log != 0 };
    if (s->extent <= 0 || s->inner <= 0 || s->outer <= 0)
        return 0;
    if (s->inner == 1)
        rk_parallel_for(s->outer, 1, (double)s->extent, RK_MATH_MIN_PER_THREAD, softmax_rows, &c);
    else
        rk_parallel_for(s->outer * c.strips, 1, (double)s->extent * (double)min_i64(STRIP, s->inner),
                        RK_MATH_MIN_PER_THREAD, softmax_strips, &c);
    return 0;
}

/* rk_softmax: rows x cols, over the last axis. */
int rk_softmax(const float *x, float *y, int64_t rows, int64_t cols, float beta)
{
    rk_axis_split s = { rows, cols, 1 };
    return rk_softmax_axis(x, y, &s, beta, 0);
}
