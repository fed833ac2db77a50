/*
 * Reduce over any set of axes. The plan merges adjacent axes of the same kind, so the input is
 * at most 6 alternating groups of kept and reduced axes; the innermost group is a contiguous run
 * that is either reduced into one output (a horizontal reduction in independent partial sums) or
 * kept (added lane by lane into as many consecutive outputs). Sums accumulate in double.
 */
#include <math.h>

#include "kernels_internal.h"

enum { MEAN, SUM, MAX, MIN, PROD, L1, L2, SUM_SQUARE, LOG_SUM_EXP };

/* How each input element enters a sum. */
enum { PLAIN, ABSOLUTE, SQUARE, EXP_SHIFTED };

static inline double term(float v, int how, float shift)
{
    switch (how) {
    case ABSOLUTE: return fabs((double)v);
    case SQUARE: return (double)v * (double)v;
    case EXP_SHIFTED: return exp((double)v - (double)shift);
    default: return (double)v;
    }
}

/* The sum of terms of a contiguous run, in 8 independent partial sums. */
static double run_sum(const float *x, int64_t n, int how, float shift)
{
    double lane[8] = { 0 };
    int64_t i = 0;
    if (how == PLAIN)
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++)
                lane[l] += (double)x[i + l];
    else if (how == SQUARE)
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++)
                lane[l] += (double)x[i + l] * (double)x[i + l];
    double s = 0.0;
    for (; i < n; i++)
        s += term(x[i], how, shift);
    return s + ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

typedef struct walk {
    int groups;                         /* the outer groups, before the innermost */
    int64_t extent[6], in_stride[6], out_stride[6];
    int64_t run;                        /* the innermost group's extent */
    int inner_reduced;
} walk;

static void make_walk(const rk_reduce_plan *p, walk *w)
{
    int64_t in, out;
    w->groups = p->rank - 1;
    w->run = p->extent[p->rank - 1];
    w->inner_reduced = (int)(p->reduced >> (p->rank - 1)) & 1;
    in = w->run;
    out = w->inner_reduced ? 1 : w->run;
    for (int d = p->rank - 2; d >= 0; d--) {
        int reduced = (int)(p->reduced >> d) & 1;
        w->extent[d] = p->extent[d];
        w->in_stride[d] = in;
        w->out_stride[d] = reduced ? 0 : out;
        in *= p->extent[d];
        if (!reduced)
            out *= p->extent[d];
    }
}

/* Runs `body` for every innermost run with in_off and out_off its input and output offsets. */
#define FOR_EACH_RUN(w, in_off, out_off, body)                                  \
    do {                                                                        \
        int64_t idx_[6] = { 0 }, in_off = 0, out_off = 0, runs_ = 1;            \
        for (int d_ = 0; d_ < (w)->groups; d_++)                                \
            runs_ *= (w)->extent[d_];                                           \
        for (int64_t r_ = 0; r_ < runs_; r_++) {                                \
            body;                                                               \
            for (int d_ = (w)->groups - 1; d_ >= 0; d_--) {                     \
                in_off += (w)->in_stride[d_];                                   \
                out_off += (w)->out_stride[d_];                                 \
                if (++idx_[d_] < (w)->extent[d_])                               \
                    break;                                                      \
                in_off -= (w)->in_stride[d_] * (w)->extent[d_];                 \
                out_off -= (w)->out_stride[d_] * (w)->extent[d_];               \
                idx_[d_] = 0;                                                   \
            }                                                                   \
        }                                                                       \
    } while (0)

/* y = max (or min) of each output's elements. NaN propagates, as NumPy's. */
static void extreme(const float *x, float *y, const walk *w, int64_t outputs, int maximum)
{
    const int64_t n = w->run;
    for (int64_t o = 0; o < outputs; o++)
        y[o] = maximum ? -INFINITY : INFINITY;
    FOR_EACH_RUN(w, in, out, {
        const float *xr = x + in;
        if (w->inner_reduced) {
            float m = y[out];
            for (int64_t i = 0; i < n; i++)
                m = xr[i] != xr[i] || (maximum ? xr[i] > m : xr[i] < m) ? xr[i] : m;
            y[out] = m;
        } else {
            float *yr = y + out;
            for (int64_t i = 0; i < n; i++)
                yr[i] = xr[i] != xr[i] || (maximum ? xr[i] > yr[i] : xr[i] < yr[i]) ? xr[i] : yr[i];
        }
    });
}

/* ar[i] += (double)xr[i] for i < n: the same sums in the same order as the plain loop, eight
   lanes converted and added at a time (the plain loop is left to the baseline instruction set,
   which converts two at a time). */
