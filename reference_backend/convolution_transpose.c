/*
 * TransposeConvolution2d (ONNX's ConvTranspose, NHWC): each input pixel scatters its kernel,
 * weighted by its channels, into the output. As a GEMM: x [pixels, C/g] times the weights
 * [C/g, kh * kw * O/g] of each group gives every pixel's contribution to every tap (the
 * "columns"), which a col2im pass then adds into the output. The columns of a band of input
 * rows at a time bound the scratch; the col2im pass is split by output rows, each gathering
 * from the taps that reach it, so that threads never add into the same place.
 */
#include "kernels_internal.h"

#define TC_BAND_BYTES ((int64_t)8 << 20)   /* the columns of one band of input rows, nominal */

typedef struct tc_call {
    const float *x, *w, *bias;
    float *y;
    const rk_conv_params *p;
    int64_t o, groups, cin, cout, k2;      /* k2: taps * O/g, the columns of one group */
    const float *col;                      /* [band pixels][groups][taps][O/g] */
    int64_t bi, iy0, iy1;                  /* the band: image, input rows */
    int64_t oy0;                           /* tc_add_rows: the first output row it reaches */
} tc_call;

/* Output rows [begin, end) of image bi: bias, before any band adds to them. */
static void tc_init_rows(void *ctx, int64_t begin, int64_t end)
{
    const tc_call *c = ctx;
    for (int64_t px = begin * c->p->ow; px < end * c->p->ow; px++) {
        float *out = c->y + px * c->o;
        if (c->bias != NULL)
            memcpy(out, c->bias, (size_t)c->o * sizeof(float));
        else
            memset(out, 0, (size_t)c->o * sizeof(float));
    }
}

/* The index i with i * stride + tap * dil == t, when there is one in [lo, hi). */
static inline int64_t tc_source(int64_t t, int64_t tap, int64_t dil, int64_t stride, int64_t lo, int64_t hi)
{
    const int64_t u = t - tap * dil;
    if (u < 0 || u % stride != 0)
        return -1;
    const int64_t i = u / stride;
    return i >= lo && i < hi ? i : -1;
}

/* Output rows [begin, end) of image bi gather what the band's input rows give them. */
static void tc_add_rows(void *ctx, int64_t begin, int64_t end)
{
    const tc_call *c = ctx;
    const rk_conv_params *p = c->p;
    const int64_t ldcol = c->groups * c->k2;
    for (int64_t oy = c->oy0 + begin; oy < c->oy0 + end; oy++) {
        for (int64_t ky = 0; ky < p->kh; ky++) {
            const int64_t iy = tc_source(oy + p->pad_top, ky, p->dil_h, p->stride_h, c->iy0, c->iy1);
            if (iy < 0)
                continue;
            float *orow = c->y + ((c->bi * p->oh + oy) * p->ow) * c->o;
            for (int64_t ox = 0; ox < p->ow; ox++) {
                float *out = orow + ox * c->o;
                for (int64_t kx = 0; kx < p->kw; kx++) {
                    const int64_t ix = tc_source(ox + p->pad_left, kx, p->dil_w, p->stride_w, 0, p->w);
                    if (ix < 0)
                        continue;
                    const float *col = c->col + ((iy - c->iy0) * p->w + ix) * ldcol + (ky * p->kw + kx) * c->cout;
                    for (int64_t g = 0; g < c->groups; g++) {
                        const float *src = col + g * c->k2;
                        float *dst = out + g * c->cout;
                        for (int64_t j = 0; j < c->cout; j++)
                            dst[j] += src[j];
                    }
                }
            }
        }
    }
}

/*
 * rk_transpose_conv2d: x [n, h, w, c]; filt [c, kh, kw, o / groups]; bias [o] or NULL;
 * y [n, oh, ow, o] with oh = stride_h * (h - 1) + output_padding + (kh - 1) * dil_h + 1 -
 * pad_top - pad_bottom (the caller's, in p->oh; likewise ow); groups divides c and o.
 * Scratch: the columns of a band of input rows (about 8 MiB, at least one row's) and the
 * GEMM's; returns 1 if an allocation fails.
 */
int rk_transpose_conv2d(const float *x, const float *filt, const float *bias, float *y,
                        const rk_conv_params *p, int64_t o, int64_t groups)
{
    if (p->n <= 0 || p->oh <= 0 || p->ow <= 0 || o <= 0)
        return 0;
    tc_call c = { x, filt, bias, y, p, o, groups, p->c / groups, o / groups,
                  p->kh * p->kw * (o / groups), NULL, 0, 0, 0, 0 };
    const int64_t row_floats = p->w * groups * c.k2;
    const int64_t band = max_i64(1, min_i64(p->h, TC_BAND_BYTES / ((int64_t)sizeof(float) * row_floats)));
    float *col = (float *)alloc_aligned((size_t)(band * row_floats) * sizeof(float));
    if (col == NULL)
        return 1;
    c.col = col;
    const double add_work = (double)p->ow * (double)p->kh * (double)p->kw * (double)o;
    for (int64_t bi = 0; bi < p->n; bi++) {
        c.bi = bi;
        {
            tc_call init = c;
            init.y = y + bi * p->oh * p->ow * o;
            rk_parallel_for(p->oh, 1, (double)(p->ow * o), RK_COPY_MIN_PER_THREAD, tc_init_rows, &init);
        }
        for (int64_t iy0 = 0; iy0 < p->h; iy0 += band) {
            const int64_t iy1 = min_i64(p->h, iy0 + band);
            for (int64_t g = 0; g < groups; g++) {
                gemm_op op;
                memset(&op, 0, sizeof op);
                op.u = rk_gemm_kernel();
                op.a = x + ((bi * p->h + iy0) * p->w) * p->c + g * c.cin;
                op.lda = p->c;
                op.b = filt + g * c.cin * c.k2;    /* [cin, k2] rows of this group */
                op.rsb = c.k2;
                op.csb = 1;
                op.c = col + g * c.k2;
                op.ldc = groups * c.k2;
                op.m = (iy1 - iy0) * p->w;
                op.n = c.k2;
                op.k = c.cin;
                if (rk_gemm_run(&op) != 0) {
                    free(col);
                    return 1;
                }
            }
            c.iy0 = iy0;
            c.iy1 = iy1;
            /* only the output rows this band reaches */
            const int64_t first = max_i64(0, iy0 * p->stride_h - p->pad_top);
            const int64_t last = min_i64(p->oh, (iy1 - 1) * p->stride_h + (p->kh - 1) * p->dil_h - p->pad_top + 1);
            if (last > first) {
                c.oy0 = first;
                rk_parallel_for(last - first, 1, add_work, RK_SMALL_MIN_WORK_PER_THREAD, tc_add_rows, &c);
            }
        }
    }
    free(col);
    return 0;
}
