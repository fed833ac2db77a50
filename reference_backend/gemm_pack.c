/*
 * The packing of the GEMM's operands (gemm.c): A micro-panels from a row-major matrix or, for a
 * convolution, from the implicit im2col matrix of its NHWC input (scaled per input channel where
 * the GEMM has an A scale), B micro-panels from either storage order; and the runs of input a
 * convolution's micro-kernel reads in place of a packed A panel.
 */
#include "kernels_internal.h"

/* The packers are inlined with MR/NR as literal constants so the inner loops
   get fixed trip counts. */
static inline __attribute__((always_inline)) void
pack_a_matrix_impl(const float *src, int64_t lda, int64_t rows, int64_t kc, float *dst, const int mr)
{
    if (rows == mr) {
        for (int64_t k = 0; k < kc; k++)
            for (int i = 0; i < mr; i++)
                dst[k * mr + i] = src[i * lda + k];
    } else {
        for (int64_t k = 0; k < kc; k++)
            for (int i = 0; i < mr; i++)
                dst[k * mr + i] = i < rows ? src[i * lda + k] : 0.0f;
    }
}

static void pack_a_matrix(const float *src, int64_t lda, int64_t rows, int64_t kc, float *dst, int mr)
{
    switch (mr) {
    case 14: pack_a_matrix_impl(src, lda, rows, kc, dst, 14); break;
    case 6: pack_a_matrix_impl(src, lda, rows, kc, dst, 6); break;
    case 4: pack_a_matrix_impl(src, lda, rows, kc, dst, 4); break;
    default: pack_a_matrix_impl(src, lda, rows, kc, dst, mr); break;
    }
}

static inline __attribute__((always_inline)) void
pack_a_conv_impl(const float *x, const rk_conv_params *p, int64_t row0, int64_t rows, int64_t k0, int64_t kc,
                 float *dst, const int mr)
{
    const int64_t ohw = p->oh * p->ow, C = p->c;
    const int64_t tap0 = k0 / C, ci0 = k0 - tap0 * C;
    for (int r = 0; r < mr; r++) {
        float *d = dst + r;
        if (r >= rows) {
            for (int64_t k = 0; k < kc; k++)
                d[k * mr] = 0.0f;
            continue;
        }
        int64_t q = row0 + r;
        int64_t bi = q / ohw, rem = q - bi * ohw;
        int64_t oy = rem / p->ow, ox = rem - oy * p->ow;
        int64_t iy0 = oy * p->stride_h - p->pad_top, ix0 = ox * p->stride_w - p->pad_left;
        const float *img = x + bi * p->h * p->w * C;
        int64_t ky = tap0 / p->kw, kx = tap0 - ky * p->kw, ci = ci0;
        int64_t k = 0;
        while (k < kc) {
            int64_t seg = min_i64(C - ci, kc - k);
            int64_t iy = iy0 + ky * p->dil_h, ix = ix0 + kx * p->dil_w;
            float *dd = d + k * mr;
            if (iy >= 0 && iy < p->h && ix >= 0 && ix < p->w) {
                const float *s = img + (iy * p->w + ix) * C + ci;
                for (int64_t t = 0; t < seg; t++)
                    dd[t * mr] = s[t];
            } else {
                for (int64_t t = 0; t < seg; t++)
                    dd[t * mr] = 0.0f;
            }
            k += seg;
            ci = 0;
            if (++kx == p->kw) {
                kx = 0;
                ky++;
            }
        }
    }
}

static void pack_a_conv(const float *x, const rk_conv_params *p, int64_t row0, int64_t rows, int64_t k0,
                        int64_t kc, float *dst, int mr)
{
    switch (mr) {
    case 14: pack_a_conv_impl(x, p, row0, rows, k0, kc, dst, 14); break;
    case 6: pack_a_conv_impl(x, p, row0, rows, k0, kc, dst, 6); break;
    case 4: pack_a_conv_impl(x, p, row0, rows, k0, kc, dst, 4); break;
    default: pack_a_conv_impl(x, p, row0, rows, k0, kc, dst, mr); break;
    }
}

