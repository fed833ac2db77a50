/*
 * Convolution2d (as a GEMM over the implicit im2col matrix) and DepthwiseConvolution2d
 * (direct, channels in registers).
 */
#include "kernels_internal.h"

#include <math.h>

/* ------------------------------------------------------------------------- */
/* Convolution                                                               */
/* ------------------------------------------------------------------------- */

/*
 * rk_conv2d: y[n, oh, ow, o] = conv(x[n, h, w, c], filt[o, kh, kw, c]) + bias[o].
 * Preconditions: sizes >= 0 (o or an output dim of 0 does nothing), kh, kw,
 * c, strides and dilations >= 1, pads >= 0, oh/ow from the formula in
 * kernels.h; y does not alias the inputs.
 * GEMM with M = n*oh*ow, N = o, K = kh*kw*c; scratch as for gemm_run (for
 * typical layers about the size of the filter plus 0.5 MiB per thread).
 * Returns 1 if the scratch allocation fails.
 */
int rk_conv2d(const float *x, const float *filt, const float *bias, float *y, const rk_conv_params *p, int64_t o)
{
    return rk_conv2d_fused(x, filt, bias, y, p, o, NULL);
}

/*
 * A convolution of few channels (the RGB input layer) with padding: the GEMM's kernel reads
 * the input directly wherever a panel's windows lie inside the image, and the packer that
 * covers the border moves a few floats per tap, which made the border cost as much as the
 * rest. A zero-padded copy of the input (small: few channels) puts every window inside it.
 * Returns -1 when this does not apply (then nothing was done).
 */
typedef struct pad_copy {
    const float *x;
    float *xp;
    const rk_conv_params *p;
    int64_t hp, wp;
} pad_copy;

/* Rows [first, last) of the padded copy (over n * hp rows): the image's row with its left and
   right borders zeroed, or a zero row above or below the image. Every float is written once. */
static void pad_copy_rows(void *ctx, int64_t first, int64_t last)
{
    const pad_copy *t = (const pad_copy *)ctx;
    const rk_conv_params *p = t->p;
    const size_t c = (size_t)p->c, row = (size_t)t->wp * c;
    for (int64_t r = first; r < last; r++) {
        float *dst = t->xp + (size_t)r * row;
        const int64_t b = r / t->hp, iy = r % t->hp - p->pad_top;
        if (iy < 0 || iy >= p->h) {
            memset(dst, 0, row * sizeof(float));
            continue;
        }
        memset(dst, 0, (size_t)p->pad_left * c * sizeof(float));
        memcpy(dst + (size_t)p->pad_left * c, t->x + (b * p->h + iy) * p->w * p->c,
               (size_t)p->w * c * sizeof(float));
        memset(dst + (size_t)(p->pad_left + p->w) * c, 0, (size_t)p->pad_right * c * sizeof(float));
    }
}

static int conv_few_channels_padded(const float *x, const float *filt, const float *packed,
                                    const float *bias, float *y, const rk_conv_params *p, int64_t o,
                                    const rk_epilogue *epilogue, int threads)
{
    if (p->c >= 8 || (p->pad_top | p->pad_bottom | p->pad_left | p->pad_right) == 0)
        return -1;
    const int64_t hp = p->h + p->pad_top + p->pad_bottom, wp = p->w + p->pad_left + p->pad_right;
    const int64_t padded = p->n * hp * wp * p->c;
    if (padded > 4 * p->n * p->h * p->w * p->c + 65536)
        return -1;
    float *xp = (float *)alloc_aligned((size_t)padded * sizeof(float));
    if (xp == NULL)
        return 1;
    /* on the convolution's threads (the step's decision), which read it next */
    pad_copy copy = { x, xp, p, hp, wp };
    const int nt = threads > 0 ? threads : rk_threads_for((double)padded, RK_COPY_MIN_PER_THREAD);
    rk_parallel_for_threads(p->n * hp, 8, nt, pad_copy_rows, &copy);
    rk_conv_params q = *p;
    q.h = hp;
    q.w = wp;
    q.pad_top = q.pad_bottom = q.pad_left = q.pad_right = 0;
    gemm_op op;
    memset(&op, 0, sizeof op);
    op.u = rk_gemm_kernel();
    op.m = q.n * q.oh * q.ow;
    op.n = o;
    op.k = q.kh * q.kw * q.c;
    op.a = xp;
    op.conv = &q;
    op.b = filt;
    op.rsb = 1;
    op.csb = op.k;
    op.bpacked = packed;
    op.bias = bias;
    op.c = y;
    op.ldc = o;
    op.epilogue = epilogue;
    op.threads = threads;
    int failed = rk_gemm_run(&op);
    free(xp);
    return failed;
}

int rk_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                    const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue)
{
    return rk_conv2d_packed(x, filt, NULL, bias, y, p, o, epilogue, 0);
}

float *rk_pack_weights(const float *b, int64_t rsb, int64_t csb, int64_t k, int64_t n)
{
    gemm_op op;
    memset(&op, 0, sizeof op);
    op.u = rk_gemm_kernel();
    op.b = b;
    op.rsb = rsb;
    op.csb = csb;
    op.k = k;
    op.n = n;
    float *packed = (float *)alloc_aligned((size_t)rk_gemm_packed_b_floats(op.u, k, n) * sizeof(float));
    if (packed != NULL)
        rk_gemm_pack_b(&op, packed);
    return packed;
}

