/*
 * Winograd convolution F(m x m, 3 x 3) for 3 x 3, stride 1, dilation 1 convolutions (NHWC,
 * groups 1): each m x m block of output pixels ("tile") comes from an (m + 2) x (m + 2) block
 * of input, transformed (B^T d B), multiplied element by element with the transformed filter
 * (G g G^T) and summed over the input channels, then transformed back (A^T M A). Summing over
 * the channels is, for each of the a * a = (m + 2)^2 transform positions, a matrix product
 * [tiles x c] * [c x o], run on the GEMM's micro-kernels with the filters transformed and
 * packed once (rk_winograd_pack). m = 4 needs 36 products of 4 x 4 tiles where the GEMM does
 * 9 x 16 multiply-adds: 4x fewer; m = 2, 16 for 9 x 4: 2.25x fewer, with smaller transforms.
 *
 * Work is split into items of a micro-panel of tiles x a chunk of output channels: an item
 * transforms its tiles' input (into a per-thread buffer, kept while the thread's next item
 * has the same tiles), runs the a * a products for its channels and transforms back, adding
 * the bias and the fused epilogue while the output is in cache.
 */
#include "kernels_internal.h"

#include <stdatomic.h>

/* Per-thread bound on the products (a * a * micro-panel of tiles * output channels, at least one
   micro-panel of channels): about the L2 cache. */
#define RK_WINO_BUFFER_BYTES ((int64_t)1 << 20)
#define RK_WINO_LANES 16

/*
 * The one place that decides which convolutions take this path and with which tile: 3 x 3,
 * stride 1, dilation 1, channels enough that the products dominate the transforms; then the
 * cheapest of the GEMM and the two tiles by a cost per output channel and input channel:
 * (transform positions) x (rows of the products, rounded up to whole micro-panels, plus
 * RK_WINO_WEIGHT_ROWS for reading the filter's packed values, which come from memory in a
 * network whose weights exceed the caches). Measured on ResNet's layers (AVX-512, one and two
 * threads): 56 x 56 and 28 x 28 take m = 4, 14 x 14 m = 2, 7 x 7 (one image) the GEMM.
 */
#ifndef RK_WINO_WEIGHT_ROWS
#define RK_WINO_WEIGHT_ROWS 28
#endif

int rk_winograd_tile(const rk_conv_params *p, int64_t o)
{
    if (p->kh != 3 || p->kw != 3 || p->stride_h != 1 || p->stride_w != 1 || p->dil_h != 1 ||
        p->dil_w != 1)
        return 0;
#if defined(RK_WINOGRAD_ALWAYS)
    /* test hook (compile time only): every such convolution, of any size, with this tile */
    (void)o;
    return RK_WINOGRAD_ALWAYS;
#endif
    if (p->c < 16 || o < 16)
        return 0;
    const int64_t mr = rk_gemm_kernel()->mr;
    const double rows = (double)(ceil_div(p->n * p->oh * p->ow, mr) * mr);
    double best = 9.0 * (rows + RK_WINO_WEIGHT_ROWS);
    int tile = 0;
    for (int m = 2; m <= 4; m += 2) {
        const int64_t tiles = p->n * ceil_div(p->oh, m) * ceil_div(p->ow, m);
        const double cost = (double)((m + 2) * (m + 2)) *
                            ((double)(ceil_div(tiles, mr) * mr) + RK_WINO_WEIGHT_ROWS);
        if (cost < best) {
            best = cost;
            tile = m;
        }
    }
    return tile;
}

/* Transform matrices (Lavin and Gray's): G for the filter; B^T and A^T are applied in their
   factored forms by the vector code below. */
static const double G4[6][3] = { { 1.0 / 4, 0, 0 },
                                 { -1.0 / 6, -1.0 / 6, -1.0 / 6 },
                                 { -1.0 / 6, 1.0 / 6, -1.0 / 6 },
                                 { 1.0 / 24, 1.0 / 12, 1.0 / 6 },
                                 { 1.0 / 24, -1.0 / 12, 1.0 / 6 },
                                 { 0, 0, 1 } };