#if defined(RK_X86_AVX512)
__attribute__((target("avx512f")))
static void add_to_doubles_avx512(const float *xr, double *ar, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(xr + i);
        _mm512_storeu_pd(ar + i, _mm512_add_pd(_mm512_loadu_pd(ar + i), _mm512_cvtps_pd(_mm512_castps512_ps256(v))));
        _mm512_storeu_pd(ar + i + 8, _mm512_add_pd(_mm512_loadu_pd(ar + i + 8),
                                                   _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))));
    }
    for (; i < n; i++)
        ar[i] += (double)xr[i];
}
#endif

static void add_to_doubles(const float *xr, double *ar, int64_t n)
{
#if defined(RK_X86_AVX512)
    if (rk_use_avx512()) {
        add_to_doubles_avx512(xr, ar, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        ar[i] += (double)xr[i];
}

/*
 * Column sums: the sum over rows of each column of a rows x n matrix, in double: the global
 * pooling of a channels-last image, whose rows are its pixels and columns its channels. The
 * rows are cut into COLUMN_PARTS runs that are fixed by the row count alone; each run's sums
 * are added in row order, and the runs' as (s0 + s1) + (s2 + s3). So the bits are the same
 * whichever threads take which runs (and blocks of columns), and each thread reads whole
 * consecutive rows, which the caches fetch ahead best.
 */
enum { COLUMN_PARTS = 4, COLUMN_BLOCK = 128 };

/* part[c - c0] = the sum over rows [r0, r1) of column c, for c in [c0, c1). */
#if defined(RK_X86_AVX512)
__attribute__((target("avx512f")))
static inline __m512d lo_pd(__m512 v)
{
    return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}

__attribute__((target("avx512f")))
static inline __m512d hi_pd(__m512 v)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* G groups of 16 columns from c, summed over rows [r0, r1) in 2 G registers of doubles. */
__attribute__((target("avx512f"), always_inline))
static inline void run_sums_groups(const float *x, int64_t n, int64_t r0, int64_t r1, int64_t c, const int G,
                                   double *part)
{
    __m512d s[16];
    for (int j = 0; j < 2 * G; j++)
        s[j] = _mm512_setzero_pd();
    const float *xr = x + r0 * n + c;
    for (int64_t r = r0; r < r1; r++, xr += n)
        for (int g = 0; g < G; g++) {
            const __m512 v = _mm512_loadu_ps(xr + 16 * g);
            s[2 * g] = _mm512_add_pd(s[2 * g], lo_pd(v));
            s[2 * g + 1] = _mm512_add_pd(s[2 * g + 1], hi_pd(v));
        }
    for (int j = 0; j < 2 * G; j++)
        _mm512_storeu_pd(part + 8 * j, s[j]);
}

__attribute__((target("avx512f")))
static void run_sums_avx512(const float *x, int64_t n, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            double *part)
{
    int64_t c = c0;
    for (; c + 128 <= c1; c += 128)
        run_sums_groups(x, n, r0, r1, c, 8, part + (c - c0));
    if (c + 64 <= c1) {
        run_sums_groups(x, n, r0, r1, c, 4, part + (c - c0));
        c += 64;
    }
    if (c + 32 <= c1) {
        run_sums_groups(x, n, r0, r1, c, 2, part + (c - c0));
        c += 32;
    }
    if (c + 16 <= c1) {
        run_sums_groups(x, n, r0, r1, c, 1, part + (c - c0));
        c += 16;
    }
    if (c < c1) {
        const __mmask16 m = (__mmask16)((1u << (c1 - c)) - 1u);
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        const float *xr = x + r0 * n + c;
        for (int64_t r = r0; r < r1; r++, xr += n) {
            const __m512 v = _mm512_maskz_loadu_ps(m, xr);
            s0 = _mm512_add_pd(s0, lo_pd(v));
            s1 = _mm512_add_pd(s1, hi_pd(v));
        }
        _mm512_mask_storeu_pd(part + (c - c0), (__mmask8)m, s0);
        _mm512_mask_storeu_pd(part + (c - c0) + 8, (__mmask8)(m >> 8), s1);
    }
}
#endif

static void run_sums(const float *x, int64_t n, int64_t r0, int64_t r1, int64_t c0, int64_t c1, double *part)
{
#if defined(RK_X86_AVX512)
    if (rk_use_avx512()) {
        run_sums_avx512(x, n, r0, r1, c0, c1, part);
        return;
    }
#endif
    for (int64_t c = c0; c < c1; c++)
        part[c - c0] = 0.0;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++)
            part[c - c0] += (double)x[r * n + c];
}

typedef struct column_call {
    const float *x;
    double *parts;                      /* COLUMN_PARTS x n */
    int64_t rows, n, blocks;            /* blocks of COLUMN_BLOCK columns */
} column_call;

/* Units [u0, u1): unit u is run u / blocks, block u % blocks. */
static void column_sums_range(void *ctx, int64_t u0, int64_t u1)
{
    const column_call *t = ctx;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t q = u / t->blocks, c0 = u % t->blocks * COLUMN_BLOCK;
        const int64_t c1 = min_i64(c0 + COLUMN_BLOCK, t->n);
        run_sums(t->x, t->n, t->rows * q / COLUMN_PARTS, t->rows * (q + 1) / COLUMN_PARTS, c0, c1,
                 t->parts + q * t->n + c0);
    }
}