float *rk_pack_conv_weights(const float *filt, const rk_conv_params *p, int64_t o)
{
    const int tile = rk_winograd_tile(p, o);
    if (tile != 0)
        return rk_winograd_pack(filt, p, o, tile);
    const int64_t depth = p->kh * p->kw * p->c;
    return rk_pack_weights(filt, 1, depth, depth, o);
}

int rk_conv_is_pointwise(const rk_conv_params *p)
{
    return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 &&
           p->pad_left == 0 && p->oh == p->h && p->ow == p->w;
}

int rk_conv_streams_weights(const rk_conv_params *p)
{
    return rk_conv_is_pointwise(p) && p->c > 0 && !rk_fully_connected_uses_packed(p->n * p->h * p->w);
}

/* A convolution as the GEMM: A the implicit im2col matrix of the NHWC input (for a pointwise
   convolution the input itself, [pixels, c]), B the filter [o, kh*kw*c] transposed; with scale
   (a pointwise convolution only), image b's channel c of the input times
   scale[b * scale_stride + c], applied as the A panels are packed. */
static int conv_gemm(const float *x, const float *scale, int64_t scale_stride, const float *filt,
                     const float *packed, const float *bias, float *y, const rk_conv_params *p, int64_t o,
                     const rk_epilogue *epilogue, int threads)
{
    gemm_op op;
    memset(&op, 0, sizeof op);
    op.u = rk_gemm_kernel();
    op.m = p->n * p->oh * p->ow;
    op.n = o;
    op.k = p->kh * p->kw * p->c;
    rk_conv_params row;
    op.a = x;
    if (rk_conv_is_pointwise(p)) {
        /* pointwise: the NHWC input already is the [pixels, c] matrix. Described as a 1x1
           convolution over one row of n*h*w pixels, so that where one micro-panel of B covers
           the output channels (a projection to few channels), the kernel reads the rows of
           that matrix directly instead of packing each A panel for a single use (never
           scaled rows: those are packed) */
        op.lda = p->c;
        if (scale == NULL && o <= op.u->nr && op.u->direct != NULL) {
            row = *p;
            row.n = row.h = row.oh = 1;
            row.w = row.ow = op.m;
            op.conv = &row;
        }
        op.a_scale = scale;
        op.a_scale_rows = p->h * p->w;
        op.a_scale_stride = scale_stride;
    } else {
        op.conv = p;
    }
    /* filt [o, kh*kw*c] is B transposed */
    op.b = filt;
    op.rsb = 1;
    op.csb = op.k;
    op.bpacked = packed;
    op.bias = bias;
    op.c = y;
    op.ldc = o;
    op.epilogue = epilogue;
    op.threads = threads;
    return rk_gemm_run(&op);
}

int rk_conv2d_packed(const float *x, const float *filt, const float *packed, const float *bias,
                     float *y, const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue,
                     int threads)
{
    /* a pointwise convolution of a few pixels (a squeeze-and-excitation block's, on a pooled
       1 x 1 image) is a fully connected layer of as many rows: its weights [o, c] streamed once
       rather than a GEMM whose micro-tiles would be mostly empty rows */
    if (rk_conv_streams_weights(p))
        return rk_fully_connected_packed(x, filt, NULL, bias, y, p->n * p->h * p->w, p->c, o, 1,
                                         epilogue, threads);
    /* the Winograd convolution only with its filter transformed beforehand (a transform
       on every call would cost more than it saves for one call) */
    const int tile = packed != NULL ? rk_winograd_tile(p, o) : 0;
    if (tile != 0)
        return rk_winograd_conv(x, packed, bias, y, p, o, tile, epilogue, threads);
    const int few = conv_few_channels_padded(x, filt, packed, bias, y, p, o, epilogue, threads);
    if (few >= 0)
        return few;
    return conv_gemm(x, NULL, 0, filt, packed, bias, y, p, o, epilogue, threads);
}

int rk_conv_residual_in_place(const rk_conv_params *p, int64_t o, int packed)
{
    /* the routes of rk_conv2d_packed: all but the streamed and the Winograd ones end in
       conv_gemm (the few-channel copy only copies x) */
    if (rk_conv_streams_weights(p) || (packed && rk_winograd_tile(p, o) != 0))
        return 0;
    return rk_gemm_in_place(rk_gemm_kernel(), p->kh * p->kw * p->c);
}

int rk_conv_takes_scale(const rk_conv_params *p)
{
    return rk_conv_is_pointwise(p) && !rk_conv_streams_weights(p);
}

int rk_conv2d_scaled(const float *x, const float *scale, int64_t scale_stride, const float *filt,
                     const float *packed, const float *bias, float *y, const rk_conv_params *p, int64_t o,
                     const rk_epilogue *epilogue, int threads)
{
    if (!rk_conv_takes_scale(p))
        return 0;
    return conv_gemm(x, scale, scale_stride, filt, packed, bias, y, p, o, epilogue, threads);
}

/* ------------------------------------------------------------------------- */
/* Depthwise convolution                                                     */
/* ------------------------------------------------------------------------- */

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
