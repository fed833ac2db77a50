/*
 * DepthwiseConvolution2d: direct, channels in vector lanes (AVX-512: 32 at a time, 3 x 3 and
 * 5 x 5 windows four output pixels at a time), rows split among threads; and the bands of rows
 * a pipeline (pipeline.c) runs it over.
 */
#include "kernels_internal.h"

#include <math.h>

typedef struct dw_task {
    const float *x, *filt, *bias;
    float *y;
    const rk_conv_params *p;
    int64_t mult;
    int64_t row0, row1; /* range over n * oh output rows */
    int64_t ch0, ch1;   /* range of channels (AVX-512, multiplier 1; else all) */
    const rk_epilogue *epilogue;
    /* the image row x's first row holds, and the output row y's first row is (AVX-512,
       multiplier 1, one image; else 0): bands of rows in a pipeline's buffers (pipeline.c) */
    int64_t first_row, y_first_row;
} dw_task;

#if defined(RK_X86_AVX512)
/* max(lo, .) then min(hi, .): the clamp of ukr_tail (identity at -inf, +inf; NaN kept). */
static inline __attribute__((always_inline, target("avx512f"))) __m512 dw_clamp(__m512 v, __m512 lo, __m512 hi)
{
    return _mm512_min_ps(hi, _mm512_max_ps(lo, v));
}

/*
 * One output row of a depthwise convolution with multiplier 1, AVX-512: 32 channels at a time
 * (masked loads and stores for the last, partial group, so any channel count works), and two
 * neighbouring output pixels at once when their windows cover the same taps (away from the
 * left and right borders), which gives four independent sums per tap and shares the filter
 * loads. Sums start from the bias and run over the taps in the same order as the portable code.
 */
__attribute__((target("avx512f")))
static void dw_row_avx512(const dw_task *t, int64_t row, float clamp_lo, float clamp_hi)
{
    const __m512 lo = _mm512_set1_ps(clamp_lo), hi = _mm512_set1_ps(clamp_hi);
    const rk_conv_params *p = t->p;
    const int64_t C = p->c;
    const int64_t bi = row / p->oh, oy = row - bi * p->oh;
    const int64_t iy0 = oy * p->stride_h - p->pad_top;
    const float *img = t->x + bi * p->h * p->w * C;
    float *outrow = t->y + (row - t->y_first_row) * p->ow * C;
    const int64_t next = p->stride_w * C; /* input offset from one output pixel to the next */
    int64_t ky0, ky1;
    tap_range(iy0, p->dil_h, p->h, p->kh, &ky0, &ky1);
    for (int64_t ch = t->ch0; ch < t->ch1; ch += 32) {
        const int64_t n = t->ch1 - ch;
        const __mmask16 m0 = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
        const __mmask16 m1 = n >= 32 ? (__mmask16)0xFFFF : (n > 16 ? (__mmask16)((1u << (n - 16)) - 1u) : 0);
        const __m512 b0 = t->bias ? _mm512_maskz_loadu_ps(m0, t->bias + ch) : _mm512_setzero_ps();
        const __m512 b1 = t->bias ? _mm512_maskz_loadu_ps(m1, t->bias + ch + 16) : _mm512_setzero_ps();
        int64_t ox = 0;
        while (ox < p->ow) {
            const int64_t ix0 = ox * p->stride_w - p->pad_left;
            int64_t kx0, kx1, nx0, nx1;
            tap_range(ix0, p->dil_w, p->w, p->kw, &kx0, &kx1);
            int pair = 0;
            if (ox + 1 < p->ow) {
                tap_range(ix0 + p->stride_w, p->dil_w, p->w, p->kw, &nx0, &nx1);
                pair = nx0 == kx0 && nx1 == kx1;
            }
            __m512 a00 = b0, a01 = b1, a10 = b0, a11 = b1;
            for (int64_t ky = ky0; ky < ky1; ky++) {
                const float *inrow = img + (iy0 + ky * p->dil_h - t->first_row) * p->w * C + ch;
                const float *frow = t->filt + ky * p->kw * C + ch;
                for (int64_t kx = kx0; kx < kx1; kx++) {
                    const float *in = inrow + (ix0 + kx * p->dil_w) * C;
                    const float *f = frow + kx * C;
                    const __m512 f0 = _mm512_maskz_loadu_ps(m0, f);
                    const __m512 f1 = _mm512_maskz_loadu_ps(m1, f + 16);
                    a00 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, in), f0, a00);
                    a01 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, in + 16), f1, a01);
                    if (pair) {
                        a10 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, in + next), f0, a10);
                        a11 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, in + next + 16), f1, a11);
                    }
                }
            }
            float *out = outrow + ox * C + ch;
            _mm512_mask_storeu_ps(out, m0, dw_clamp(a00, lo, hi));
            _mm512_mask_storeu_ps(out + 16, m1, dw_clamp(a01, lo, hi));
            if (pair) {
                _mm512_mask_storeu_ps(out + C, m0, dw_clamp(a10, lo, hi));
                _mm512_mask_storeu_ps(out + C + 16, m1, dw_clamp(a11, lo, hi));
            }
            ox += 1 + pair;
        }
    }
}
#endif