/* Multiplies packed panel d (kc x mr, `rows` rows of A from row0, columns from k0) by op's
   A scale, each row by its image's: the products a Multiplication before the GEMM would have
   written, so the same bits. */
static inline __attribute__((always_inline)) void
scale_a_panel_impl(const gemm_op *op, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float *d, const int mr)
{
    const int64_t image = row0 / op->a_scale_rows;
    if (rows == mr && (row0 + rows - 1) / op->a_scale_rows == image) {
        const float *s = op->a_scale + image * op->a_scale_stride + k0;
        for (int64_t k = 0; k < kc; k++)
            for (int r = 0; r < mr; r++)
                d[k * mr + r] *= s[k];
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        const float *s = op->a_scale + (row0 + r) / op->a_scale_rows * op->a_scale_stride + k0;
        for (int64_t k = 0; k < kc; k++)
            d[k * mr + r] *= s[k];
    }
}

static void scale_a_panel(const gemm_op *op, int64_t row0, int64_t rows, int64_t k0, int64_t kc, float *d, int mr)
{
    switch (mr) {
    case 14: scale_a_panel_impl(op, row0, rows, k0, kc, d, 14); break;
    case 6: scale_a_panel_impl(op, row0, rows, k0, kc, d, 6); break;
    case 4: scale_a_panel_impl(op, row0, rows, k0, kc, d, 4); break;
    default: scale_a_panel_impl(op, row0, rows, k0, kc, d, mr); break;
    }
}

/* Packs rows [i0, i0+mc) x cols [k0, k0+kc) of A into ceil(mc/mr) micro-panels. */
void rk_gemm_pack_a(const gemm_op *op, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float *dst)
{
    const int mr = op->u->mr;
    for (int64_t ip = 0; ip < mc; ip += mr) {
        int64_t rows = min_i64(mr, mc - ip);
        float *d = dst + ip * kc;
        if (op->conv) {
            /* the vectorized packer loads 16 channels at a time: worth it from about 8 */
            if (op->u->pack_conv && mr <= 16 && op->conv->c >= 8) {
                op->u->pack_conv(op->a, op->conv, i0 + ip, rows, k0, kc, d, mr);
                continue;
            }
            pack_a_conv(op->a, op->conv, i0 + ip, rows, k0, kc, d, mr);
        }
        else if (op->u->pack_t) {
            /* scaled as it is packed where the panel's rows are of one image */
            const int64_t image = op->a_scale != NULL ? (i0 + ip) / op->a_scale_rows : 0;
            const int one = op->a_scale != NULL && (i0 + ip + rows - 1) / op->a_scale_rows == image;
            op->u->pack_t(op->a + (i0 + ip) * op->lda + k0, op->lda, rows, kc, d, mr,
                          one ? op->a_scale + image * op->a_scale_stride + k0 : NULL);
            if (op->a_scale != NULL && !one)
                scale_a_panel(op, i0 + ip, rows, k0, kc, d, mr);
        } else {
            pack_a_matrix(op->a + (i0 + ip) * op->lda + k0, op->lda, rows, kc, d, mr);
            if (op->a_scale != NULL)
                scale_a_panel(op, i0 + ip, rows, k0, kc, d, mr);
        }
    }
}

