/*
 * Convolution2d as a GEMM over the implicit im2col matrix (or the Winograd convolution, for
 * the 3 x 3 layers it pays for); DepthwiseConvolution2d is convolution_depthwise.c.
 */
#include "kernels_internal.h"

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
 * The copy can also be made from the image's planes (x [n, c, h, w], as a network is given
 * it): then no channels-last copy of the input is ever written (rk_conv2d_channels_first).
 */
typedef struct pad_copy {
    const float *x;
    float *xp;
    const rk_conv_params *p;
    int64_t hp, wp;
    int planar;     /* x is [n, c, h, w] */
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
        if (t->planar)
            rk_interleave_planes(t->x + (b * p->c * p->h + iy) * p->w, p->h * p->w, p->c,
                                 dst + (size_t)p->pad_left * c, p->w);
        else
            memcpy(dst + (size_t)p->pad_left * c, t->x + (b * p->h + iy) * p->w * p->c,
                   (size_t)p->w * c * sizeof(float));
        memset(dst + (size_t)(p->pad_left + p->w) * c, 0, (size_t)p->pad_right * c * sizeof(float));
    }
}

/* Whether the padded copy applies: few channels, some padding, and a copy at most four times
   the input (plus 64 K floats). */
static int few_channels_padded(const rk_conv_params *p)
{
    const int64_t hp = p->h + p->pad_top + p->pad_bottom, wp = p->w + p->pad_left + p->pad_right;
    return p->c < 8 && (p->pad_top | p->pad_bottom | p->pad_left | p->pad_right) != 0 &&
           p->n * hp * wp * p->c <= 4 * p->n * p->h * p->w * p->c + 65536;
}

static int conv_few_channels_padded(const float *x, int planar, const float *filt, const float *packed,
                                    const float *bias, float *y, const rk_conv_params *p, int64_t o,
                                    const rk_epilogue *epilogue, int threads)
{
    if (!few_channels_padded(p))
        return -1;
    const int64_t hp = p->h + p->pad_top + p->pad_bottom, wp = p->w + p->pad_left + p->pad_right;
    const int64_t padded = p->n * hp * wp * p->c;
    float *xp = (float *)alloc_aligned((size_t)padded * sizeof(float));
    if (xp == NULL)
        return 1;
    /* on the convolution's threads (the step's decision), which read it next */
    pad_copy copy = { x, xp, p, hp, wp, planar };
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
           convolution over one row of n*h*w pixels, so that where a few micro-panels of B
           cover the output channels, the kernel reads the rows of that matrix directly
           instead of packing A panels for a few uses (gemm_unit; never scaled rows: those
           are packed) */
        op.lda = p->c;
        if (scale == NULL && o <= RK_DIRECT_POINTWISE_PANELS * op.u->nr && op.u->direct != NULL) {
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
    const int few = conv_few_channels_padded(x, 0, filt, packed, bias, y, p, o, epilogue, threads);
    if (few >= 0)
        return few;
    return conv_gemm(x, NULL, 0, filt, packed, bias, y, p, o, epilogue, threads);
}

int rk_conv_reads_channels_first(const rk_conv_params *p, int64_t o, int packed)
{
    /* the routes of rk_conv2d_packed before the padded copy */
    return !rk_conv_streams_weights(p) && !(packed && rk_winograd_tile(p, o) != 0) && few_channels_padded(p);
}

int rk_conv2d_channels_first(const float *x, const float *filt, const float *packed, const float *bias,
                             float *y, const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue,
                             int threads)
{
    if (!rk_conv_reads_channels_first(p, o, packed != NULL))
        return -1;
    return conv_few_channels_padded(x, 1, filt, packed, bias, y, p, o, epilogue, threads);
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