#if defined(RK_X86_AVX512)
/*
 * One output row of a K x K depthwise convolution (K of 3 or 5, multiplier 1, dilation 1, stride
 * S of 1 or 2), 16 channels at a time: four neighbouring output pixels are computed together
 * from the input columns they share (for 3 x 3 stride 1, six loads feed twelve multiply-adds
 * where dw_row_avx512 loads an input and a filter vector for each; the nine filter vectors stay
 * in registers for the whole row, a 5 x 5 filter's are loaded once per filter row and four
 * pixels). Pixels whose window crosses the left or right border take the per-pixel path. Sums
 * start from the bias and run over the taps in dw_row_avx512's order.
 */
static inline __attribute__((always_inline, target("avx512f"))) void
dw_square_row_impl(const dw_task *t, int64_t row, const int S, const int K, float clamp_lo, float clamp_hi)
{
    const __m512 lo = _mm512_set1_ps(clamp_lo), hi = _mm512_set1_ps(clamp_hi);
    enum { OB = 4 };
    const rk_conv_params *p = t->p;
    const int64_t C = p->c;
    const int64_t bi = row / p->oh, oy = row - bi * p->oh;
    const int64_t iy0 = oy * S - p->pad_top;
    const float *img = t->x + bi * p->h * p->w * C;
    float *outrow = t->y + (row - t->y_first_row) * p->ow * C;
    int64_t ky0, ky1;
    tap_range(iy0, 1, p->h, K, &ky0, &ky1);
    /* output pixels [ox_lo, ox_hi) have all K columns inside the input */
    int64_t ox_lo = ceil_div(p->pad_left, S), ox_hi = p->ow;
    while (ox_hi > ox_lo && (ox_hi - 1) * S - p->pad_left + (K - 1) >= p->w)
        ox_hi--;
    if (ox_hi < ox_lo)
        ox_hi = ox_lo = p->ow;
    for (int64_t ch = t->ch0; ch < t->ch1; ch += 16) {
        const int64_t n = t->ch1 - ch;
        const __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
        const __m512 bias = t->bias ? _mm512_maskz_loadu_ps(m, t->bias + ch) : _mm512_setzero_ps();
        /* 3 x 3: the nine filter vectors in registers; 5 x 5: each row's five loaded per use */
        __m512 f[9];
        for (int i = 0; i < 9; i++)
            f[i] = K == 3 ? _mm512_maskz_loadu_ps(m, t->filt + i * C + ch) : _mm512_setzero_ps();
#define RK_DW_FILTER(ky, kx) \
    (K == 3 ? f[(ky) * 3 + (kx)] : _mm512_maskz_loadu_ps(m, t->filt + ((ky) * K + (kx)) * C + ch))
        int64_t ox = 0;
        while (ox < p->ow) {
            const int64_t ix0 = ox * S - p->pad_left;
            if (ox >= ox_lo && ox + OB <= ox_hi) {
                __m512 acc[OB];
                for (int j = 0; j < OB; j++)
                    acc[j] = bias;
                for (int64_t ky = ky0; ky < ky1; ky++) {
                    const float *in = img + ((iy0 + ky - t->first_row) * p->w + ix0) * C + ch;
                    __m512 col[(OB - 1) * 2 + 5];
                    for (int c = 0; c < (OB - 1) * S + K; c++)
                        col[c] = _mm512_maskz_loadu_ps(m, in + c * C);
                    for (int kx = 0; kx < K; kx++) {
                        const __m512 fk = RK_DW_FILTER(ky, kx);
                        for (int j = 0; j < OB; j++)
                            acc[j] = _mm512_fmadd_ps(col[j * S + kx], fk, acc[j]);
                    }
                }
                for (int j = 0; j < OB; j++)
                    _mm512_mask_storeu_ps(outrow + (ox + j) * C + ch, m, dw_clamp(acc[j], lo, hi));
                ox += OB;
                continue;
            }
            int64_t kx0, kx1;
            tap_range(ix0, 1, p->w, K, &kx0, &kx1);
            __m512 acc = bias;
            for (int64_t ky = ky0; ky < ky1; ky++) {
                const float *in = img + ((iy0 + ky - t->first_row) * p->w + ix0) * C + ch;
                for (int64_t kx = kx0; kx < kx1; kx++)
                    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, in + kx * C), RK_DW_FILTER(ky, kx), acc);
            }
            _mm512_mask_storeu_ps(outrow + ox * C + ch, m, dw_clamp(acc, lo, hi));
            ox++;
        }
    }