static inline __attribute__((always_inline)) void
pack_b_impl(const float *src, int64_t rsb, int64_t csb, int64_t cols, int64_t kc, float *dst, const int nr)
{
    if (csb == 1) {
        for (int64_t k = 0; k < kc; k++) {
            const float *s = src + k * rsb;
            float *d = dst + k * nr;
            if (cols == nr) {
                for (int j = 0; j < nr; j++)
                    d[j] = s[j];
            } else {
                for (int j = 0; j < nr; j++)
                    d[j] = j < cols ? s[j] : 0.0f;
            }
        }
    } else {
        /* Transposed source (e.g. [m, k] weights): go through the panel in
           16-step slices of k so the nr source lines being read and the
           16 x nr destination block both stay in L1. */
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
            const int64_t kn = min_i64(16, kc - k0);
            float *d = dst + k0 * nr;
            for (int64_t j = 0; j < cols; j++) {
                const float *s = src + j * csb + k0 * rsb;
                for (int64_t k = 0; k < kn; k++)
                    d[k * nr + j] = s[k * rsb];
            }
            for (int64_t j = cols; j < nr; j++)
                for (int64_t k = 0; k < kn; k++)
                    d[k * nr + j] = 0.0f;
        }
    }
}

/* Packs B rows [k0, k0+kc) x cols [j0, j0+nc) into ceil(nc/nr) micro-panels. */
void rk_gemm_pack_b_block(const gemm_op *op, int64_t j0, int64_t nc, int64_t k0, int64_t kc, float *dst)
{
    const int nr = op->u->nr;
    for (int64_t jp = 0; jp < nc; jp += nr) {
        int64_t cols = min_i64(nr, nc - jp);
        const float *s = op->b + k0 * op->rsb + (j0 + jp) * op->csb;
        float *d = dst + jp * kc;
        if (op->rsb == 1 && op->csb != 1 && op->u->pack_t) {
            /* [n, k] storage: each column of B is a contiguous source line */
            op->u->pack_t(s, op->csb, cols, kc, d, nr, NULL);
            continue;
        }
        switch (nr) {
        case 32: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, 32); break;
        case 16: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, 16); break;
        case 8: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, 8); break;
        default: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, nr); break;
        }
    }
}

int rk_conv_direct_segments(const rk_conv_params *p, int mr, int64_t row0, int64_t k0, int64_t kc,
                            const float *x, const float **seg, int64_t *len)
{
    const int64_t ohw = p->oh * p->ow, C = p->c;
    const int64_t bi = row0 / ohw, rem = row0 - bi * ohw, oy = rem / p->ow, ox = rem - oy * p->ow;
    if (ox + (mr - 1) >= p->ow)
        return -1;
    const int64_t iy0 = oy * p->stride_h - p->pad_top, ix0 = ox * p->stride_w - p->pad_left;
    const int64_t span = (mr - 1) * p->stride_w;
    const float *img = x + bi * p->h * p->w * C;
    /* where k0 falls: tap (ky, kx), channel ci; then the taps are walked without dividing */
    const int64_t tap0 = k0 / C;
    int64_t ci = k0 - tap0 * C, ky = tap0 / p->kw, kx = tap0 - ky * p->kw, k = 0;
    /* a whole window row is one run when its taps continue each other in memory */
    const int64_t row_run = p->dil_w == 1 ? p->kw * C : 0;
    const int row_fits = ix0 >= 0 && ix0 + (p->kw - 1) * p->dil_w + span < p->w;
    int n = 0;
    while (k < kc) {
        const int64_t iy = iy0 + ky * p->dil_h, ix = ix0 + kx * p->dil_w;
        if (iy < 0 || iy >= p->h)
            return -1;
        const float *at = img + (iy * p->w + ix) * C + ci;
        int64_t run;
        if (kx == 0 && ci == 0 && row_run > 0 && row_fits && kc - k >= row_run) {
            run = row_run; /* the whole row, its bounds checked once above */
            ky++;
        } else {
            if (ix < 0 || ix + span >= p->w)
                return -1;
            run = min_i64(C - ci, kc - k);
            ci = 0;
            if (++kx == p->kw) {
                kx = 0;
                ky++;
            }
        }
        if (n > 0 && seg[n - 1] + len[n - 1] == at) {
            len[n - 1] += run;          /* the next tap along the row continues the last run */
        } else {
            if (n == RK_DIRECT_MAX_SEGS)
                return -1;
            seg[n] = at;
            len[n++] = run;
        }
        k += run;
    }
    return n;
}

