/*
 * Grouped Convolution2d (Backend API 1.3): the input channels C and the outputs O split into
 * `groups` equal groups, output channel j reads only the Cg = C / groups input channels of
 * group j / (O / groups). One group is the GEMM convolution and C groups the depthwise kernel.
 * In between (ResNeXt's 32 groups of 4 to 32 channels) each group alone is a GEMM far too
 * small for its packing to pay, so a direct kernel computes 16 output channels at a time with
 * every multiply-add a full-width FMA:
 *
 *  - spread rows, when O / groups is not a multiple of 16 (one vector holds several groups):
 *    each input row is first rewritten as E[ci][x][lane] = x[group(lane) * Cg + ci], the ci-th
 *    input channel of the group of output lane `lane`. Every input pixel is read by kh * kw
 *    outputs, so the permutes that build E run once per pixel rather than once per tap, and
 *    the inner loop is a vector load and FMAs, the weights held in registers across a block
 *    of up to 14 output pixels (for 3-wide kernels each loaded vector serves the three taps
 *    that read it).
 *  - broadcast rows, when O / groups is a multiple of 16 (each vector within one group): the
 *    group's channels of the input row are copied and each one is broadcast against one or two
 *    weight vectors, as a GEMM micro-kernel that reads its A operand in place.
 *
 * The rows a thread works on are kept in a cache of kh rows, padded with zeros, so the inner
 * loops never clip a window. A cached row covers a strip of output columns and one output
 * vector (spread) or one group (broadcast), small enough for the kh rows to stay in L1: read
 * from L2 instead, the spread kernel ran at half the speed. Portable builds (and shapes whose
 * rows would not fit a sane amount of scratch) take a plain direct loop.
 */
#include "kernels_internal.h"

#define GC_LANES 16
#define GC_MAX_PIXELS 14                          /* output pixels per block */
#define GC_CACHE_BYTES ((int64_t)24 << 10)        /* one thread's kh cached rows, nominal */
#define GC_BAND_BYTES ((int64_t)512 << 10)       /* input rows of a band of output rows */
#define GC_MAX_SCRATCH_BYTES ((int64_t)1 << 28)   /* beyond: the portable loop */
#define GC_MAX_KH 64

typedef struct gc_plan {
    const float *x, *bias;
    float *y;
    const rk_conv_params *p;
    int64_t o, cin, cout;       /* output channels; channels per group in and out */
    int64_t nob;                /* 16-channel output vectors */
    int spread;                 /* 1: spread rows, 0: broadcast rows */
    const float *wp;            /* packed weights, by output vector (see the planner) */
    const int32_t *source;      /* spread: [nob][cin][16] input channel of each lane */
    int64_t chunk;              /* output vectors per cached row */
    int64_t strip;              /* output columns per cached row */
    int64_t row_floats;         /* one cached row */
    const rk_epilogue *epilogue;
} gc_plan;

typedef struct gc_task {
    const gc_plan *plan;
    float *rows;                /* kh cached rows of row_floats */
    int64_t *tags;              /* image * h + iy per cached row, -1 empty */
    int64_t *slot;              /* per tap row: its cached row */
    int64_t row0, row1;         /* output rows (image * oh + oy) */
} gc_task;

/* ---- the portable direct loop -------------------------------------------------------------- */

/* pl->wp holds the weights as [tap][ci][O] here: the innermost loop runs over the output
   channels of a group, contiguous in the weights and the output, which compilers vectorize. */