#undef RK_DW_FILTER
}

__attribute__((target("avx512f"))) static void dw3x3_s1_row_avx512(const dw_task *t, int64_t row, float lo,
                                                                    float hi)
{
    dw_square_row_impl(t, row, 1, 3, lo, hi);
}

__attribute__((target("avx512f"))) static void dw3x3_s2_row_avx512(const dw_task *t, int64_t row, float lo,
                                                                    float hi)
{
    dw_square_row_impl(t, row, 2, 3, lo, hi);
}

__attribute__((target("avx512f"))) static void dw5x5_s1_row_avx512(const dw_task *t, int64_t row, float lo,
                                                                    float hi)
{
    dw_square_row_impl(t, row, 1, 5, lo, hi);
}

__attribute__((target("avx512f"))) static void dw5x5_s2_row_avx512(const dw_task *t, int64_t row, float lo,
                                                                    float hi)
{
    dw_square_row_impl(t, row, 2, 5, lo, hi);
}
#endif

static void *dw_task_run(void *arg)
{
    const dw_task *t = (const dw_task *)arg;
    const rk_conv_params *p = t->p;
    const int64_t C = p->c, mult = t->mult, OC = C * mult;
#if defined(RK_X86_AVX512)
    if (mult == 1 && rk_use_avx512()) {
        const int square = p->kh == p->kw && (p->kh == 3 || p->kh == 5) && p->dil_h == 1 &&
                           p->dil_w == 1 && p->stride_h == p->stride_w &&
                           (p->stride_h == 1 || p->stride_h == 2);
        const int three = square && p->kh == 3, five = square && p->kh == 5;
        /* an activation that is a clamp is applied in the kernels' stores (-inf, +inf: none) */
        ukr_tail clamp = { NULL, 0, -INFINITY, INFINITY };   /* rk_epilogue_tail keeps it for others */
        const int in_store = t->epilogue == NULL ||
                             (t->epilogue->residual == NULL && rk_epilogue_tail(t->epilogue, &clamp));
        for (int64_t row = t->row0; row < t->row1; row++) {
            if (three && p->stride_h == 1)
                dw3x3_s1_row_avx512(t, row, clamp.lo, clamp.hi);
            else if (three)
                dw3x3_s2_row_avx512(t, row, clamp.lo, clamp.hi);
            else if (five && p->stride_h == 1)
                dw5x5_s1_row_avx512(t, row, clamp.lo, clamp.hi);
            else if (five)
                dw5x5_s2_row_avx512(t, row, clamp.lo, clamp.hi);
            else
                dw_row_avx512(t, row, clamp.lo, clamp.hi);
            if (!in_store)
                rk_apply_epilogue(t->epilogue, t->y + (row - t->y_first_row) * p->ow * OC + t->ch0, OC, row * p->ow,
                                  t->ch0, p->ow, t->ch1 - t->ch0);
        }
        return NULL;
    }
#endif
    for (int64_t row = t->row0; row < t->row1; row++) {
        const int64_t bi = row / p->oh, oy = row - bi * p->oh;
        const int64_t iy0 = oy * p->stride_h - p->pad_top;
        const float *img = t->x + bi * p->h * p->w * C;
        int64_t ky0, ky1;
        tap_range(iy0, p->dil_h, p->h, p->kh, &ky0, &ky1);
        for (int64_t ox = 0; ox < p->ow; ox++) {
            float *out = t->y + (row * p->ow + ox) * OC;
            const int64_t ix0 = ox * p->stride_w - p->pad_left;
            int64_t kx0, kx1;
            tap_range(ix0, p->dil_w, p->w, p->kw, &kx0, &kx1);
            if (mult == 1) {
                /* 16 channels at a time with the sums held in registers over
                   all taps: one load of input and filter per multiply-add */
                int64_t ch = 0;
                for (; ch + 16 <= C; ch += 16) {
                    vf4 a0 = vf4_splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
                    if (t->bias) {
                        a0 = vf4_load(t->bias + ch);
                        a1 = vf4_load(t->bias + ch + 4);
                        a2 = vf4_load(t->bias + ch + 8);
                        a3 = vf4_load(t->bias + ch + 12);
                    }
                    for (int64_t ky = ky0; ky < ky1; ky++) {
                        const float *inrow = img + (iy0 + ky * p->dil_h) * p->w * C + ch;
                        const float *frow = t->filt + ky * p->kw * C + ch;
                        for (int64_t kx = kx0; kx < kx1; kx++) {
                            const float *in = inrow + (ix0 + kx * p->dil_w) * C;
                            const float *f = frow + kx * C;
                            a0 += vf4_load(in) * vf4_load(f);
                            a1 += vf4_load(in + 4) * vf4_load(f + 4);
                            a2 += vf4_load(in + 8) * vf4_load(f + 8);
                            a3 += vf4_load(in + 12) * vf4_load(f + 12);
                        }
                    }
                    vf4_store(out + ch, a0);
                    vf4_store(out + ch + 4, a1);
                    vf4_store(out + ch + 8, a2);
                    vf4_store(out + ch + 12, a3);
                }
                for (; ch < C; ch++) {
                    float acc = t->bias ? t->bias[ch] : 0.0f;
                    for (int64_t ky = ky0; ky < ky1; ky++)
                        for (int64_t kx = kx0; kx < kx1; kx++)
                            acc += img[((iy0 + ky * p->dil_h) * p->w + ix0 + kx * p->dil_w) * C + ch] *
                                   t->filt[(ky * p->kw + kx) * C + ch];
                    out[ch] = acc;
                }
            } else {
                if (t->bias)
                    memcpy(out, t->bias, (size_t)OC * sizeof(float));
                else
                    memset(out, 0, (size_t)OC * sizeof(float));
                for (int64_t ky = ky0; ky < ky1; ky++) {
                    for (int64_t kx = kx0; kx < kx1; kx++) {
                        const float *in = img + ((iy0 + ky * p->dil_h) * p->w + ix0 + kx * p->dil_w) * C;
                        const float *f = t->filt + (ky * p->kw + kx) * OC;
                        for (int64_t ci = 0; ci < C; ci++) {
                            const float v = in[ci];
                            float *o = out + ci * mult;
                            const float *ff = f + ci * mult;
                            for (int64_t j = 0; j < mult; j++)
                                o[j] += v * ff[j];
                        }
                    }
                }
            }
        }
        /* the output row is final: fuse the epilogue while it is in cache */
        if (t->epilogue != NULL)
            rk_apply_epilogue(t->epilogue, t->y + row * p->ow * OC, OC, row * p->ow, 0, p->ow, OC);
    }
    return NULL;
}