/* acc[c] for c < n: the column sums of x (rows x n). 1 if scratch allocation failed. */
static int column_sums(const float *x, int64_t rows, int64_t n, double *acc)
{
    double *parts = malloc((size_t)(COLUMN_PARTS * n) * sizeof *parts);
    if (parts == NULL)
        return 1;
    column_call call = { x, parts, rows, n, ceil_div(n, COLUMN_BLOCK) };
    /* two conversions and additions an element: more than a copy's work */
    rk_parallel_for(COLUMN_PARTS * call.blocks, 1, (double)rows * (double)n / (double)(COLUMN_PARTS * call.blocks),
                    RK_MATH_MIN_PER_THREAD, column_sums_range, &call);
    for (int64_t c = 0; c < n; c++)
        acc[c] = (parts[c] + parts[n + c]) + (parts[2 * n + c] + parts[3 * n + c]);
    free(parts);
    return 0;
}

/* acc = the sum of terms (or the product) of each output's elements; shift per output. */
static void accumulate(const float *x, double *acc, const walk *w, int64_t outputs, int how,
                       int product, const float *shift)
{
    const int64_t n = w->run;
    if (!product && how == PLAIN && !w->inner_reduced && w->groups == 1 && w->out_stride[0] == 0 &&
        column_sums(x, w->extent[0], n, acc) == 0)
        return;                         /* one reduced group over one kept run */
    for (int64_t o = 0; o < outputs; o++)
        acc[o] = product ? 1.0 : 0.0;
    FOR_EACH_RUN(w, in, out, {
        const float *xr = x + in;
        if (w->inner_reduced) {
            if (product)
                for (int64_t i = 0; i < n; i++)
                    acc[out] *= (double)xr[i];
            else
                acc[out] += run_sum(xr, n, how, shift ? shift[out] : 0.0f);
        } else {
            double *ar = acc + out;
            if (product)
                for (int64_t i = 0; i < n; i++)
                    ar[i] *= (double)xr[i];
            else if (how == PLAIN)
                add_to_doubles(xr, ar, n);
            else
                for (int64_t i = 0; i < n; i++)
                    ar[i] += term(xr[i], how, shift ? shift[out + i] : 0.0f);
        }
    });
}

int rk_reduce(const float *x, float *y, const rk_reduce_plan *p)
{
    walk w;
    int64_t outputs = 1;
    make_walk(p, &w);
    for (int d = 0; d < p->rank; d++)
        if (!((p->reduced >> d) & 1))
            outputs *= p->extent[d];
    if (p->function == MAX || p->function == MIN) {
        extreme(x, y, &w, outputs, p->function == MAX);
        return 0;
    }
    double *acc = malloc((size_t)outputs * sizeof *acc);
    if (acc == NULL)
        return 1;
    if (p->function == LOG_SUM_EXP) {
        /* shifted by each output's maximum (0 where that is not finite, as the reference) */
        extreme(x, y, &w, outputs, 1);
        for (int64_t o = 0; o < outputs; o++)
            y[o] = isfinite(y[o]) ? y[o] : 0.0f;
        accumulate(x, acc, &w, outputs, EXP_SHIFTED, 0, y);
        for (int64_t o = 0; o < outputs; o++)
            y[o] = (float)(log(acc[o]) + (double)y[o]);
        free(acc);
        return 0;
    }
    int how = p->function == L1 ? ABSOLUTE : p->function == L2 || p->function == SUM_SQUARE ? SQUARE : PLAIN;
    accumulate(x, acc, &w, outputs, how, p->function == PROD, NULL);
    for (int64_t o = 0; o < outputs; o++) {
        double v = acc[o];
        if (p->function == MEAN)
            v /= (double)p->count;
        else if (p->function == L2)
            v = sqrt(v);
        y[o] = (float)v;
    }
    free(acc);
    return 0;
}