static const double G2[4][3] = { { 1, 0, 0 }, { 0.5, 0.5, 0.5 }, { 0.5, -0.5, 0.5 }, { 0, 0, 1 } };

/* Floats of the packed transformed filter: a * a GEMM B operands [c x o]; 0 on overflow. */
static size_t packed_floats(const ukr_desc *u, int m, int64_t c, int64_t o)
{
    size_t all;
    if (c <= 0 || o <= 0 || c > INT64_MAX / (o + u->nr) ||
        __builtin_mul_overflow((size_t)rk_gemm_packed_b_floats(u, c, o),
                               (size_t)((m + 2) * (m + 2)), &all) ||
        all > SIZE_MAX / sizeof(float))
        return 0;
    return all;
}

float *rk_winograd_pack(const float *filt, const rk_conv_params *p, int64_t o, int m)
{
    const ukr_desc *u = rk_gemm_kernel();
    const int a = m + 2;
    const int64_t c = p->c;
    const size_t total = packed_floats(u, m, c, o);
    if (total == 0)
        return NULL;
    const int64_t one = rk_gemm_packed_b_floats(u, c, o);
    float *packed = (float *)alloc_aligned(total * sizeof(float));
    /* no larger than the packed form: its B operands are at least c x o each */
    float *u_all = (float *)malloc((size_t)a * a * (size_t)c * (size_t)o * sizeof(float));
    if (packed == NULL || u_all == NULL) {
        free(packed);
        free(u_all);
        return NULL;
    }
    /* u_all[e][ci][oc] = (G g G^T)[e] for the filter g of oc over input channel ci */
    for (int64_t oc = 0; oc < o; oc++) {
        for (int64_t ci = 0; ci < c; ci++) {
            double g[3][3], t[6][3];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    g[i][j] = filt[((oc * 3 + i) * 3 + j) * c + ci];
            for (int r = 0; r < a; r++)
                for (int j = 0; j < 3; j++) {
                    const double *gr = m == 4 ? G4[r] : G2[r];
                    t[r][j] = gr[0] * g[0][j] + gr[1] * g[1][j] + gr[2] * g[2][j];
                }
            for (int r = 0; r < a; r++)
                for (int s = 0; s < a; s++) {
                    const double *gs = m == 4 ? G4[s] : G2[s];
                    const double v = t[r][0] * gs[0] + t[r][1] * gs[1] + t[r][2] * gs[2];
                    u_all[((int64_t)(r * a + s) * c + ci) * o + oc] = (float)v;
                }
        }
    }
    gemm_op op;
    memset(&op, 0, sizeof op);
    op.u = u;
    op.rsb = o;
    op.csb = 1;
    op.k = c;
    op.n = o;
    for (int e = 0; e < a * a; e++) {
        op.b = u_all + (int64_t)e * c * o;
        rk_gemm_pack_b(&op, packed + (int64_t)e * one);
    }
    free(u_all);
    return packed;
}

/* ---- transforms, vectorized over 16 channels ---------------------------------------------- */

typedef float wv __attribute__((vector_size(RK_WINO_LANES * sizeof(float))));
#define WV_LOAD(v, ptr) memcpy(&(v), (ptr), sizeof(wv))
#define WV_STORE(ptr, v) memcpy((ptr), &(v), sizeof(wv))