/* Channels per part where a depthwise convolution is split by channels as well as rows: two
   of dw_row_avx512's 32-channel groups. */
#define RK_DW_CHANNEL_BLOCK 64

static int dw_splits_channels(const rk_conv_params *p, int64_t mult)
{
#if defined(RK_X86_AVX512)
    return mult == 1 && rk_use_avx512() && p->c > RK_DW_CHANNEL_BLOCK;
#else
    (void)p;
    (void)mult;
    return 0;
#endif
}

/* Parts [begin, end) of rows x channel blocks, row-major (threads claim them in chunks, see
   rk_parallel_for). */
typedef struct dw_split {
    dw_task task;
    int64_t blocks; /* channel blocks per row */
} dw_split;

static void dw_parts(void *ctx, int64_t begin, int64_t end)
{
    const dw_split *s = (const dw_split *)ctx;
    dw_task t = s->task;
    const int64_t C = t.p->c;
    if (s->blocks == 1) {
        t.row0 = begin;
        t.row1 = end;
        dw_task_run(&t);
        return;
    }
    for (int64_t i = begin; i < end; i++) {
        const int64_t b = i % s->blocks;
        t.row0 = i / s->blocks;
        t.row1 = t.row0 + 1;
        t.ch0 = C * b / s->blocks / 16 * 16;
        t.ch1 = b + 1 == s->blocks ? C : C * (b + 1) / s->blocks / 16 * 16;
        dw_task_run(&t);
    }
}