static void gc_portable_rows(const gc_plan *pl, int64_t row0, int64_t row1)
{
    const rk_conv_params *p = pl->p;
    const int64_t C = p->c, O = pl->o, cin = pl->cin, cout = pl->cout;
    for (int64_t row = row0; row < row1; row++) {
        const int64_t bi = row / p->oh, oy = row - bi * p->oh;
        const int64_t iy0 = oy * p->stride_h - p->pad_top;
        const float *img = pl->x + bi * p->h * p->w * C;
        int64_t ky0, ky1;
        tap_range(iy0, p->dil_h, p->h, p->kh, &ky0, &ky1);
        for (int64_t ox = 0; ox < p->ow; ox++) {
            const int64_t ix0 = ox * p->stride_w - p->pad_left;
            int64_t kx0, kx1;
            tap_range(ix0, p->dil_w, p->w, p->kw, &kx0, &kx1);
            float *restrict out = pl->y + (row * p->ow + ox) * O;
            if (pl->bias != NULL)
                memcpy(out, pl->bias, (size_t)O * sizeof(float));
            else
                memset(out, 0, (size_t)O * sizeof(float));
            for (int64_t ky = ky0; ky < ky1; ky++)
                for (int64_t kx = kx0; kx < kx1; kx++) {
                    const float *in = img + ((iy0 + ky * p->dil_h) * p->w + ix0 + kx * p->dil_w) * C;
                    const float *tap = pl->wp + (ky * p->kw + kx) * cin * O;
                    for (int64_t g = 0; g < C / cin; g++)
                        for (int64_t ci = 0; ci < cin; ci++) {
                            const float v = in[g * cin + ci];
                            const float *restrict f = tap + ci * O + g * cout;
                            float *restrict o = out + g * cout;
                            for (int64_t j = 0; j < cout; j++)
                                o[j] += v * f[j];
                        }
                }
        }
        if (pl->epilogue != NULL)
            rk_apply_epilogue(pl->epilogue, pl->y + row * p->ow * O, O, row * p->ow, 0, p->ow, O);
    }
}

static void *gc_portable_run(void *arg)
{
    const gc_task *t = (const gc_task *)arg;
    gc_portable_rows(t->plan, t->row0, t->row1);
    return NULL;
}

#if defined(RK_X86_AVX512)

/* ---- the AVX-512 direct kernel --------------------------------------------------------------- */

/* Columns of a cached row for output columns [sx0, sx1): padded input columns from sx0 * sw. */
static inline int64_t gc_columns(const rk_conv_params *p, int64_t sx0, int64_t sx1)
{
    return (sx1 - sx0 - 1) * p->stride_w + (p->kw - 1) * p->dil_w + 1;
}

/* Spread rows of N input channels of a group (N a constant, so that the index vectors stay
   in registers), columns [pc0, pc0 + ncols): one (ONE) or two loads and N permutes a column. */
__attribute__((target("avx512f"), always_inline))
static inline void gc_fill_columns(const float *src, int64_t C, int64_t base, int whole, __mmask16 mlo,
                                   __mmask16 mhi, const rk_conv_params *p, int64_t pc0, int64_t ncols,
                                   const __m512i *index, float *e, int64_t cstride, const int N,
                                   const int ONE)
{
    for (int64_t c = 0; c < ncols; c++, e += GC_LANES) {
        const int64_t ix = pc0 + c - p->pad_left;
        if (ix < 0 || ix >= p->w) {
            for (int k = 0; k < N; k++)
                _mm512_storeu_ps(e + k * cstride, _mm512_setzero_ps());
            continue;
        }
        const float *px = src + ix * C + base;
        if (ONE) {
            const __m512 a = _mm512_loadu_ps(px);
            for (int k = 0; k < N; k++)
                _mm512_storeu_ps(e + k * cstride, _mm512_permutexvar_ps(index[k], a));
            continue;
        }
        const __m512 a = whole ? _mm512_loadu_ps(px) : _mm512_maskz_loadu_ps(mlo, px);
        const __m512 b = whole ? _mm512_loadu_ps(px + 16) : _mm512_maskz_loadu_ps(mhi, px + 16);
        for (int k = 0; k < N; k++)
            _mm512_storeu_ps(e + k * cstride, _mm512_permutex2var_ps(a, index[k], b));
    }
}

/* Writes input row iy of image bi, padded columns [pc0, pc0 + ncols), output vectors
   [ob0, ob1): spread rows [ob - ob0][ci][column][lane], broadcast rows [column][ci] of the
   group of ob0. */