/* dst[e * estride] = (B^T d B)[e] with d[i][j] read at src[i * a + j] (16 channels each). */
static inline __attribute__((always_inline)) void
input_tile(const float *const *src, float *dst, int64_t estride, const int m)
{
    if (m == 4) {
        wv d[6][6], t[6][6];
        for (int i = 0; i < 36; i++)
            WV_LOAD(d[i / 6][i % 6], src[i]);
        for (int j = 0; j < 6; j++) {
            const wv a = d[4][j] - 4.0f * d[2][j], b = d[3][j] - 4.0f * d[1][j];
            const wv c = d[4][j] - d[2][j], e = 2.0f * (d[3][j] - d[1][j]);
            t[0][j] = 4.0f * d[0][j] - 5.0f * d[2][j] + d[4][j];
            t[1][j] = a + b;
            t[2][j] = a - b;
            t[3][j] = c + e;
            t[4][j] = c - e;
            t[5][j] = 4.0f * d[1][j] - 5.0f * d[3][j] + d[5][j];
        }
        for (int i = 0; i < 6; i++) {
            const wv *r = t[i];
            const wv a = r[4] - 4.0f * r[2], b = r[3] - 4.0f * r[1];
            const wv c = r[4] - r[2], e = 2.0f * (r[3] - r[1]);
            wv o[6];
            o[0] = 4.0f * r[0] - 5.0f * r[2] + r[4];
            o[1] = a + b;
            o[2] = a - b;
            o[3] = c + e;
            o[4] = c - e;
            o[5] = 4.0f * r[1] - 5.0f * r[3] + r[5];
            for (int j = 0; j < 6; j++)
                WV_STORE(dst + (i * 6 + j) * estride, o[j]);
        }
    } else {
        wv d[4][4], t[4][4];
        for (int i = 0; i < 16; i++)
            WV_LOAD(d[i / 4][i % 4], src[i]);
        for (int j = 0; j < 4; j++) {
            t[0][j] = d[0][j] - d[2][j];
            t[1][j] = d[1][j] + d[2][j];
            t[2][j] = d[2][j] - d[1][j];
            t[3][j] = d[1][j] - d[3][j];
        }
        for (int i = 0; i < 4; i++) {
            wv o[4];
            o[0] = t[i][0] - t[i][2];
            o[1] = t[i][1] + t[i][2];
            o[2] = t[i][2] - t[i][1];
            o[3] = t[i][1] - t[i][3];
            for (int j = 0; j < 4; j++)
                WV_STORE(dst + (i * 4 + j) * estride, o[j]);
        }
    }
}

/* out[i * m + j] = (A^T M A)[i][j] + bias with M[e] read at src[e * estride]. */
static inline __attribute__((always_inline)) void
output_tile(const float *src, int64_t estride, const float *bias, float *out, const int m)
{
    wv b;
    WV_LOAD(b, bias);
    if (m == 4) {
        wv t[4][6];
        for (int j = 0; j < 6; j++) {
            wv v[6];
            for (int i = 0; i < 6; i++)
                WV_LOAD(v[i], src + (i * 6 + j) * estride);
            const wv s12 = v[1] + v[2], d12 = v[1] - v[2], s34 = v[3] + v[4], d34 = v[3] - v[4];
            t[0][j] = v[0] + s12 + s34;
            t[1][j] = d12 + 2.0f * d34;
            t[2][j] = s12 + 4.0f * s34;
            t[3][j] = d12 + 8.0f * d34 + v[5];
        }
        for (int i = 0; i < 4; i++) {
            const wv *v = t[i];
            const wv s12 = v[1] + v[2], d12 = v[1] - v[2], s34 = v[3] + v[4], d34 = v[3] - v[4];
            const wv o0 = v[0] + s12 + s34 + b, o1 = d12 + 2.0f * d34 + b;
            const wv o2 = s12 + 4.0f * s34 + b, o3 = d12 + 8.0f * d34 + v[5] + b;
            WV_STORE(out + (i * 4 + 0) * RK_WINO_LANES, o0);
            WV_STORE(out + (i * 4 + 1) * RK_WINO_LANES, o1);
            WV_STORE(out + (i * 4 + 2) * RK_WINO_LANES, o2);
            WV_STORE(out + (i * 4 + 3) * RK_WINO_LANES, o3);
        }
    } else {
        wv t[2][4];
        for (int j = 0; j < 4; j++) {
            wv v[4];
            for (int i = 0; i < 4; i++)
                WV_LOAD(v[i], src + (i * 4 + j) * estride);
            t[0][j] = v[0] + v[1] + v[2];
            t[1][j] = v[1] - v[2] - v[3];
        }
        for (int i = 0; i < 2; i++) {
            const wv o0 = t[i][0] + t[i][1] + t[i][2] + b, o1 = t[i][1] - t[i][2] - t[i][3] + b;
            WV_STORE(out + (i * 2 + 0) * RK_WINO_LANES, o0);
            WV_STORE(out + (i * 2 + 1) * RK_WINO_LANES, o1);
        }
    }
}