/* Channel blocks per output row for nt threads: one, unless the rows are too few for every
   thread to claim several (a 7 x 7 or 14 x 14 image of many channels): then as many as give
   each thread RK_CHUNKS_PER_THREAD parts, each at least RK_DW_CHANNEL_BLOCK channels. The
   sums of every output are the same whatever the split. */
static int64_t dw_channel_blocks(const rk_conv_params *p, int64_t mult, int nt)
{
    const int64_t rows = p->n * p->oh;
    if (nt <= 1 || !dw_splits_channels(p, mult) || rows >= RK_CHUNKS_PER_THREAD * (int64_t)nt)
        return 1;
    return max_i64(1, min_i64(ceil_div(RK_CHUNKS_PER_THREAD * (int64_t)nt, rows), p->c / RK_DW_CHANNEL_BLOCK));
}

int64_t rk_depthwise_parts(const rk_conv_params *p, int64_t mult)
{
    return p->n * p->oh * (dw_splits_channels(p, mult) ? max_i64(1, p->c / RK_DW_CHANNEL_BLOCK) : 1);
}

/*
 * rk_depthwise_conv2d: y[n, oh, ow, c*mult]; filt [1, kh, kw, c*mult];
 * bias [c*mult] or NULL. Preconditions as rk_conv2d, mult >= 1. No scratch.
 */
int rk_depthwise_conv2d(const float *x, const float *filt, const float *bias, float *y, const rk_conv_params *p, int64_t mult)
{
    return rk_depthwise_conv2d_fused(x, filt, bias, y, p, mult, NULL, 0);
}

int rk_depthwise_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                              const rk_conv_params *p, int64_t mult, const rk_epilogue *epilogue,
                              int threads)
{
    const int64_t rows = p->n * p->oh;
    if (rows <= 0 || p->ow <= 0 || p->c <= 0 || mult <= 0)
        return 0;
    /* ~200 us of single-thread work per extra thread covers its start-up */
    double work = 2.0 * (double)rows * (double)p->ow * (double)(p->c * mult) * (double)(p->kh * p->kw);
    int nt = threads > 0 ? (int)min_i64(threads, rk_thread_count())
                         : rk_threads_for(work, RK_SMALL_MIN_WORK_PER_THREAD * 2.0);
    dw_split split = { { x, filt, bias, y, p, mult, 0, rows, 0, p->c, epilogue, 0, 0 }, 1 };
    split.blocks = dw_channel_blocks(p, mult, nt);
    rk_parallel_for_threads(rows * split.blocks, 1, nt, dw_parts, &split);
    return 0;
}

#if defined(RK_X86_AVX512)
void rk_depthwise_rows(const float *x, int64_t first_row, const float *filt, const float *bias, float *y,
                       const rk_conv_params *p, int64_t row0, int64_t row1, const rk_epilogue *epilogue)
{
    dw_task t = { x, filt, bias, y, p, 1, row0, row1, 0, p->c, epilogue, first_row, row0 };
    dw_task_run(&t);
}
#endif