__attribute__((target("avx512f"), noinline))
static void gc_fill_row(const gc_plan *pl, int64_t bi, int64_t iy, int64_t ob0, int64_t ob1,
                        int64_t pc0, int64_t ncols, float *dst)
{
    const rk_conv_params *p = pl->p;
    const int64_t C = p->c, cin = pl->cin;
    const float *src = pl->x + (bi * p->h + iy) * p->w * C;
    if (!pl->spread) {
        const float *group = src + ob0 * GC_LANES / pl->cout * cin;
        for (int64_t c = 0; c < ncols; c++) {
            const int64_t ix = pc0 + c - p->pad_left;
            if (ix >= 0 && ix < p->w)
                memcpy(dst + c * cin, group + ix * C, (size_t)cin * sizeof(float));
            else
                memset(dst + c * cin, 0, (size_t)cin * sizeof(float));
        }
        return;
    }
    const int64_t cstride = ncols * GC_LANES;
    for (int64_t ob = ob0; ob < ob1; ob++) {
        float *d = dst + (ob - ob0) * cin * cstride;
        const int32_t *source = pl->source + ob * cin * GC_LANES;
        /* the lanes' channels lie within 32 of the first one's (checked by the planner): one or
           two loads and a permute per input channel of the group. Masked loads only where the
           window would pass the pixel's last channel: they took 2.5 times as long. */
        const int64_t base = source[0];
        int64_t span = 0;
        for (int64_t l = 0; l < cin * GC_LANES; l++)
            span = max_i64(span, source[l] - base + 1);
        const int64_t lo = min_i64(16, C - base), hi = max_i64(0, min_i64(16, C - base - 16));
        const __mmask16 mlo = (__mmask16)((1u << lo) - 1u), mhi = (__mmask16)((1u << hi) - 1u);
        const int whole = base + (span <= 16 ? 16 : 32) <= C;
        for (int64_t ci0 = 0; ci0 < cin; ci0 += 8) {
            const int64_t n = min_i64(8, cin - ci0);
            __m512i index[8];
            for (int64_t k = 0; k < 8; k++)
                index[k] = k < n ? _mm512_sub_epi32(_mm512_loadu_si512(source + (ci0 + k) * GC_LANES),
                                                    _mm512_set1_epi32((int)base))
                                 : _mm512_setzero_si512();
            float *e = d + ci0 * cstride;
            switch (n * 2 + (whole && span <= 16)) {
#define GC_FILL_CASE(k)                                                                       \
            case k * 2: gc_fill_columns(src, C, base, whole, mlo, mhi, p, pc0, ncols, index, e,  \
                                        cstride, k, 0); break;                                 \
            case k * 2 + 1: gc_fill_columns(src, C, base, whole, mlo, mhi, p, pc0, ncols, index, \
                                            e, cstride, k, 1); break;
            GC_FILL_CASE(1) GC_FILL_CASE(2) GC_FILL_CASE(3) GC_FILL_CASE(4)
            GC_FILL_CASE(5) GC_FILL_CASE(6) GC_FILL_CASE(7) GC_FILL_CASE(8)
#undef GC_FILL_CASE
            default: break;
            }
        }
    }
}

/* R output pixels of one output vector from spread rows. src[t]: the block's first input
   column in the cached row of tap row t (nt of them); wk[t]: its weights [ci][kx][lane].
   SW: the stride along x when it is 1 or 2 (every pixel's offset then is a constant, one
   register addresses them all), else 0. SLIDE (3-wide undilated kernels): each input vector
   is loaded once and serves every tap that reads it. */
__attribute__((target("avx512f"), always_inline))
static inline void gc_spread_block(const float *const *src, const float *const *wk, int64_t nt,
                                   const gc_plan *pl, int64_t cstride, float *out, __mmask16 mask,
                                   const float *bias, const int R, const int SW, const int SLIDE)
{
    const rk_conv_params *p = pl->p;
    const int64_t pstep = (SW ? SW : p->stride_w) * GC_LANES, kstep = p->dil_w * GC_LANES;
    const __m512 b = bias == NULL ? _mm512_setzero_ps() : mask == 0xFFFF ? _mm512_loadu_ps(bias)
                                                                    : _mm512_maskz_loadu_ps(mask, bias);
    __m512 acc[GC_MAX_PIXELS];
#pragma GCC unroll 14
    for (int r = 0; r < R; r++)
        acc[r] = b;
    for (int64_t t = 0; t < nt; t++) {
        const float *w = wk[t];
        for (int64_t ci = 0; ci < pl->cin; ci++) {
            const float *s = src[t] + ci * cstride;
            if (SLIDE) {
                const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + GC_LANES),
                             w2 = _mm512_loadu_ps(w + 2 * GC_LANES);
#pragma GCC unroll 32
                for (int q = 0; q < (R - 1) * SW + 3; q++) {
                    __m512 e = _mm512_loadu_ps(s + q * GC_LANES);
                    /* one load for the up to three FMAs: folded into each of them instead,
                       the loads outnumbered the FMAs */
                    __asm__("" : "+v"(e));
                    if (q % SW == 0 && q / SW < R)
                        acc[q / SW] = _mm512_fmadd_ps(e, w0, acc[q / SW]);
                    if (q >= 1 && (q - 1) % SW == 0 && (q - 1) / SW < R)
                        acc[(q - 1) / SW] = _mm512_fmadd_ps(e, w1, acc[(q - 1) / SW]);
                    if (q >= 2 && (q - 2) % SW == 0 && (q - 2) / SW < R)
                        acc[(q - 2) / SW] = _mm512_fmadd_ps(e, w2, acc[(q - 2) / SW]);
                }
                w += 3 * GC_LANES;
                continue;
            }
            for (int64_t kx = 0; kx < p->kw; kx++) {
                const __m512 wv = _mm512_loadu_ps(w);
#pragma GCC unroll 14
                for (int r = 0; r < R; r++)
                    acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(s + r * pstep), wv, acc[r]);
                w += GC_LANES;
                s += kstep;
            }
        }
    }
    if (mask == 0xFFFF) {
#pragma GCC unroll 14
        for (int r = 0; r < R; r++)
            _mm512_storeu_ps(out + r * pl->o, acc[r]);
        return;
    }