/* ---- the convolution ---------------------------------------------------------------------- */

typedef struct wino_shared {
    const float *x, *packed;
    float *y;
    const rk_conv_params *p;
    const rk_epilogue *epilogue;
    const ukr_desc *u;
    const float *bias;      /* os floats, zero past o */
    int64_t o, m, a;
    int64_t tw, thw, tiles; /* tiles along a row, per image, in all */
    int64_t cs, os;         /* input channels, output channels: rounded up to whole vectors */
    int64_t tb, cw;         /* tiles per block (one micro-panel: mr), output channels per chunk */
    int64_t kc, b_one;      /* the packed filter's K block and floats per transform position */
    int64_t ncols, items;
    float *scratch;         /* per thread: transformed input, products, packed A */
    size_t v_floats, m_floats, a_floats;
    atomic_llong next;
} wino_shared;

typedef struct wino_task {
    wino_shared *sh;
    int id;
} wino_task;

typedef struct wino_isa {
    void (*input)(const wino_shared *sh, int64_t t0, int64_t count, float *v);
    void (*output)(const wino_shared *sh, int64_t t0, int64_t count, int64_t j0, int64_t j1,
                   const float *prod);
} wino_isa;

static const float g_zeros[RK_WINO_LANES] __attribute__((aligned(64)));

/* Tiles [t0, t0 + count) transformed into v[e][tile][cs]. */
static inline __attribute__((always_inline)) void
input_block_impl(const wino_shared *sh, int64_t t0, int64_t count, float *v, const int m)
{
    enum { A2_MAX = 36 };
    const rk_conv_params *p = sh->p;
    const int a = m + 2;
    const int64_t C = p->c, estride = sh->tb * sh->cs;
    float edge[A2_MAX][RK_WINO_LANES] __attribute__((aligned(64)));
    for (int64_t t = 0; t < count; t++) {
        const int64_t tile = t0 + t, b = tile / sh->thw, r = tile - b * sh->thw;
        const int64_t iy0 = r / sh->tw * m - p->pad_top, ix0 = r % sh->tw * m - p->pad_left;
        const float *img = sh->x + b * p->h * p->w * C;
        const float *at[A2_MAX];
        for (int i = 0; i < a; i++)
            for (int j = 0; j < a; j++) {
                const int64_t iy = iy0 + i, ix = ix0 + j;
                at[i * a + j] = iy >= 0 && iy < p->h && ix >= 0 && ix < p->w
                                    ? img + (iy * p->w + ix) * C : NULL;
            }
        for (int64_t cg = 0; cg < C; cg += RK_WINO_LANES) {
            const float *src[A2_MAX];
            const int64_t n = min_i64(RK_WINO_LANES, C - cg);
            for (int k = 0; k < a * a; k++) {
                if (at[k] == NULL) {
                    src[k] = g_zeros;
                } else if (n == RK_WINO_LANES) {
                    src[k] = at[k] + cg;
                } else {
                    /* the last channels: a whole vector would read past the image */
                    memset(edge[k], 0, sizeof edge[k]);
                    memcpy(edge[k], at[k] + cg, (size_t)n * sizeof(float));
                    src[k] = edge[k];
                }
            }
            input_tile(src, v + t * sh->cs + cg, estride, m);
        }
    }
}

