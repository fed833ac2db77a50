/*
 * The SGEMM micro-kernels (see ukr_fn in kernels_internal.h) and the packers that need the same
 * instruction set, one descriptor per instruction set, and the choice among them, made once when
 * the library is loaded: AVX-512F (14 x 32 tiles), AVX2+FMA (6 x 16), or portable C that the
 * compiler auto-vectorizes (4 x 8). The driver (gemm.c) calls them only through the descriptor.
 *
 * Test hooks (compile time only): -DRK_NO_AVX512 disables the AVX-512 path, -DRK_NO_X86_SIMD
 * disables every intrinsic path, so the portable code can be exercised on a machine that has
 * the wider instruction sets.
 */
#include "kernels_internal.h"

#if defined(RK_X86)
#include <cpuid.h>
#endif

/* Portable 4x8: small enough that the accumulators stay in registers on any
   target with 16 vector registers, and the j loop maps onto 128-bit SIMD. */
static void ukr_generic_4x8(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                            const float *bias, int accumulate, const ukr_tail *tail)
{
    (void)tail;
    float acc[4][8] = { { 0 } };
    for (int64_t k = 0; k < kc; k++) {
        for (int i = 0; i < 4; i++) {
            float ai = a[i];
            for (int j = 0; j < 8; j++)
                acc[i][j] += ai * b[j];
        }
        a += 4;
        b += 8;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            c[i * ldc + j] = acc[i][j] + (accumulate ? c[i * ldc + j] : (bias ? bias[j] : 0.0f));
}

/*
 * The intrinsic kernels name every accumulator as its own variable (generated
 * by the row macros below): with arrays, GCC keeps the accumulators in stack
 * slots and stores them back on every k step.
 */
#define RK_ROWS1(X) X(0)
#define RK_ROWS2(X) RK_ROWS1(X) X(1)
#define RK_ROWS3(X) RK_ROWS2(X) X(2)
#define RK_ROWS4(X) RK_ROWS3(X) X(3)
#define RK_ROWS5(X) RK_ROWS4(X) X(4)
#define RK_ROWS6(X) RK_ROWS5(X) X(5)
#define RK_ROWS7(X) RK_ROWS6(X) X(6)
#define RK_ROWS14(X) RK_ROWS6(X) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

#if defined(RK_X86)
/* 6x16 uses 12 of the 16 ymm registers for accumulators, leaving room for the
   two B vectors and the broadcast A value. */
__attribute__((target("avx2,fma")))
static void ukr_avx2_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          const float *bias, int accumulate, const ukr_tail *tail)
{
    (void)tail;
#define RK_DECL8(i) __m256 c0_##i = _mm256_setzero_ps(), c1_##i = _mm256_setzero_ps();
#define RK_STEP8(i)                                     \
    {                                                   \
        const __m256 ai = _mm256_broadcast_ss(a + (i)); \
        c0_##i = _mm256_fmadd_ps(ai, b0, c0_##i);       \
        c1_##i = _mm256_fmadd_ps(ai, b1, c1_##i);       \
    }
#define RK_ACC8(i)                                                                         \
    _mm256_storeu_ps(c + (i) * ldc, _mm256_add_ps(c0_##i, _mm256_loadu_ps(c + (i) * ldc))); \
    _mm256_storeu_ps(c + (i) * ldc + 8, _mm256_add_ps(c1_##i, _mm256_loadu_ps(c + (i) * ldc + 8)));
#define RK_BIAS8(i)                                            \
    _mm256_storeu_ps(c + (i) * ldc, _mm256_add_ps(c0_##i, v0)); \
    _mm256_storeu_ps(c + (i) * ldc + 8, _mm256_add_ps(c1_##i, v1));
    RK_ROWS6(RK_DECL8)
    for (int64_t k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_loadu_ps(b);
        const __m256 b1 = _mm256_loadu_ps(b + 8);
        RK_ROWS6(RK_STEP8)
        a += 6;
        b += 16;
    }
    if (accumulate) {
        RK_ROWS6(RK_ACC8)
    } else {
        const __m256 v0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
        const __m256 v1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
        RK_ROWS6(RK_BIAS8)
    }
#undef RK_DECL8
#undef RK_STEP8
#undef RK_ACC8
#undef RK_BIAS8
}
#endif

#if defined(RK_X86_AVX512)
/* The 14x32 tile of the AVX-512 kernels (ukr_avx512_14x32 and ukr_avx512_14x32_direct, which
   differ only in where a k step's 14 A values come from): its accumulators, and its final
   store, added to C (later K blocks) or to the bias row (the first K block). */
#define RK_DECL16(i) __m512 c0_##i = _mm512_setzero_ps(), c1_##i = _mm512_setzero_ps();
#define RK_ACC16(i)                                                                        \
    _mm512_storeu_ps(c + (i) * ldc, _mm512_add_ps(c0_##i, _mm512_loadu_ps(c + (i) * ldc))); \
    _mm512_storeu_ps(c + (i) * ldc + 16, _mm512_add_ps(c1_##i, _mm512_loadu_ps(c + (i) * ldc + 16)));
#define RK_BIAS16(i)                                           \
    _mm512_storeu_ps(c + (i) * ldc, _mm512_add_ps(c0_##i, v0)); \
    _mm512_storeu_ps(c + (i) * ldc + 16, _mm512_add_ps(c1_##i, v1));
/* With a tail (ukr_tail): the residual row added, then the clamp, in the order of
   rk_apply_epilogue and act16, so the result is the same bits. */
#define RK_TAIL16(i)                                                                        \
    {                                                                                       \
        const __m512 s0 = _mm512_add_ps(c0_##i, accumulate ? _mm512_loadu_ps(c + (i) * ldc) : v0);      \
        const __m512 s1 = _mm512_add_ps(c1_##i, accumulate ? _mm512_loadu_ps(c + (i) * ldc + 16) : v1); \
        const __m512 r0 = residual ? _mm512_add_ps(s0, _mm512_loadu_ps(residual + (i) * ldr)) : s0;      \
        const __m512 r1 = residual ? _mm512_add_ps(s1, _mm512_loadu_ps(residual + (i) * ldr + 16)) : s1; \
        _mm512_storeu_ps(c + (i) * ldc, _mm512_min_ps(hi, _mm512_max_ps(lo, r0)));          \
        _mm512_storeu_ps(c + (i) * ldc + 16, _mm512_min_ps(hi, _mm512_max_ps(lo, r1)));     \
    }
/* Asks for the lines the final store reads or writes, so that they arrive during the k loop
   (they are often in L2 or beyond) instead of stalling the store: the C tile, which later K
   blocks add to and the first one writes whole (a store to a line that is not in the cache
   waits for it), and a residual kept apart from C. On ResNet-50's 1 x 1 convolutions with a
   cold output, 7-10% less time (C loop, caches flushed before each call). A first K block of
   few steps does not ask: its loop is too short to hide much, and its C is usually a band
   of a pipeline, already in L1, where the 28 requests cost MobileNetV2's expansions 2-6%. */
#define RK_PREFETCH_TILE16(ksteps)                                                                    \
    if (accumulate || (ksteps) >= 64)                                                                 \
        for (int i = 0; i < 14; i++) {                                                                \
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);                                   \
            _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);                              \
            if (!accumulate && tail != NULL && tail->residual != NULL && tail->residual != c) {       \
                _mm_prefetch((const char *)(tail->residual + i * tail->ldr), _MM_HINT_T0);            \
                _mm_prefetch((const char *)(tail->residual + i * tail->ldr + 16), _MM_HINT_T0);       \
            }                                                                                         \
        }
#define RK_STORE_TILE16                                                            \
    if (tail != NULL) {                                                            \
        const __m512 v0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();      \
        const __m512 v1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps(); \
        const __m512 lo = _mm512_set1_ps(tail->lo), hi = _mm512_set1_ps(tail->hi); \
        const float *residual = tail->residual;                                    \
        const int64_t ldr = tail->ldr;                                             \
        RK_ROWS14(RK_TAIL16)                                                       \
    } else if (accumulate) {                                                       \
        RK_ROWS14(RK_ACC16)                                                        \
    } else {                                                                       \
        const __m512 v0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();      \
        const __m512 v1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps(); \
        RK_ROWS14(RK_BIAS16)                                                       \
    }
#endif

#if defined(RK_X86_AVX512)
/* How far ahead the packed kernels fetch B, in k steps (128 bytes each). The B micro-panel
   (32 KiB at kc = 256) shares L1 with the A panel and C, so lines of it get evicted between
   uses, and where few rows share it (a 7 x 7 image's four row panels) it comes from L3 or
   memory. 16 steps (2 KiB) ahead, with the C prefetch, took 7-13% less CPU time than none on
   the 512 x 1024 x 1024 case; 32 steps took 2-7% less than 16 on ResNet-50's 7 x 7 and
   14 x 14 layers (C loop, caches flushed), the same on its 56 x 56 and 28 x 28 ones. */
#ifndef RK_B_PREFETCH_STEPS
#define RK_B_PREFETCH_STEPS 32
#endif

/* 14x32: 28 zmm accumulators + 2 B vectors + 1 broadcast = 31 of 32 registers.
   Per k step: 2 vector loads and 14 broadcasts feed 28 FMAs, which keeps the
   load ports below the FMA ports' rate. */
__attribute__((target("avx512f")))
static void ukr_avx512_14x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                             const float *bias, int accumulate, const ukr_tail *tail)
{
#define RK_STEP16(i)                                \
    {                                               \
        const __m512 ai = _mm512_set1_ps(a[i]);     \
        c0_##i = _mm512_fmadd_ps(ai, b0, c0_##i);   \
        c1_##i = _mm512_fmadd_ps(ai, b1, c1_##i);   \
    }
    RK_ROWS14(RK_DECL16)
    RK_PREFETCH_TILE16(kc)
    for (int64_t k = 0; k < kc; k++) {
        _mm_prefetch((const char *)(b + 32 * RK_B_PREFETCH_STEPS), _MM_HINT_T0);
        _mm_prefetch((const char *)(b + 32 * RK_B_PREFETCH_STEPS + 16), _MM_HINT_T0);
        const __m512 b0 = _mm512_loadu_ps(b);
        const __m512 b1 = _mm512_loadu_ps(b + 16);
        RK_ROWS14(RK_STEP16)
        a += 14;
        b += 32;
    }
    RK_STORE_TILE16
#undef RK_STEP16
}
#endif

#if defined(RK_X86_AVX512)
/*
 * Packs a transposed block: dst[k * width + i] = src[i * ld + k] for i < rows, 0 for
 * rows <= i < width, k < kc (width <= 32, rows <= width). Used for the A panels of a row-major
 * A and the B panels of a [n, k] B: 16 source lines of 64 bytes are read whole and written as
 * 16 packed rows, instead of one strided scalar per element. Masked loads never touch memory
 * past the last k, so the block may end the source array.
 */
__attribute__((target("avx512f")))
static void pack_t_avx512(const float *src, int64_t ld, int64_t rows, int64_t kc, float *dst, int width,
                          const float *scale)
{
    for (int i0 = 0; i0 < width; i0 += 16) {
        const int lanes = width - i0 < 16 ? width - i0 : 16;
        const __mmask16 store_mask = (__mmask16)((1u << lanes) - 1u);
        const int64_t valid = rows - i0 < 0 ? 0 : (rows - i0 < 16 ? rows - i0 : 16);
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
            const int64_t kn = kc - k0 < 16 ? kc - k0 : 16;
            const __mmask16 load_mask = (__mmask16)((1u << kn) - 1u);
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < valid ? _mm512_maskz_loadu_ps(load_mask, src + (i0 + i) * ld + k0)
                                 : _mm512_setzero_ps();
            if (scale != NULL) {
                const __m512 s = _mm512_maskz_loadu_ps(load_mask, scale + k0);
                for (int i = 0; i < valid; i++)
                    r[i] = _mm512_mul_ps(r[i], s);
            }
            transpose16x16(r);
            for (int64_t k = 0; k < kn; k++)
                _mm512_mask_storeu_ps(dst + (k0 + k) * width + i0, store_mask, r[k]);
        }
    }
}

/*
 * The implicit im2col block of a convolution (see pack_a_conv_impl in gemm.c), packed 16
 * channels at a time: for each tap, the mr (<= 16) output pixels' runs of input channels are loaded whole
 * (a pixel whose tap falls in the padding loads zeros), transposed, and stored as packed rows.
 * Worth it from about 8 channels on; fewer leave most of each 16-wide load unused.
 */
__attribute__((target("avx512f")))
static void pack_a_conv_avx512(const float *x, const rk_conv_params *p, int64_t row0, int64_t rows,
                               int64_t k0, int64_t kc, float *dst, int mr)
{
    const int64_t ohw = p->oh * p->ow, C = p->c;
    const float *img[16];
    int64_t iy0[16], ix0[16];
    for (int r = 0; r < 16; r++) {
        img[r] = NULL;
        iy0[r] = ix0[r] = 0;
        if (r < rows && r < mr) {
            const int64_t q = row0 + r, bi = q / ohw, rem = q - bi * ohw;
            const int64_t oy = rem / p->ow, ox = rem - oy * p->ow;
            iy0[r] = oy * p->stride_h - p->pad_top;
            ix0[r] = ox * p->stride_w - p->pad_left;
            img[r] = x + bi * p->h * p->w * C;
        }
    }
    const __mmask16 store_mask = (__mmask16)((1u << mr) - 1u);
    int64_t tap = k0 / C, ci = k0 - tap * C, k = 0;
    while (k < kc) {
        const int64_t seg = min_i64(C - ci, kc - k);
        const int64_t ky = tap / p->kw, kx = tap - ky * p->kw;
        const float *src[16];
        for (int r = 0; r < 16; r++) {
            src[r] = NULL;
            if (img[r] != NULL) {
                const int64_t iy = iy0[r] + ky * p->dil_h, ix = ix0[r] + kx * p->dil_w;
                if (iy >= 0 && iy < p->h && ix >= 0 && ix < p->w)
                    src[r] = img[r] + (iy * p->w + ix) * C + ci;
            }
        }
        for (int64_t t0 = 0; t0 < seg; t0 += 16) {
            const int64_t kn = seg - t0 < 16 ? seg - t0 : 16;
            const __mmask16 load_mask = (__mmask16)((1u << kn) - 1u);
            __m512 v[16];
            for (int r = 0; r < 16; r++)
                v[r] = src[r] != NULL ? _mm512_maskz_loadu_ps(load_mask, src[r] + t0) : _mm512_setzero_ps();
            transpose16x16(v);
            for (int64_t t = 0; t < kn; t++)
                _mm512_mask_storeu_ps(dst + (k + t0 + t) * mr, store_mask, v[t]);
        }
        k += seg;
        ci = 0;
        tap++;
    }
}

/*
 * ukr_avx512_14x32 with A row i, step k at seg[s][i * lda + k] (segments in K order): for
 * convolutions with at most one B micro-panel (o <= 32), where each packed A panel would serve a
 * single micro-kernel call, so packing costs as much as it saves. Row i of such a panel is, tap
 * by tap, a run of input channels at a fixed distance (stride_w * c) from row i - 1 when its 14
 * output pixels lie in one output row and the taps fall inside the image (the driver checks):
 * the kernel broadcasts straight from the NHWC input.
 */
__attribute__((target("avx512f")))
static void ukr_avx512_14x32_direct(const float *const *seg, const int64_t *len, int nseg, int64_t lda,
                                    const float *b, float *c, int64_t ldc, const float *bias, int accumulate,
                                    const ukr_tail *tail)
{
#define RK_STEP16(i)                                      \
    {                                                     \
        const __m512 ai = _mm512_set1_ps(a[(i) * lda]);   \
        c0_##i = _mm512_fmadd_ps(ai, b0, c0_##i);         \
        c1_##i = _mm512_fmadd_ps(ai, b1, c1_##i);         \
    }
    RK_ROWS14(RK_DECL16)
    /* mostly a first layer over an image's few channels (K 27 for a 3 x 3 one), whose output is
       large and cold: asked for however few the steps */
    RK_PREFETCH_TILE16(64)
    for (int s = 0; s < nseg; s++) {
        const float *a = seg[s];
        for (int64_t k = 0; k < len[s]; k++) {
            const __m512 b0 = _mm512_loadu_ps(b);
            const __m512 b1 = _mm512_loadu_ps(b + 16);
            RK_ROWS14(RK_STEP16)
            a += 1;
            b += 32;
        }
    }
    RK_STORE_TILE16
#undef RK_STEP16
#undef RK_DECL16
#undef RK_ACC16
#undef RK_BIAS16
#undef RK_TAIL16
#undef RK_STORE_TILE16
#undef RK_PREFETCH_TILE16
}
#endif

#if defined(RK_X86_AVX512)
/* The 14 x 16 half tile: ukr_avx512_14x32 and its direct form for a B micro-panel with at most
   16 columns (a layer with 16 output channels, or the last panel of 144), which would spend half
   of the full kernel's multiply-adds on the panel's zero padding. B keeps the 32-float step. */
#define RK_DECLH(i) __m512 c0_##i = _mm512_setzero_ps();
#define RK_STOREH(i)                                                                         \
    {                                                                                        \
        __m512 s0 = _mm512_add_ps(c0_##i, accumulate ? _mm512_loadu_ps(c + (i) * ldc) : v0); \
        if (tail != NULL) {                                                                  \
            if (residual != NULL)                                                            \
                s0 = _mm512_add_ps(s0, _mm512_loadu_ps(residual + (i) * ldr));               \
            s0 = _mm512_min_ps(hi, _mm512_max_ps(lo, s0));                                   \
        }                                                                                    \
        _mm512_storeu_ps(c + (i) * ldc, s0);                                                 \
    }
#define RK_STORE_TILEH                                                                          \
    {                                                                                           \
        const __m512 v0 = bias && !accumulate ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();    \
        const __m512 lo = _mm512_set1_ps(tail ? tail->lo : 0.0f);                               \
        const __m512 hi = _mm512_set1_ps(tail ? tail->hi : 0.0f);                               \
        const float *residual = tail ? tail->residual : NULL;                                   \
        const int64_t ldr = tail ? tail->ldr : 0;                                               \
        RK_ROWS14(RK_STOREH)                                                                    \
    }

__attribute__((target("avx512f")))
static void ukr_avx512_14x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                             const float *bias, int accumulate, const ukr_tail *tail)
{
#define RK_STEPH(i) c0_##i = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, c0_##i);
    RK_ROWS14(RK_DECLH)
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(b);
        RK_ROWS14(RK_STEPH)
        a += 14;
        b += 32;
    }
    RK_STORE_TILEH
#undef RK_STEPH
}

__attribute__((target("avx512f")))
static void ukr_avx512_14x16_direct(const float *const *seg, const int64_t *len, int nseg, int64_t lda,
                                    const float *b, float *c, int64_t ldc, const float *bias, int accumulate,
                                    const ukr_tail *tail)
{
#define RK_STEPH(i) c0_##i = _mm512_fmadd_ps(_mm512_set1_ps(a[(i) * lda]), b0, c0_##i);
    RK_ROWS14(RK_DECLH)
    for (int s = 0; s < nseg; s++) {
        const float *a = seg[s];
        for (int64_t k = 0; k < len[s]; k++) {
            const __m512 b0 = _mm512_loadu_ps(b);
            RK_ROWS14(RK_STEPH)
            a += 1;
            b += 32;
        }
    }
    RK_STORE_TILEH
#undef RK_STEPH
}
#undef RK_DECLH
#undef RK_STOREH
#undef RK_STORE_TILEH
#endif

#if defined(RK_X86_AVX512)
/*
 * The first r rows (r = 1..7) of the 14 x 32 tile, from the same packed A micro-panel (rows 14
 * floats apart per k step) and B micro-panel, summed in the same order: the same bits as
 * those rows of ukr_avx512_14x32, without its multiply-adds on the panel's zero rows. For a
 * last row panel with few rows (a 7 x 7 image's 49 pixels are three panels and 7 rows; a
 * transformer's 197 tokens, 14 panels and 1 row), which the driver computes into its local
 * tile (ukr_part; no tail).
 */
#define RK_DECLP(i) __m512 c0_##i = _mm512_setzero_ps(), c1_##i = _mm512_setzero_ps();
#define RK_STEPP(i)                                 \
    {                                               \
        const __m512 ai = _mm512_set1_ps(a[i]);     \
        c0_##i = _mm512_fmadd_ps(ai, b0, c0_##i);   \
        c1_##i = _mm512_fmadd_ps(ai, b1, c1_##i);   \
    }
#define RK_STOREP(i)                                                                    \
    _mm512_storeu_ps(c + (i) * ldc, _mm512_add_ps(c0_##i, accumulate ? _mm512_loadu_ps(c + (i) * ldc) : v0)); \
    _mm512_storeu_ps(c + (i) * ldc + 16, _mm512_add_ps(c1_##i, accumulate ? _mm512_loadu_ps(c + (i) * ldc + 16) : v1));
#define RK_PART_KERNEL(r)                                                                           \
    __attribute__((target("avx512f"))) static void ukr_avx512_##r##x32(                             \
        int64_t kc, const float *a, const float *b, float *c, int64_t ldc, const float *bias,       \
        int accumulate, const ukr_tail *tail)                                                       \
    {                                                                                               \
        (void)tail;                                                                                 \
        RK_ROWS##r(RK_DECLP)                                                                        \
        for (int64_t k = 0; k < kc; k++) {                                                          \
            _mm_prefetch((const char *)(b + 32 * RK_B_PREFETCH_STEPS), _MM_HINT_T0);                 \
            _mm_prefetch((const char *)(b + 32 * RK_B_PREFETCH_STEPS + 16), _MM_HINT_T0);            \
            const __m512 b0 = _mm512_loadu_ps(b);                                                   \
            const __m512 b1 = _mm512_loadu_ps(b + 16);                                              \
            RK_ROWS##r(RK_STEPP)                                                                    \
            a += 14;                                                                                \
            b += 32;                                                                                \
        }                                                                                           \
        const __m512 v0 = bias && !accumulate ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();        \
        const __m512 v1 = bias && !accumulate ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();   \
        RK_ROWS##r(RK_STOREP)                                                                       \
    }
RK_PART_KERNEL(1)
RK_PART_KERNEL(2)
RK_PART_KERNEL(3)
RK_PART_KERNEL(4)
RK_PART_KERNEL(5)
RK_PART_KERNEL(6)
RK_PART_KERNEL(7)
#undef RK_PART_KERNEL
#undef RK_DECLP
#undef RK_STEPP
#undef RK_STOREP
#endif

/* Blocking: a B micro-panel (kc*nr*4 bytes) is re-read for every A
   micro-panel of a unit, so it should stay in L1/L2; the packed A block
   (mc*kc*4 bytes) is re-read for every B micro-panel and stays in L2. nc is
   the nominal unit width (columns of C per work unit). */
static const ukr_desc ukr_generic = { ukr_generic_4x8, NULL, NULL, NULL, NULL, NULL, 4, 8, 128, 256, 4096, 0, { NULL } };
#if defined(RK_X86)
static const ukr_desc ukr_avx2 = { ukr_avx2_6x16, NULL, NULL, NULL, NULL, NULL, 6, 16, 144, 256, 4096, 0, { NULL } };
#endif
#if defined(RK_X86_AVX512)
static const ukr_desc ukr_avx512 = { ukr_avx512_14x32, pack_t_avx512, pack_a_conv_avx512,
                                     ukr_avx512_14x32_direct, ukr_avx512_14x16, ukr_avx512_14x16_direct,
                                     14, 32, 336, 256, 4096, 1,
                                     { NULL, ukr_avx512_1x32, ukr_avx512_2x32, ukr_avx512_3x32, ukr_avx512_4x32,
                                       ukr_avx512_5x32, ukr_avx512_6x32, ukr_avx512_7x32 } };
#endif

/* ------------------------------------------------------------------------- */
/* ISA dispatch, when the library is loaded                                  */
/* ------------------------------------------------------------------------- */

/* Set by select_kernel() when the library is loaded. */
static const ukr_desc *g_ukr = &ukr_generic;

#if defined(RK_X86)
/* What the CPU and the operating system support, asked with cpuid and xgetbv as libgcc's
   __builtin_cpu_supports does, but without its cache: that lives in this library's .bss, whose
   contents are not trusted to start zeroed (garbage there reads as "already initialised" with
   arbitrary features, which would select instructions the CPU lacks). */
static void x86_features(int *avx2_fma, int *avx512f)
{
    unsigned eax, ebx, ecx, edx, ebx7 = 0, xcr0 = 0;
    *avx2_fma = *avx512f = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return;
    const unsigned ecx1 = ecx;
    if (ecx1 & bit_OSXSAVE) {
        unsigned high;
        __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(high) : "c"(0));
    }
    if (__get_cpuid_max(0, NULL) >= 7)
        __cpuid_count(7, 0, eax, ebx7, ecx, edx);
    /* registers the OS saves: SSE and AVX state; for AVX-512 also opmask and the ZMM halves */
    const int avx_state = (xcr0 & 0x6) == 0x6, avx512_state = avx_state && (xcr0 & 0xe0) == 0xe0;
    *avx2_fma = avx_state && (ebx7 & bit_AVX2) && (ecx1 & bit_FMA);
    *avx512f = avx512_state && (ebx7 & bit_AVX512F);
}
#endif

__attribute__((constructor)) static void select_kernel(void)
{
    g_ukr = &ukr_generic;
#if defined(RK_X86)
    int avx2_fma, avx512f;
    x86_features(&avx2_fma, &avx512f);
#if defined(RK_X86_AVX512)
    if (avx512f) {
        g_ukr = &ukr_avx512;
        return;
    }
#else
    (void)avx512f;
#endif
    if (avx2_fma)
        g_ukr = &ukr_avx2;
#endif
}

const ukr_desc *rk_gemm_kernel(void)
{
    return g_ukr;
}

int rk_use_avx512(void)
{
#if defined(RK_X86_AVX512)
    return rk_gemm_kernel() == &ukr_avx512;
#else
    return 0;
#endif
}