#pragma GCC unroll 14
    for (int r = 0; r < R; r++)
        _mm512_mask_storeu_ps(out + r * pl->o, mask, acc[r]);
}

/* R output pixels of V (1 or 2) output vectors of one group from broadcast rows (pixel
   stride cin); wk[t]: the first vector's weights [kx][ci][lane], the second's wnext later. */
__attribute__((target("avx512f"), always_inline))
static inline void gc_broadcast_block(const float *const *src, const float *const *wk, int64_t nt,
                                      int64_t wnext, const gc_plan *pl, float *out,
                                      const float *bias, const int R, const int V)
{
    const rk_conv_params *p = pl->p;
    const int64_t cin = pl->cin, pstep = p->stride_w * cin, kstep = p->dil_w * cin;
    const __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    const __m512 b1 = bias && V > 1 ? _mm512_loadu_ps(bias + GC_LANES) : _mm512_setzero_ps();
    __m512 acc0[GC_MAX_PIXELS], acc1[GC_MAX_PIXELS];
#pragma GCC unroll 14
    for (int r = 0; r < R; r++) {
        acc0[r] = b0;
        acc1[r] = b1;
    }
    for (int64_t t = 0; t < nt; t++) {
        const float *w = wk[t];
        for (int64_t kx = 0; kx < p->kw; kx++) {
            const float *s = src[t] + kx * kstep;
            for (int64_t ci = 0; ci < cin; ci++) {
                const __m512 w0 = _mm512_loadu_ps(w);
                const __m512 w1 = V > 1 ? _mm512_loadu_ps(w + wnext) : w0;
#pragma GCC unroll 14
                for (int r = 0; r < R; r++) {
                    const __m512 a = _mm512_set1_ps(s[r * pstep]);
                    acc0[r] = _mm512_fmadd_ps(a, w0, acc0[r]);
                    if (V > 1)
                        acc1[r] = _mm512_fmadd_ps(a, w1, acc1[r]);
                }
                w += GC_LANES;
                s += 1;
            }
        }
    }
#pragma GCC unroll 14
    for (int r = 0; r < R; r++) {
        _mm512_storeu_ps(out + r * pl->o, acc0[r]);
        if (V > 1)
            _mm512_storeu_ps(out + r * pl->o + GC_LANES, acc1[r]);
    }
}

#define GC_CASES(X) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14)

__attribute__((target("avx512f")))
static void gc_spread(const float *const *src, const float *const *wk, int64_t nt, const gc_plan *pl,
                      int64_t cstride, float *out, __mmask16 mask, const float *bias, int R)
{
    const rk_conv_params *p = pl->p;
    const int slide = p->kw == 3 && p->dil_w == 1 && (p->stride_w == 1 || p->stride_w == 2);
    const int variant = slide ? (int)p->stride_w : 0;
    switch (R * 4 + variant) {
#define GC_SPREAD_CASE(n)                                                                       \
    case n * 4: gc_spread_block(src, wk, nt, pl, cstride, out, mask, bias, n, 0, 0); break;      \
    case n * 4 + 1: gc_spread_block(src, wk, nt, pl, cstride, out, mask, bias, n, 1, 1); break;  \
    case n * 4 + 2: gc_spread_block(src, wk, nt, pl, cstride, out, mask, bias, n, 2, 1); break;
    GC_CASES(GC_SPREAD_CASE)
#undef GC_SPREAD_CASE
    default: break;
    }
}