/* The products prod[e][tile][cw] of tiles [t0, t0 + count), channels [j0, j1), transformed
   back into y with the bias and the epilogue. */
static inline __attribute__((always_inline)) void
output_block_impl(const wino_shared *sh, int64_t t0, int64_t count, int64_t j0, int64_t j1,
                  const float *prod, const int m)
{
    const rk_conv_params *p = sh->p;
    const int64_t O = sh->o, estride = sh->tb * sh->cw, last = min_i64(j1, O);
    float out[16 * RK_WINO_LANES] __attribute__((aligned(64)));
    for (int64_t t = 0; t < count; t++) {
        const int64_t tile = t0 + t, b = tile / sh->thw, r = tile - b * sh->thw;
        const int64_t oy0 = r / sh->tw * m, ox0 = r % sh->tw * m;
        const int64_t rows = min_i64(m, p->oh - oy0), cols = min_i64(m, p->ow - ox0);
        const int64_t pix0 = (b * p->oh + oy0) * p->ow + ox0;
        for (int64_t og = j0; og < last; og += RK_WINO_LANES) {
            output_tile(prod + t * sh->cw + (og - j0), estride, sh->bias + og, out, m);
            const int64_t n = min_i64(RK_WINO_LANES, last - og);
            for (int64_t i = 0; i < rows; i++) {
                float *dst = sh->y + (pix0 + i * p->ow) * O + og;
                const float *src = out + i * m * RK_WINO_LANES;
                if (n == RK_WINO_LANES) /* a constant size: vector moves, not calls */
                    for (int64_t j = 0; j < cols; j++)
                        memcpy(dst + j * O, src + j * RK_WINO_LANES, sizeof(wv));
                else
                    for (int64_t j = 0; j < cols; j++)
                        memcpy(dst + j * O, src + j * RK_WINO_LANES, (size_t)n * sizeof(float));
            }
        }
        if (sh->epilogue != NULL)
            for (int64_t i = 0; i < rows; i++)
                rk_apply_epilogue(sh->epilogue, sh->y + (pix0 + i * p->ow) * O + j0, O,
                                  pix0 + i * p->ow, j0, cols, last - j0);
    }
}

#define RK_WINO_ISA(suffix, attr)                                                               \
    attr static void input_block_##suffix(const wino_shared *sh, int64_t t0, int64_t count,     \
                                          float *v)                                             \
    {                                                                                           \
        if (sh->m == 4)                                                                         \
            input_block_impl(sh, t0, count, v, 4);                                              \
        else                                                                                    \
            input_block_impl(sh, t0, count, v, 2);                                              \
    }                                                                                           \
    attr static void output_block_##suffix(const wino_shared *sh, int64_t t0, int64_t count,    \
                                           int64_t j0, int64_t j1, const float *prod)           \
    {                                                                                           \
        if (sh->m == 4)                                                                         \
            output_block_impl(sh, t0, count, j0, j1, prod, 4);                                  \
        else                                                                                    \
            output_block_impl(sh, t0, count, j0, j1, prod, 2);                                  \
    }                                                                                           \
    static const wino_isa wino_##suffix = { input_block_##suffix, output_block_##suffix };

RK_WINO_ISA(portable, )
#if defined(RK_X86)
RK_WINO_ISA(avx2, __attribute__((target("avx2,fma"))))
#endif
#if defined(RK_X86_AVX512)
RK_WINO_ISA(avx512, __attribute__((target("avx512f"))))
#endif

/* The transforms for the instruction set the GEMM's micro-kernel was chosen for. */
static const wino_isa *wino_isa_for(const ukr_desc *u)
{
#if defined(RK_X86_AVX512)
    if (rk_use_avx512())
        return &wino_avx512;
#endif
#if defined(RK_X86)
    if (u->nr == 16)
        return &wino_avx2;
#endif
    (void)u;
    return &wino_portable;
}