__attribute__((target("avx512f")))
static void gc_broadcast(const float *const *src, const float *const *wk, int64_t nt, int64_t wnext,
                         const gc_plan *pl, float *out, const float *bias, int R, int V)
{
    switch (R * 2 + (V > 1)) {
#define GC_BROADCAST_CASE(n)                                                                \
    case n * 2: gc_broadcast_block(src, wk, nt, wnext, pl, out, bias, n, 1); break;         \
    case n * 2 + 1: gc_broadcast_block(src, wk, nt, wnext, pl, out, bias, n, 2); break;
    GC_CASES(GC_BROADCAST_CASE)
#undef GC_BROADCAST_CASE
    default: break;
    }
}

/* Makes t->slot[k] the cached row of tap row ky0 + k of output row (bi, .), filling the rows
   not cached yet into rows no tap of this output row needs (kh <= 64: one bit each). */
static void gc_fetch_rows(const gc_task *t, int64_t bi, int64_t iy0, int64_t ky0, int64_t ky1,
                          int64_t ob0, int64_t ob1, int64_t pc0, int64_t ncols)
{
    const gc_plan *pl = t->plan;
    const rk_conv_params *p = pl->p;
    const int64_t n = ky1 - ky0;
    uint64_t used = 0;
    for (int64_t k = 0; k < n; k++) {
        const int64_t tag = bi * p->h + iy0 + (ky0 + k) * p->dil_h;
        t->slot[k] = -1;
        for (int64_t j = 0; j < p->kh; j++)
            if (t->tags[j] == tag) {
                t->slot[k] = j;
                used |= (uint64_t)1 << j;
                break;
            }
    }
    for (int64_t k = 0; k < n; k++) {
        if (t->slot[k] >= 0)
            continue;
        const int64_t j = __builtin_ctzll(~used);
        used |= (uint64_t)1 << j;
        t->slot[k] = j;
        t->tags[j] = bi * p->h + iy0 + (ky0 + k) * p->dil_h;
        gc_fill_row(pl, bi, iy0 + (ky0 + k) * p->dil_h, ob0, ob1, pc0, ncols, t->rows + j * pl->row_floats);
    }
}

/* Output rows [row0, row1), output vectors [ob0, ob1), columns [sx0, sx1) from cached rows. */
__attribute__((target("avx512f")))
static void gc_strip(const gc_task *t, int64_t row0, int64_t row1, int64_t ob0, int64_t ob1,
                     int64_t sx0, int64_t sx1)
{
    const gc_plan *pl = t->plan;
    const rk_conv_params *p = pl->p;
    const int64_t O = pl->o, taps = p->kh * p->kw, cin = pl->cin;
    const int64_t ncols = gc_columns(p, sx0, sx1), cstride = ncols * GC_LANES;
    const int64_t blocks = ceil_div(sx1 - sx0, GC_MAX_PIXELS);
    const float *src[GC_MAX_KH], *wk[GC_MAX_KH], *s[GC_MAX_KH];
    for (int64_t j = 0; j < p->kh; j++)
        t->tags[j] = -1;
    for (int64_t row = row0; row < row1; row++) {
        const int64_t bi = row / p->oh, oy = row - bi * p->oh;
        const int64_t iy0 = oy * p->stride_h - p->pad_top;
        int64_t ky0, ky1;
        tap_range(iy0, p->dil_h, p->h, p->kh, &ky0, &ky1);
        gc_fetch_rows(t, bi, iy0, ky0, ky1, ob0, ob1, sx0 * p->stride_w, ncols);
        const int64_t nt = ky1 - ky0;
        float *yrow = pl->y + row * p->ow * O;
        for (int64_t ob = ob0; ob < ob1;) {
            const int64_t c0 = ob * GC_LANES;
            const int V = !pl->spread && ob + 1 < ob1 ? 2 : 1;
            for (int64_t k = 0; k < nt; k++) {
                src[k] = t->rows + t->slot[k] * pl->row_floats + (pl->spread ? (ob - ob0) * cin * cstride : 0);
                wk[k] = pl->wp + (ob * taps + (ky0 + k) * p->kw) * cin * GC_LANES;
            }
            const int64_t lanes = min_i64(GC_LANES, O - c0);
            const __mmask16 mask = (__mmask16)((1u << lanes) - 1u);
            const float *bias = pl->bias ? pl->bias + c0 : NULL;
            for (int64_t blk = 0, x0 = sx0; blk < blocks; blk++) {
                const int64_t x1 = sx0 + (sx1 - sx0) * (blk + 1) / blocks;
                const int64_t shift = (x0 - sx0) * p->stride_w * (pl->spread ? GC_LANES : cin);
                for (int64_t k = 0; k < nt; k++)
                    s[k] = src[k] + shift;
                if (pl->spread)
                    gc_spread(s, wk, nt, pl, cstride, yrow + x0 * O + c0, mask, bias, (int)(x1 - x0));
                else
                    gc_broadcast(s, wk, nt, taps * cin * GC_LANES, pl, yrow + x0 * O + c0, bias,
                                 (int)(x1 - x0), V);
                x0 = x1;
            }
            ob += V;
        }
        if (pl->epilogue != NULL) {
            const int64_t c0 = ob0 * GC_LANES, c1 = min_i64(O, ob1 * GC_LANES);
            rk_apply_epilogue(pl->epilogue, yrow + sx0 * O + c0, O, row * p->ow + sx0, c0, sx1 - sx0,
                              c1 - c0);
        }
    }
}