/* dst[k * mr + i] = src[i * ld + k]: the portable A packer (rows < mr are zero-filled). */
static void pack_rows(const float *src, int64_t ld, int64_t rows, int64_t kc, float *dst, int mr)
{
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < mr; i++)
            dst[k * mr + i] = i < rows ? src[i * ld + k] : 0.0f;
}

/* prod[e][tile][cw] = v[e] * filter[e] for the block's count tiles, output channels [j0, j1). */
static void products(const wino_shared *sh, const float *v, int64_t count, int64_t j0, int64_t j1,
                     float *prod, float *ap)
{
    const ukr_desc *u = sh->u;
    const int mr = u->mr, nr = u->nr;
    const int64_t C = sh->p->c, width = ceil_div(sh->o, nr) * nr;
    const int64_t panels = ceil_div(count, mr), jend = min_i64(j1, width);
    for (int64_t e = 0; e < sh->a * sh->a; e++) {
        const float *ve = v + e * sh->tb * sh->cs;
        const float *be = sh->packed + e * sh->b_one;
        float *pe = prod + e * sh->tb * sh->cw;
        for (int64_t pc = 0; pc < C; pc += sh->kc) {
            const int64_t kc = min_i64(sh->kc, C - pc);
            for (int64_t ip = 0; ip < panels; ip++) {
                const int64_t rows = min_i64(mr, count - ip * mr);
                if (u->pack_t != NULL)
                    u->pack_t(ve + ip * mr * sh->cs + pc, sh->cs, rows, kc, ap + ip * mr * kc, mr, NULL);
                else
                    pack_rows(ve + ip * mr * sh->cs + pc, sh->cs, rows, kc, ap + ip * mr * kc, mr);
            }
            for (int64_t jr = j0; jr < jend; jr += nr) {
                const float *bpanel = be + pc * width + jr * kc;
                for (int64_t ip = 0; ip < panels; ip++)
                    u->fn(kc, ap + ip * mr * kc, bpanel, pe + ip * mr * sh->cw + (jr - j0), sh->cw,
                          NULL, pc > 0, NULL);
            }
        }
    }
}

static void *wino_worker(void *arg)
{
    const wino_task *task = (const wino_task *)arg;
    wino_shared *sh = task->sh;
    const wino_isa *isa = wino_isa_for(sh->u);
    float *v = sh->scratch + (size_t)task->id * (sh->v_floats + sh->m_floats + sh->a_floats);
    float *prod = v + sh->v_floats, *ap = prod + sh->m_floats;
    int64_t have = -1, it;
    while ((it = atomic_fetch_add(&sh->next, 1)) < sh->items) {
        const int64_t block = it / sh->ncols, j0 = it % sh->ncols * sh->cw;
        const int64_t t0 = block * sh->tb, count = min_i64(sh->tb, sh->tiles - t0);
        if (block != have) {
            isa->input(sh, t0, count, v);
            have = block;
        }
        products(sh, v, count, j0, j0 + sh->cw, prod, ap);
        isa->output(sh, t0, count, j0, j0 + sh->cw, prod);
    }
    return NULL;
}

/*
 * y = conv(x, filt) + bias, then the epilogue, for a convolution rk_winograd_tile(p, o) gives
 * m for, with the filter transformed by rk_winograd_pack(filt, p, o, m). Scratch per thread: one micro-panel of tiles' transformed input (a * a *
 * mr * c floats) and products (at most RK_WINO_BUFFER_BYTES, or one micro-panel of output
 * channels). threads: a network step's decision (step_threads.c), or 0 to decide here from
 * the work. Returns 1 when an allocation fails.
 */