/* Bands of output rows whose input rows stay in L2 while every output vector and strip
   passes over them (each pass reads the input rows again). */
static void *gc_task_run(void *arg)
{
    const gc_task *t = (const gc_task *)arg;
    const gc_plan *pl = t->plan;
    const rk_conv_params *p = pl->p;
    const int64_t ow = p->ow, strips = ceil_div(ow, pl->strip);
    const int64_t input_row = p->w * p->c * (int64_t)sizeof(float) * p->stride_h;
    const int64_t band = max_i64(4, GC_BAND_BYTES / max_i64(1, input_row));
    for (int64_t r0 = t->row0; r0 < t->row1; r0 += band) {
        const int64_t r1 = min_i64(t->row1, r0 + band);
        for (int64_t ob0 = 0; ob0 < pl->nob; ob0 += pl->chunk)
            for (int64_t s = 0; s < strips; s++)
                gc_strip(t, r0, r1, ob0, min_i64(pl->nob, ob0 + pl->chunk), ow * s / strips,
                         ow * (s + 1) / strips);
    }
    return NULL;
}

/* Weights by output vector, in the order the kernels walk them: [ob][ky][ci][kx][lane] for
   spread rows, [ob][ky][kx][ci][lane] (each output channel's own order) for broadcast rows;
   lanes past the last output channel are zero. Sixteen output channels' runs of 16 weights
   are transposed at a time: the weights are read once per call, as many bytes as a small
   image's input, so a strided scalar copy cost as much as the convolution. */
__attribute__((target("avx512f")))
static void gc_pack_weights(const gc_plan *pl, const float *filt, float *wp)
{
    const rk_conv_params *p = pl->p;
    const int64_t cin = pl->cin, k_all = p->kh * p->kw * cin;
    for (int64_t ob = 0; ob < pl->nob; ob++) {
        const int64_t rows = min_i64(GC_LANES, pl->o - ob * GC_LANES);
        const float *src = filt + ob * GC_LANES * k_all;
        float *dst = wp + ob * k_all * GC_LANES;
        for (int64_t k0 = 0; k0 < k_all; k0 += GC_LANES) {
            const int64_t kn = min_i64(GC_LANES, k_all - k0);
            const __mmask16 m = (__mmask16)((1u << kn) - 1u);
            __m512 r[16];
            for (int64_t i = 0; i < 16; i++)
                r[i] = i < rows ? (kn == GC_LANES ? _mm512_loadu_ps(src + i * k_all + k0)
                                                  : _mm512_maskz_loadu_ps(m, src + i * k_all + k0))
                                : _mm512_setzero_ps();
            transpose16x16(r);
            for (int64_t i = 0; i < kn; i++) {
                const int64_t k = k0 + i, tap = k / cin, ci = k - tap * cin;
                const int64_t ky = tap / p->kw, kx = tap - ky * p->kw;
                const int64_t at = pl->spread ? (ky * cin + ci) * p->kw + kx : k;
                _mm512_storeu_ps(dst + at * GC_LANES, r[i]);
            }
        }
    }
}

/* Plans the direct kernel and runs it on nt tasks; -1 where it does not apply (the caller
   takes the portable loop), 1 when out of memory. */
static int gc_direct(gc_plan *pl, const float *filt, gc_task *tasks, int nt)
{
    const rk_conv_params *p = pl->p;
    const int64_t o = pl->o, cin = pl->cin, taps = p->kh * p->kw;
    if (!rk_use_avx512() || p->kh > GC_MAX_KH)
        return -1;
    /* spread lanes must lie within 32 channels of their vector's first lane's group */
    for (int64_t ob = 0; pl->spread && ob < pl->nob; ob++) {
        const int64_t first = ob * GC_LANES, last = min_i64(o, first + GC_LANES) - 1;
        if ((last / pl->cout - first / pl->cout + 1) * cin > 2 * GC_LANES)
            return -1;
    }
    /* a cached row: one output vector (spread) or one group (broadcast), and as many columns
       as keep kh of them within GC_CACHE_BYTES (at least one block of pixels) */
    pl->chunk = pl->spread ? 1 : pl->cout / GC_LANES;
    const int64_t column_bytes = (pl->spread ? cin * GC_LANES : cin) * (int64_t)sizeof(float) * p->kh;
    const int64_t fit = GC_CACHE_BYTES / column_bytes - (p->kw - 1) * p->dil_w - 1;
    pl->strip = min_i64(p->ow, max_i64(GC_MAX_PIXELS, fit < 0 ? 0 : fit / p->stride_w + 1));
    const double columns = (double)gc_columns(p, 0, pl->strip);
    const double row_floats = columns * (double)(pl->spread ? cin * GC_LANES * pl->chunk : cin);
    const double wp_floats = (double)pl->nob * (double)taps * (double)cin * GC_LANES;
    const double src_ints = pl->spread ? (double)pl->nob * (double)cin * GC_LANES : 0.0;
    const double total = (wp_floats + src_ints) * 4.0 + 128.0 +
                         (row_floats * (double)p->kh * 4.0 + (double)p->kh * 16.0 + 128.0) * nt;
    if (total > (double)GC_MAX_SCRATCH_BYTES)
        return -1;
    pl->row_floats = (int64_t)row_floats;

    /* scratch: packed weights, lane sources, then per thread kh rows, tags and slots */
    const size_t wp_bytes = (size_t)ceil_div((int64_t)wp_floats * 4, RK_ALIGN) * RK_ALIGN;
    const size_t src_bytes = (size_t)ceil_div((int64_t)src_ints * 4, RK_ALIGN) * RK_ALIGN;
    const size_t row_bytes = (size_t)ceil_div(pl->row_floats * p->kh * 4, RK_ALIGN) * RK_ALIGN;
    const size_t per_thread = row_bytes + (size_t)ceil_div(p->kh * 16, RK_ALIGN) * RK_ALIGN;
    char *scratch = (char *)alloc_aligned(wp_bytes + src_bytes + per_thread * (size_t)nt);
    if (scratch == NULL)
        return 1;
    float *wp = (float *)(void *)scratch;
    int32_t *source = (int32_t *)(void *)(scratch + wp_bytes);
    gc_pack_weights(pl, filt, wp);
    /* spread lanes past the last output channel read the last one's inputs (their weights are
       zero and their results never stored) */
    for (int64_t ob = 0; pl->spread && ob < pl->nob; ob++)
        for (int64_t ci = 0; ci < cin; ci++)
            for (int64_t l = 0; l < GC_LANES; l++) {
                const int64_t j = min_i64(ob * GC_LANES + l, o - 1);
                source[(ob * cin + ci) * GC_LANES + l] = (int32_t)(j / pl->cout * cin + ci);
            }
    pl->wp = wp;
    pl->source = source;
    for (int i = 0; i < nt; i++) {
        char *mine = scratch + wp_bytes + src_bytes + per_thread * (size_t)i;
        tasks[i].rows = (float *)(void *)mine;
        tasks[i].tags = (int64_t *)(void *)(mine + row_bytes);
        tasks[i].slot = tasks[i].tags + p->kh;
    }
    if (nt == 1)
        gc_task_run(&tasks[0]);
    else
        rk_run_tasks(gc_task_run, tasks, sizeof(gc_task), nt);
    free(scratch);
    return 0;
}
#endif