int rk_winograd_conv(const float *x, const float *packed, const float *bias, float *y,
                     const rk_conv_params *p, int64_t o, int m, const rk_epilogue *epilogue,
                     int threads)
{
    wino_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.x = x;
    sh.packed = packed;
    sh.y = y;
    sh.p = p;
    sh.epilogue = epilogue;
    sh.u = rk_gemm_kernel();
    sh.o = o;
    sh.m = m;
    sh.a = m + 2;
    sh.tw = ceil_div(p->ow, m);
    sh.thw = ceil_div(p->oh, m) * sh.tw;
    sh.tiles = p->n * sh.thw;
    /* channel chunks are whole micro-panels and whole vectors (nr is 8, 16 or 32) */
    const int64_t mr = sh.u->mr, q = max_i64(sh.u->nr, RK_WINO_LANES);
    sh.cs = ceil_div(p->c, RK_WINO_LANES) * RK_WINO_LANES;
    sh.os = ceil_div(o, q) * q;
    sh.kc = rk_gemm_packed_b_kc(sh.u, p->c);
    sh.b_one = rk_gemm_packed_b_floats(sh.u, p->c, o);
    const int64_t a2 = sh.a * sh.a, panels = ceil_div(sh.tiles, mr);
    const double flops = 2.0 * (double)a2 * (double)sh.tiles * (double)p->c * (double)o;
    int nt = threads > 0 ? threads : rk_threads_for(flops, RK_GEMM_MIN_FLOP_PER_THREAD);

    /* Items: one micro-panel of tiles each (measured faster than larger blocks with one
       thread and two: the block's transformed input and products stay in the L1 and L2
       caches, while the filter's transformed values, read again for every block, are read
       in order); where the tiles are fewer than the threads' share, the output channels are
       split in chunks as well (each thread then transforms the input for itself), and where
       the products would overflow the buffer. */
    sh.tb = mr;
    const int64_t blocks = panels;
    int64_t ncols = blocks < nt ? ceil_div(nt, blocks) : 1;
    const int64_t cw_fit = max_i64(1, RK_WINO_BUFFER_BYTES / (4 * a2 * sh.tb * q));
    ncols = max_i64(ncols, ceil_div(sh.os / q, cw_fit));
    ncols = min_i64(ncols, sh.os / q);
    sh.cw = ceil_div(sh.os / q, ncols) * q;
    sh.ncols = ceil_div(sh.os, sh.cw);
    sh.items = blocks * sh.ncols;
    if (nt > sh.items)
        nt = (int)sh.items;

    sh.v_floats = (size_t)(a2 * sh.tb * sh.cs);
    sh.m_floats = (size_t)(a2 * sh.tb * sh.cw);
    sh.a_floats = (size_t)(ceil_div(sh.tb * sh.kc, 16) * 16);
    const size_t per_thread = sh.v_floats + sh.m_floats + sh.a_floats;
    size_t bytes;
    float *scratch = NULL;
    if (!__builtin_mul_overflow(per_thread, (size_t)nt, &bytes) &&
        !__builtin_add_overflow(bytes, (size_t)sh.os, &bytes) &&
        !__builtin_mul_overflow(bytes, sizeof(float), &bytes))
        scratch = (float *)alloc_aligned(bytes);
    if (scratch == NULL)
        return 1;
    sh.scratch = scratch;
    float *bias_pad = scratch + (size_t)nt * per_thread;
    memset(bias_pad, 0, (size_t)sh.os * sizeof(float));
    if (bias != NULL)
        memcpy(bias_pad, bias, (size_t)o * sizeof(float));
    sh.bias = bias_pad;
    atomic_init(&sh.next, 0);

    wino_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        tasks[i].sh = &sh;
        tasks[i].id = i;
    }
    if (nt > 1)
        rk_run_tasks(wino_worker, tasks, sizeof(wino_task), nt);
    else
        wino_worker(&tasks[0]);
    free(scratch);
    return 0;
}