/* Depthwise in Convolution2d's layout: w [C * m, kh, kw, 1] holds the same values as
   DepthwiseConvolution2d's [1, kh, kw, C * m], tap-major instead of channel-major. */
static int gc_depthwise(const float *x, const float *filt, const float *bias, float *y,
                        const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue,
                        int threads)
{
    const int64_t taps = p->kh * p->kw;
    float *w = (float *)alloc_aligned((size_t)(taps * o) * sizeof(float));
    if (w == NULL)
        return 1;
    for (int64_t j = 0; j < o; j++)
        for (int64_t t = 0; t < taps; t++)
            w[t * o + j] = filt[j * taps + t];
    int failed = rk_depthwise_conv2d_fused(x, w, bias, y, p, o / p->c, epilogue, threads);
    free(w);
    return failed;
}

/*
 * rk_grouped_conv2d_fused: y[n, oh, ow, o]; filt [o, kh, kw, c / groups]; bias [o] or NULL.
 * Preconditions: as rk_conv2d_fused, groups >= 1 dividing c and o.
 * Scratch: the weights packed by 16 output channels, plus per thread kh cached rows (about
 * 24 KiB); or for the portable loop the weights by tap; returns 1 if an allocation fails.
 */
int rk_grouped_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                            const rk_conv_params *p, int64_t o, int64_t groups,
                            const rk_epilogue *epilogue)
{
    return rk_grouped_conv2d_threads(x, filt, bias, y, p, o, groups, epilogue, 0);
}

int rk_grouped_conv2d_threads(const float *x, const float *filt, const float *bias, float *y,
                              const rk_conv_params *p, int64_t o, int64_t groups,
                              const rk_epilogue *epilogue, int threads)
{
    const int64_t rows = p->n * p->oh;
    if (groups <= 1)
        return rk_conv2d_packed(x, filt, NULL, bias, y, p, o, epilogue, threads);
    if (rows <= 0 || p->ow <= 0 || o <= 0)
        return 0;
    if (groups == p->c)
        return gc_depthwise(x, filt, bias, y, p, o, epilogue, threads);

    gc_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.x = x;
    pl.bias = bias;
    pl.y = y;
    pl.p = p;
    pl.o = o;
    pl.cin = p->c / groups;
    pl.cout = o / groups;
    pl.nob = ceil_div(o, GC_LANES);
    pl.spread = pl.cout % GC_LANES != 0;
    pl.wp = filt;
    pl.epilogue = epilogue;
    const double work = 2.0 * (double)rows * (double)p->ow * (double)o * (double)(p->kh * p->kw * pl.cin);
    int nt = threads > 0 ? (int)min_i64(threads, rk_thread_count())
                         : rk_threads_for(work, RK_SMALL_MIN_WORK_PER_THREAD * 2.0);
    if (nt > rows)
        nt = (int)rows;
    gc_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        memset(&tasks[i], 0, sizeof tasks[i]);
        tasks[i].plan = &pl;
        tasks[i].row0 = rows * i / nt;
        tasks[i].row1 = rows * (i + 1) / nt;
    }
#if defined(RK_X86_AVX512)
    const int direct = gc_direct(&pl, filt, tasks, nt);
    if (direct >= 0)
        return direct;
#endif
    const int64_t taps = p->kh * p->kw;
    float *wt = (float *)alloc_aligned((size_t)(taps * pl.cin * o) * sizeof(float));
    if (wt == NULL)
        return 1;
    for (int64_t j = 0; j < o; j++)
        for (int64_t t = 0; t < taps; t++)
            for (int64_t ci = 0; ci < pl.cin; ci++)
                wt[(t * pl.cin + ci) * o + j] = filt[(j * taps + t) * pl.cin + ci];
    pl.wp = wt;
    if (nt == 1)
        gc_portable_run(&tasks[0]);
    else
        rk_run_tasks(gc_portable_run, tasks, sizeof(gc_task), nt);
    free(wt);
    return 0;
}
