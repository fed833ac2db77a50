/*
 * Reference CPU compute kernels. See kernels.h for the contract.
 *
 * Structure:
 *   - a packed, cache-blocked SGEMM (C = A * B [+ bias per column]) with a
 *     register-blocked micro-kernel chosen once at run time (AVX-512F,
 *     AVX2+FMA, or portable C that the compiler auto-vectorizes);
 *   - fully connected and conv2d are both expressed as that GEMM; conv2d packs
 *     its im2col operand directly from the NHWC input, block by block, so no
 *     full im2col matrix is ever materialized;
 *   - the cheaper kernels work on contiguous channel rows with 4-lane GCC
 *     vector types (baseline SSE2 / NEON), no run-time dispatch;
 *   - threads are plain pthreads created per call (no pool, no global state
 *     besides the once-initialized thread count and ISA choice).
 *
 * Test hooks (compile time only): -DRK_NO_AVX512 disables the AVX-512 path,
 * -DRK_NO_X86_SIMD disables every intrinsic path, so the portable code can be
 * exercised on a machine that has the wider instruction sets.
 */
#include "kernels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(RK_NO_X86_SIMD)
#include <immintrin.h>
#define RK_X86 1
#if !defined(RK_NO_AVX512)
#define RK_X86_AVX512 1
#endif
#endif

#define RK_MAX_THREADS 64
#define RK_ALIGN 64

/*
 * Threading thresholds: minimum work per thread before another thread is
 * started. A thread start costs ~40-100 us on the 2-vCPU development VM (more
 * when the scheduler first puts it on the caller's core); below these sizes a
 * second thread was measured to make calls slower, not faster.
 *   GEMM (fully connected, conv2d): flops.
 *   depthwise: 2x RK_SMALL_MIN_WORK_PER_THREAD flops; pooling: that many
 *   window elements visited.
 * Overridable at compile time (the tests lower them to exercise the threaded
 * paths on small shapes).
 */
#ifndef RK_GEMM_MIN_FLOP_PER_THREAD
#define RK_GEMM_MIN_FLOP_PER_THREAD 24e6
#endif
#ifndef RK_SMALL_MIN_WORK_PER_THREAD
#define RK_SMALL_MIN_WORK_PER_THREAD 2e6
#endif
/* GEMM work units per thread: enough that a thread started late or slowed
   down by other load is absorbed by the others. */
#ifndef RK_UNITS_PER_THREAD
#define RK_UNITS_PER_THREAD 8
#endif

/* Fully connected with at most this many rows skips the GEMM and streams
   the weights (see fc_few_rows), which is memory bound: a thread per ~4 MiB
   of weights. */
#ifndef RK_FC_STREAM_ROWS
#define RK_FC_STREAM_ROWS 4
#endif
#ifndef RK_STREAM_MIN_WEIGHTS_PER_THREAD
#define RK_STREAM_MIN_WEIGHTS_PER_THREAD 1e6
#endif

/* Shared packed-B budget; beyond it B is processed in column slabs of at
   least RK_MIN_SLAB_COLS columns (so A is not re-packed too often). */
#define RK_SLAB_BYTES ((int64_t)16 << 20)
#define RK_MIN_SLAB_COLS 256

static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static void *alloc_aligned(size_t bytes)
{
    /* aligned_alloc wants a size that is a multiple of the alignment. */
    size_t sz = (bytes + RK_ALIGN - 1) / RK_ALIGN * RK_ALIGN;
    return aligned_alloc(RK_ALIGN, sz ? sz : RK_ALIGN);
}

/*
 * 4-lane vectors (GCC vector extensions: SSE2 on x86_64, NEON on arm64,
 * scalarized elsewhere). Used where the auto-vectorizer cannot be relied on:
 * without -ffast-math it refuses loops in which a select feeds floating-point
 * arithmetic (it turns the select into a branch and will not speculate
 * possibly-trapping operations), and it keeps accumulator arrays in memory.
 */
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef uint32_t vu4 __attribute__((vector_size(16)));

static inline vf4 vf4_load(const float *p)
{
    vf4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vf4_store(float *p, vf4 v) { memcpy(p, &v, sizeof v); }
static inline vf4 vf4_splat(float s) { return (vf4){ s, s, s, s }; }
/* lanes of a where m is all-ones, else b */
static inline vf4 vf4_select(vi4 m, vf4 a, vf4 b) { return (vf4)((m & (vi4)a) | (~m & (vi4)b)); }
/* max(a, b) = a > b ? a : b per lane; a NaN in b passes through, a NaN in a
   does not (used that way to clamp while keeping NaN). The x86 form is one
   instruction; the bitwise select above costs four and the per-lane loop is
   not reliably vectorized once inlined into a bigger loop. */
#if defined(__SSE__) && !defined(RK_NO_X86_SIMD)
#include <xmmintrin.h>
static inline vf4 vf4_max(vf4 a, vf4 b) { return (vf4)_mm_max_ps((__m128)a, (__m128)b); }
static inline vf4 vf4_min(vf4 a, vf4 b) { return (vf4)_mm_min_ps((__m128)a, (__m128)b); }
#else
static inline vf4 vf4_max(vf4 a, vf4 b)
{
    vf4 r;
    for (int l = 0; l < 4; l++)
        r[l] = a[l] > b[l] ? a[l] : b[l];
    return r;
}
static inline vf4 vf4_min(vf4 a, vf4 b)
{
    vf4 r;
    for (int l = 0; l < 4; l++)
        r[l] = a[l] < b[l] ? a[l] : b[l];
    return r;
}
#endif
static inline float vf4_hmax(vf4 v)
{
    float m = v[0];
    for (int l = 1; l < 4; l++)
        m = v[l] > m ? v[l] : m;
    return m;
}

/* ------------------------------------------------------------------------- */
/* Micro-kernels                                                             */
/* ------------------------------------------------------------------------- */

/*
 * A micro-kernel computes one MR x NR tile of C from a packed A micro-panel
 * (kc steps of MR contiguous values) and a packed B micro-panel (kc steps of
 * NR contiguous values). The products are summed from zero in registers and
 * then added either to C (later K blocks) or to the bias row (first K block;
 * NR values, or NULL for zero). Starting from zero rather than from C keeps
 * the prologue free of loads, so the accumulators never spill.
 * Full tiles only: the driver routes edge tiles through a local buffer.
 */
typedef void (*ukr_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       const float *bias, int accumulate);

typedef struct ukr_desc {
    ukr_fn fn;
    int mr, nr;
    int64_t mc, kc, nc; /* A block mc x kc; work unit mc x nc */
} ukr_desc;

#define RK_MAX_MR 14
#define RK_MAX_NR 32

/* Portable 4x8: small enough that the accumulators stay in registers on any
   target with 16 vector registers, and the j loop maps onto 128-bit SIMD. */
static void ukr_generic_4x8(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                            const float *bias, int accumulate)
{
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
#define RK_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define RK_ROWS14(X) RK_ROWS6(X) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

#if defined(RK_X86)
/* 6x16 uses 12 of the 16 ymm registers for accumulators, leaving room for the
   two B vectors and the broadcast A value. */
__attribute__((target("avx2,fma")))
static void ukr_avx2_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          const float *bias, int accumulate)
{
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
/* 14x32: 28 zmm accumulators + 2 B vectors + 1 broadcast = 31 of 32 registers.
   Per k step: 2 vector loads and 14 broadcasts feed 28 FMAs, which keeps the
   load ports below the FMA ports' rate. */
__attribute__((target("avx512f")))
static void ukr_avx512_14x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                             const float *bias, int accumulate)
{
#define RK_DECL16(i) __m512 c0_##i = _mm512_setzero_ps(), c1_##i = _mm512_setzero_ps();
#define RK_STEP16(i)                                \
    {                                               \
        const __m512 ai = _mm512_set1_ps(a[i]);     \
        c0_##i = _mm512_fmadd_ps(ai, b0, c0_##i);   \
        c1_##i = _mm512_fmadd_ps(ai, b1, c1_##i);   \
    }
#define RK_ACC16(i)                                                                        \
    _mm512_storeu_ps(c + (i) * ldc, _mm512_add_ps(c0_##i, _mm512_loadu_ps(c + (i) * ldc))); \
    _mm512_storeu_ps(c + (i) * ldc + 16, _mm512_add_ps(c1_##i, _mm512_loadu_ps(c + (i) * ldc + 16)));
#define RK_BIAS16(i)                                           \
    _mm512_storeu_ps(c + (i) * ldc, _mm512_add_ps(c0_##i, v0)); \
    _mm512_storeu_ps(c + (i) * ldc + 16, _mm512_add_ps(c1_##i, v1));
    RK_ROWS14(RK_DECL16)
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = _mm512_loadu_ps(b);
        const __m512 b1 = _mm512_loadu_ps(b + 16);
        RK_ROWS14(RK_STEP16)
        a += 14;
        b += 32;
    }
    if (accumulate) {
        RK_ROWS14(RK_ACC16)
    } else {
        const __m512 v0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
        const __m512 v1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
        RK_ROWS14(RK_BIAS16)
    }
#undef RK_DECL16
#undef RK_STEP16
#undef RK_ACC16
#undef RK_BIAS16
}
#endif

/* Blocking: a B micro-panel (kc*nr*4 bytes) is re-read for every A
   micro-panel of a unit, so it should stay in L1/L2; the packed A block
   (mc*kc*4 bytes) is re-read for every B micro-panel and stays in L2. nc is
   the nominal unit width (columns of C per work unit). */
static const ukr_desc ukr_generic = { ukr_generic_4x8, 4, 8, 128, 256, 4096 };
#if defined(RK_X86)
static const ukr_desc ukr_avx2 = { ukr_avx2_6x16, 6, 16, 144, 256, 4096 };
#endif
#if defined(RK_X86_AVX512)
static const ukr_desc ukr_avx512 = { ukr_avx512_14x32, 14, 32, 336, 384, 4096 };
#endif

/* ------------------------------------------------------------------------- */
/* One-time initialization: thread count and ISA dispatch                    */
/* ------------------------------------------------------------------------- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_threads = 1;
static const ukr_desc *g_ukr = &ukr_generic;

static void init_once(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int t = ncpu < 1 ? 1 : (ncpu > 8 ? 8 : (int)ncpu);
    const char *env = getenv("REFERENCE_BACKEND_THREADS");
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        /* Malformed or non-positive values are ignored rather than fatal. */
        if (end && *end == '\0' && v > 0)
            t = v > RK_MAX_THREADS ? RK_MAX_THREADS : (int)v;
    }
    g_threads = t;

#if defined(RK_X86)
    __builtin_cpu_init();
#if defined(RK_X86_AVX512)
    if (__builtin_cpu_supports("avx512f")) {
        g_ukr = &ukr_avx512;
        return;
    }
#endif
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        g_ukr = &ukr_avx2;
        return;
    }
#endif
    g_ukr = &ukr_generic;
}

/*
 * rk_thread_count: number of worker threads the heavy kernels may use.
 * Output: >= 1 (online CPUs capped at 8, or REFERENCE_BACKEND_THREADS, itself
 * capped at 64). Read once; later changes of the environment are not seen.
 */
int rk_thread_count(void)
{
    pthread_once(&g_once, init_once);
    return g_threads;
}

static const ukr_desc *get_ukr(void)
{
    pthread_once(&g_once, init_once);
    return g_ukr;
}

/* ------------------------------------------------------------------------- */
/* Thread helper                                                             */
/* ------------------------------------------------------------------------- */

/* Runs fn on n argument blocks (args + i*stride), n-1 of them on new threads
   and one on the caller. If a thread cannot be created its block runs on the
   caller afterwards, so the result never depends on thread availability. */
static void run_tasks(void *(*fn)(void *), void *args, size_t stride, int n)
{
    pthread_t tid[RK_MAX_THREADS];
    int started[RK_MAX_THREADS];
    char *base = (char *)args;
    if (n > RK_MAX_THREADS)
        n = RK_MAX_THREADS;
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, fn, base + (size_t)i * stride) == 0;
    fn(base);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            fn(base + (size_t)i * stride);
    }
}

/* Threads worth using for `work` units when each thread should get at least
   `min_per_thread` units (thread start-up costs tens of microseconds). */
static int threads_for(double work, double min_per_thread)
{
    int t = rk_thread_count();
    double cap = work / min_per_thread;
    if (cap < (double)t)
        t = cap < 1.0 ? 1 : (int)cap;
    return t;
}

/* ------------------------------------------------------------------------- */
/* SGEMM driver                                                              */
/* ------------------------------------------------------------------------- */

/*
 * C[M x N] (row stride ldc) = A[M x K] * B[K x N] + bias[N].
 * A is either a row-major matrix (lda) or, when conv != NULL, the implicit
 * im2col matrix of an NHWC convolution: row = output pixel, column =
 * (ky, kx, ci). B[k][j] = b[k * rsb + j * csb].
 */
typedef struct gemm_op {
    const ukr_desc *u;
    const float *a;
    int64_t lda;
    const rk_conv_params *conv;
    const float *b;
    int64_t rsb, csb;
    const float *bias;
    float *c;
    int64_t ldc;
    int64_t m, n, k;
} gemm_op;

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

/* Packs rows [i0, i0+mc) x cols [k0, k0+kc) of A into ceil(mc/mr) micro-panels. */
static void pack_a(const gemm_op *op, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float *dst)
{
    const int mr = op->u->mr;
    for (int64_t ip = 0; ip < mc; ip += mr) {
        int64_t rows = min_i64(mr, mc - ip);
        float *d = dst + ip * kc;
        if (op->conv)
            pack_a_conv(op->a, op->conv, i0 + ip, rows, k0, kc, d, mr);
        else
            pack_a_matrix(op->a + (i0 + ip) * op->lda + k0, op->lda, rows, kc, d, mr);
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
static void pack_b(const gemm_op *op, int64_t j0, int64_t nc, int64_t k0, int64_t kc, float *dst)
{
    const int nr = op->u->nr;
    for (int64_t jp = 0; jp < nc; jp += nr) {
        int64_t cols = min_i64(nr, nc - jp);
        const float *s = op->b + k0 * op->rsb + (j0 + jp) * op->csb;
        float *d = dst + jp * kc;
        switch (nr) {
        case 32: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, 32); break;
        case 16: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, 16); break;
        case 8: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, 8); break;
        default: pack_b_impl(s, op->rsb, op->csb, cols, kc, d, nr); break;
        }
    }
}

/*
 * Parallel scheme. B is packed into a shared "slab" (all of K x up to slab_w
 * columns of B), then C is cut into units of mcu rows x nu columns; each unit
 * packs its own A block per K block into a private buffer.
 *
 * All work is one ordered list of items, claimed through an atomic counter:
 *   [B-pack items of slab 0][units of slab 0][B-pack items of slab 1]...
 * A unit needs every pack item of its slab done, and a pack item needs every
 * unit of the previous slab done (it overwrites the slab buffer). Since items
 * are claimed in order, "phase p is complete" is simply "the number of
 * completed items has reached the start of phase p + 1", so one completion
 * counter expresses every dependency, and a claimed item only ever waits for
 * items that running threads have already claimed.
 *
 * Nothing waits for a thread that has not started yet: a worker that the OS
 * schedules late (other load on the machine, or placed on the caller's core)
 * just finds less work left. With a fixed split or a full barrier, such a
 * straggler would stall the whole call.
 */
typedef struct gemm_shared {
    const gemm_op *op;
    int64_t kc, slab_w, slab_wp, mcu, nu;
    int64_t nslabs, items_full, total_items;
    float *bp;          /* packed slab: K block at offset pc * slab_wp */
    float *ap;          /* per-thread A buffers, a_stride floats each */
    size_t a_stride;
    int single;         /* one participant: never wait, never lock */
    atomic_llong next, done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int waiters;        /* protected by mu */
} gemm_shared;

typedef struct gemm_worker {
    gemm_shared *sh;
    int id;
} gemm_worker;

#define RK_PACK_GROUP 4 /* B micro-panels per packing work item */

static int64_t slab_pack_items(const gemm_shared *sh, int64_t slab_w)
{
    const int nr = sh->op->u->nr;
    return ceil_div(sh->op->k, sh->kc) * ceil_div(ceil_div(slab_w, nr), RK_PACK_GROUP);
}

static int64_t slab_units(const gemm_shared *sh, int64_t slab_w)
{
    return ceil_div(sh->op->m, sh->mcu) * ceil_div(slab_w, sh->nu);
}

static void wait_done(gemm_shared *sh, int64_t need)
{
    if (sh->single || atomic_load(&sh->done) >= need)
        return;
    pthread_mutex_lock(&sh->mu);
    sh->waiters++;
    while (atomic_load(&sh->done) < need)
        pthread_cond_wait(&sh->cv, &sh->mu);
    sh->waiters--;
    pthread_mutex_unlock(&sh->mu);
}

static void mark_done(gemm_shared *sh)
{
    if (sh->single) {
        atomic_fetch_add(&sh->done, 1);
        return;
    }
    pthread_mutex_lock(&sh->mu);
    atomic_fetch_add(&sh->done, 1);
    if (sh->waiters)
        pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

static void gemm_unit(const gemm_shared *sh, float *ap, int64_t slab0, int64_t slab_w, int64_t unit)
{
    const gemm_op *op = sh->op;
    const ukr_desc *u = op->u;
    const int mr = u->mr, nr = u->nr;
    const int64_t nnb = ceil_div(slab_w, sh->nu);
    const int64_t i0 = unit / nnb * sh->mcu, j0 = unit % nnb * sh->nu;
    const int64_t mc = min_i64(sh->mcu, op->m - i0), jend = min_i64(j0 + sh->nu, slab_w);
    float tile[RK_MAX_MR * RK_MAX_NR] __attribute__((aligned(64)));
    float bias_pad[RK_MAX_NR] __attribute__((aligned(64)));

    for (int64_t pc = 0; pc < op->k; pc += sh->kc) {
        const int64_t kc = min_i64(sh->kc, op->k - pc);
        const int accumulate = pc > 0;
        const float *bblk = sh->bp + pc * sh->slab_wp;
        pack_a(op, i0, mc, pc, kc, ap);
        for (int64_t jr = j0; jr < jend; jr += nr) {
            const int64_t cols = min_i64(nr, jend - jr);
            const float *bpanel = bblk + jr * kc;
            const float *bias = op->bias ? op->bias + slab0 + jr : NULL;
            if (bias && cols < nr) {
                /* the micro-kernel reads a full NR bias row */
                for (int j = 0; j < nr; j++)
                    bias_pad[j] = j < cols ? bias[j] : 0.0f;
                bias = bias_pad;
            }
            for (int64_t ir = 0; ir < mc; ir += mr) {
                const int64_t rows = min_i64(mr, mc - ir);
                const float *apanel = ap + ir * kc;
                float *cp = op->c + (i0 + ir) * op->ldc + slab0 + jr;
                if (rows == mr && cols == nr) {
                    u->fn(kc, apanel, bpanel, cp, op->ldc, bias, accumulate);
                } else {
                    /* Edge tile: go through a full-size local tile so the
                       kernel never touches C outside the matrix. */
                    if (accumulate)
                        for (int64_t i = 0; i < rows; i++)
                            memcpy(tile + i * nr, cp + i * op->ldc, (size_t)cols * sizeof(float));
                    u->fn(kc, apanel, bpanel, tile, nr, bias, accumulate);
                    for (int64_t i = 0; i < rows; i++)
                        memcpy(cp + i * op->ldc, tile + i * nr, (size_t)cols * sizeof(float));
                }
            }
        }
    }
}

static void *gemm_worker_run(void *arg)
{
    const gemm_worker *w = (const gemm_worker *)arg;
    gemm_shared *sh = w->sh;
    const gemm_op *op = sh->op;
    const int nr = op->u->nr;
    float *ap = sh->ap + (size_t)w->id * sh->a_stride;
    int64_t it;

    while ((it = atomic_fetch_add(&sh->next, 1)) < sh->total_items) {
        const int64_t s = min_i64(it / sh->items_full, sh->nslabs - 1);
        const int64_t base = s * sh->items_full, r = it - base;
        const int64_t slab0 = s * sh->slab_w;
        const int64_t slab_w = min_i64(sh->slab_w, op->n - slab0);
        const int64_t npack = slab_pack_items(sh, slab_w);
        if (r < npack) {
            wait_done(sh, base); /* previous slab fully consumed */
            const int64_t ngroups = ceil_div(ceil_div(slab_w, nr), RK_PACK_GROUP);
            const int64_t pc = r / ngroups * sh->kc, jp = r % ngroups * RK_PACK_GROUP * nr;
            const int64_t kc = min_i64(sh->kc, op->k - pc);
            const int64_t cols = min_i64(RK_PACK_GROUP * nr, slab_w - jp);
            pack_b(op, slab0 + jp, cols, pc, kc, sh->bp + pc * sh->slab_wp + jp * kc);
        } else {
            wait_done(sh, base + npack); /* this slab fully packed */
            gemm_unit(sh, ap, slab0, slab_w, r - npack);
        }
        mark_done(sh);
    }
    return NULL;
}

/* Rebalances a block size so the last block is not tiny, e.g. K = 576 with a
   nominal 384 becomes two blocks of 288 instead of 384 + 192. */
static int64_t balanced_block(int64_t total, int64_t nominal, int64_t unit)
{
    int64_t nblocks = ceil_div(total, nominal);
    int64_t b = ceil_div(total, nblocks);
    return ceil_div(b, unit) * unit;
}

/*
 * gemm_run: C = A * B + bias as described by op; M, N, K >= 0.
 * Scratch (one allocation per call, freed before returning):
 *   packed B slab: K x min(N, slab) floats rounded up to NR columns, where the
 *   slab is all of N if that fits RK_SLAB_BYTES (16 MiB), else the widest
 *   slab that fits, but at least RK_MIN_SLAB_COLS columns (so at most
 *   max(16 MiB, 1 KiB * K));
 *   plus one packed A block per thread, at most 336 x 384 floats (516 KiB).
 * Returns 1 if that allocation fails (C untouched), else 0.
 */
static int gemm_run(const gemm_op *op)
{
    const ukr_desc *u = op->u;
    const int64_t M = op->m, N = op->n, K = op->k;
    const int mr = u->mr, nr = u->nr;
    if (M <= 0 || N <= 0)
        return 0;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                op->c[i * op->ldc + j] = op->bias ? op->bias[j] : 0.0f;
        return 0;
    }

    gemm_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.op = op;
    sh.kc = balanced_block(K, u->kc, 4);

    /* Slab width: all of N when the packed copy fits the budget, else as many
       columns as fit, but never so few that A gets re-packed too often. */
    int64_t slab_w = ceil_div(N, nr) * nr;
    if (slab_w * K * (int64_t)sizeof(float) > RK_SLAB_BYTES) {
        slab_w = RK_SLAB_BYTES / ((int64_t)sizeof(float) * K) / nr * nr;
        slab_w = max_i64(slab_w, ceil_div(RK_MIN_SLAB_COLS, nr) * nr);
        slab_w = balanced_block(N, slab_w, nr);
    }
    sh.slab_w = slab_w;
    sh.slab_wp = ceil_div(min_i64(slab_w, N), nr) * nr;

    /* Starting a thread costs ~40 us here (more when the OS places it on a
       busy core), and the shared B packing is a short serial-ish phase:
       measured, a second thread only pays off from ~50 MFLOP on. */
    double flops = 2.0 * (double)M * (double)N * (double)K;
    int nt = threads_for(flops, RK_GEMM_MIN_FLOP_PER_THREAD);

    /* Units: start from the cache-sized block and shrink until every thread
       can claim several, so late finishers are absorbed by the others. */
    int64_t w_eff = min_i64(slab_w, N);
    sh.mcu = balanced_block(M, u->mc, mr);
    sh.nu = balanced_block(w_eff, u->nc, nr);
    while (nt > 1 && ceil_div(M, sh.mcu) * ceil_div(w_eff, sh.nu) < RK_UNITS_PER_THREAD * (int64_t)nt) {
        /* prefer thinner row blocks: narrower units would re-pack A */
        if (sh.mcu > 4 * mr)
            sh.mcu = balanced_block(M, ceil_div(sh.mcu, 2 * mr) * mr, mr);
        else if (sh.nu > 4 * nr)
            sh.nu = balanced_block(w_eff, ceil_div(sh.nu, 2 * nr) * nr, nr);
        else
            break;
    }
    int64_t nunits = ceil_div(M, sh.mcu) * ceil_div(w_eff, sh.nu);
    if (nt > nunits)
        nt = (int)nunits;

    sh.nslabs = ceil_div(N, slab_w);
    sh.items_full = slab_pack_items(&sh, w_eff) + slab_units(&sh, w_eff);
    {
        const int64_t last_w = N - (sh.nslabs - 1) * slab_w;
        sh.total_items = (sh.nslabs - 1) * sh.items_full + slab_pack_items(&sh, last_w) + slab_units(&sh, last_w);
    }

    sh.a_stride = (size_t)(ceil_div(sh.mcu * sh.kc, 16) * 16); /* keep each buffer 64-byte aligned */
    size_t b_elems = (size_t)(ceil_div(sh.slab_wp * K, 16) * 16);
    float *scratch = (float *)alloc_aligned((b_elems + sh.a_stride * (size_t)nt) * sizeof(float));
    if (!scratch)
        return 1;
    sh.bp = scratch;
    sh.ap = scratch + b_elems;
    atomic_init(&sh.next, 0);
    atomic_init(&sh.done, 0);

    gemm_worker workers[RK_MAX_THREADS];
    pthread_t tid[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        workers[i].sh = &sh;
        workers[i].id = i;
    }
    if (nt > 1) {
        if (pthread_mutex_init(&sh.mu, NULL) != 0) {
            nt = 1;
        } else if (pthread_cond_init(&sh.cv, NULL) != 0) {
            pthread_mutex_destroy(&sh.mu);
            nt = 1;
        }
    }
    if (nt > 1) {
        /* A thread that cannot be created simply does not take part: the
           work is claimed dynamically, so fewer participants stay correct. */
        int started[RK_MAX_THREADS];
        for (int i = 1; i < nt; i++)
            started[i] = pthread_create(&tid[i], NULL, gemm_worker_run, &workers[i]) == 0;
        gemm_worker_run(&workers[0]);
        for (int i = 1; i < nt; i++)
            if (started[i])
                pthread_join(tid[i], NULL);
        pthread_cond_destroy(&sh.cv);
        pthread_mutex_destroy(&sh.mu);
    } else {
        sh.single = 1;
        gemm_worker_run(&workers[0]);
    }
    free(scratch);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Fully connected                                                           */
/* ------------------------------------------------------------------------- */

/* Few-row case: the GEMM would waste most of each MR-row micro-tile and pack
   all of w just to use it a few times, so stream w once, applying each part
   of it to every row of x while it is in cache. The dot products keep 16
   independent partial sums, which the compiler vectorizes without having to
   reassociate a single accumulator (no -ffast-math needed). Threads split
   the output columns [j0, j1). */
typedef struct fc_task {
    const float *x, *w, *bias;
    float *y;
    int64_t n, k, m, j0, j1;
    int transpose_weights;
} fc_task;

static void *fc_few_rows_run(void *arg)
{
    const fc_task *t = (const fc_task *)arg;
    const int64_t n = t->n, k = t->k, m = t->m;
    if (t->transpose_weights) {
        for (int64_t j = t->j0; j < t->j1; j++) {
            const float *wr = t->w + j * k;
            for (int64_t i = 0; i < n; i++) {
                const float *xr = t->x + i * k;
                float lane[16] = { 0 };
                int64_t kk = 0;
                for (; kk + 16 <= k; kk += 16)
                    for (int l = 0; l < 16; l++)
                        lane[l] += xr[kk + l] * wr[kk + l];
                float s = 0.0f;
                for (; kk < k; kk++)
                    s += xr[kk] * wr[kk];
                for (int l = 0; l < 8; l++)
                    lane[l] += lane[l + 8];
                for (int l = 0; l < 4; l++)
                    lane[l] += lane[l + 4];
                s += (lane[0] + lane[2]) + (lane[1] + lane[3]);
                t->y[i * m + j] = s + (t->bias ? t->bias[j] : 0.0f);
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = t->j0; j < t->j1; j++)
                t->y[i * m + j] = t->bias ? t->bias[j] : 0.0f;
        for (int64_t kk = 0; kk < k; kk++) {
            const float *wr = t->w + kk * m;
            for (int64_t i = 0; i < n; i++) {
                const float xv = t->x[i * k + kk];
                float *yr = t->y + i * m;
                for (int64_t j = t->j0; j < t->j1; j++)
                    yr[j] += xv * wr[j];
            }
        }
    }
    return NULL;
}

static void fc_few_rows(const float *x, const float *w, const float *bias, float *y,
                        int64_t n, int64_t k, int64_t m, int transpose_weights)
{
    int nt = threads_for((double)k * (double)m, RK_STREAM_MIN_WEIGHTS_PER_THREAD);
    if (nt > m)
        nt = (int)m;
    fc_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        /* column ranges in multiples of 16 floats, so threads do not share
           cache lines of y */
        int64_t blocks = ceil_div(m, 16);
        fc_task t = { x, w, bias, y, n, k, m, min_i64(m, blocks * i / nt * 16),
                      min_i64(m, blocks * (i + 1) / nt * 16), transpose_weights };
        tasks[i] = t;
    }
    if (nt == 1)
        fc_few_rows_run(&tasks[0]);
    else
        run_tasks(fc_few_rows_run, tasks, sizeof(fc_task), nt);
}

/*
 * rk_fully_connected: y[n, m] = x[n, k] @ W + bias, W = w.T ([m, k] storage) if
 * transpose_weights else w ([k, m] storage). bias [m] or NULL.
 * Preconditions: n, k, m >= 0 (k = 0 gives y = bias); y does not alias x, w
 * or bias. Up to 4 rows: w is streamed once (threads split the columns of
 * y), no scratch. Otherwise GEMM, scratch as for gemm_run (for n=512,
 * k=m=1024: 4 MiB + 0.5 MiB per thread).
 * Returns 1 if the scratch allocation fails.
 */
int rk_fully_connected(const float *x, const float *w, const float *bias, float *y,
                       int64_t n, int64_t k, int64_t m, int transpose_weights)
{
    if (n <= 0 || m <= 0)
        return 0;
    /* Streaming beats GEMM + packing up to ~4 rows (measured for k, m from
       1024 to 4096; for [m, k] weights with small k*m up to ~8 rows). */
    if (k > 0 && n <= RK_FC_STREAM_ROWS) {
        fc_few_rows(x, w, bias, y, n, k, m, transpose_weights);
        return 0;
    }
    gemm_op op;
    memset(&op, 0, sizeof op);
    op.u = get_ukr();
    op.a = x;
    op.lda = k;
    op.b = w;
    if (transpose_weights) {
        op.rsb = 1;
        op.csb = k;
    } else {
        op.rsb = m;
        op.csb = 1;
    }
    op.bias = bias;
    op.c = y;
    op.ldc = m;
    op.m = n;
    op.n = m;
    op.k = k;
    return gemm_run(&op);
}

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
    gemm_op op;
    memset(&op, 0, sizeof op);
    op.u = get_ukr();
    op.m = p->n * p->oh * p->ow;
    op.n = o;
    op.k = p->kh * p->kw * p->c;
    if (p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 &&
        p->pad_left == 0 && p->oh == p->h && p->ow == p->w) {
        /* pointwise: the NHWC input already is the [pixels, c] matrix */
        op.a = x;
        op.lda = p->c;
    } else {
        op.a = x;
        op.conv = p;
    }
    /* filt [o, kh*kw*c] is B transposed */
    op.b = filt;
    op.rsb = 1;
    op.csb = op.k;
    op.bias = bias;
    op.c = y;
    op.ldc = o;
    return gemm_run(&op);
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
} dw_task;

/* Taps k in [*k0, *k1) of a kmax-tap window (spacing d, first position base)
   that land inside [0, lim): the window clipped to the image. */
static void tap_range(int64_t base, int64_t d, int64_t lim, int64_t kmax, int64_t *k0, int64_t *k1)
{
    int64_t lo = base >= 0 ? 0 : ceil_div(-base, d);
    int64_t hi = lim - base <= 0 ? 0 : ceil_div(lim - base, d);
    *k0 = min_i64(lo, kmax);
    *k1 = max_i64(*k0, min_i64(hi, kmax));
}

static void *dw_task_run(void *arg)
{
    const dw_task *t = (const dw_task *)arg;
    const rk_conv_params *p = t->p;
    const int64_t C = p->c, mult = t->mult, OC = C * mult;
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
    }
    return NULL;
}

/*
 * rk_depthwise_conv2d: y[n, oh, ow, c*mult]; filt [1, kh, kw, c*mult];
 * bias [c*mult] or NULL. Preconditions as rk_conv2d, mult >= 1. No scratch.
 */
int rk_depthwise_conv2d(const float *x, const float *filt, const float *bias, float *y, const rk_conv_params *p, int64_t mult)
{
    const int64_t rows = p->n * p->oh;
    if (rows <= 0 || p->ow <= 0 || p->c <= 0 || mult <= 0)
        return 0;
    /* ~200 us of single-thread work per extra thread covers its start-up */
    double work = 2.0 * (double)rows * (double)p->ow * (double)(p->c * mult) * (double)(p->kh * p->kw);
    int nt = threads_for(work, RK_SMALL_MIN_WORK_PER_THREAD * 2.0);
    if (nt > rows)
        nt = (int)rows;
    dw_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        dw_task t = { x, filt, bias, y, p, mult, rows * i / nt, rows * (i + 1) / nt };
        tasks[i] = t;
    }
    if (nt == 1)
        dw_task_run(&tasks[0]);
    else
        run_tasks(dw_task_run, tasks, sizeof(dw_task), nt);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Pooling                                                                   */
/* ------------------------------------------------------------------------- */

typedef struct pool_task {
    const float *x;
    float *y;
    const rk_conv_params *p;
    int pool;
    int64_t row0, row1;
} pool_task;

static void *pool_task_run(void *arg)
{
    const pool_task *t = (const pool_task *)arg;
    const rk_conv_params *p = t->p;
    const int64_t C = p->c;
    for (int64_t row = t->row0; row < t->row1; row++) {
        const int64_t bi = row / p->oh, oy = row - bi * p->oh;
        const float *img = t->x + bi * p->h * p->w * C;
        /* clip the window to the image so padding never takes part */
        int64_t ys, ye;
        tap_range(oy * p->stride_h - p->pad_top, 1, p->h, p->kh, &ys, &ye);
        ys += oy * p->stride_h - p->pad_top;
        ye += oy * p->stride_h - p->pad_top;
        for (int64_t ox = 0; ox < p->ow; ox++) {
            float *out = t->y + (row * p->ow + ox) * C;
            int64_t xs, xe;
            tap_range(ox * p->stride_w - p->pad_left, 1, p->w, p->kw, &xs, &xe);
            xs += ox * p->stride_w - p->pad_left;
            xe += ox * p->stride_w - p->pad_left;
            if (ys >= ye || xs >= xe) {
                /* excluded by the preconditions; defined output instead of -inf or 0/0 */
                memset(out, 0, (size_t)C * sizeof(float));
                continue;
            }
            const int is_max = t->pool == RK_POOL_MAX;
            const float cnt = (float)((ye - ys) * (xe - xs));
            const float *first = img + (ys * p->w + xs) * C;
            int64_t ch = 0;
            /* 16 channels at a time, the running max/sum kept in registers */
            for (; ch + 16 <= C; ch += 16) {
                vf4 a0, a1, a2, a3;
                if (is_max) {
                    a0 = vf4_load(first + ch);
                    a1 = vf4_load(first + ch + 4);
                    a2 = vf4_load(first + ch + 8);
                    a3 = vf4_load(first + ch + 12);
                } else {
                    a0 = a1 = a2 = a3 = vf4_splat(0.0f);
                }
                for (int64_t iy = ys; iy < ye; iy++)
                    for (int64_t ix = xs; ix < xe; ix++) {
                        const float *in = img + (iy * p->w + ix) * C + ch;
                        if (is_max) {
                            a0 = vf4_max(vf4_load(in), a0);
                            a1 = vf4_max(vf4_load(in + 4), a1);
                            a2 = vf4_max(vf4_load(in + 8), a2);
                            a3 = vf4_max(vf4_load(in + 12), a3);
                        } else {
                            a0 += vf4_load(in);
                            a1 += vf4_load(in + 4);
                            a2 += vf4_load(in + 8);
                            a3 += vf4_load(in + 12);
                        }
                    }
                if (!is_max) {
                    const vf4 vc = vf4_splat(cnt);
                    a0 /= vc;
                    a1 /= vc;
                    a2 /= vc;
                    a3 /= vc;
                }
                vf4_store(out + ch, a0);
                vf4_store(out + ch + 4, a1);
                vf4_store(out + ch + 8, a2);
                vf4_store(out + ch + 12, a3);
            }
            for (; ch < C; ch++) {
                float acc = is_max ? first[ch] : 0.0f;
                for (int64_t iy = ys; iy < ye; iy++)
                    for (int64_t ix = xs; ix < xe; ix++) {
                        const float v = img[(iy * p->w + ix) * C + ch];
                        acc = is_max ? (v > acc ? v : acc) : acc + v;
                    }
                out[ch] = is_max ? acc : acc / cnt;
            }
        }
    }
    return NULL;
}

/*
 * rk_pool2d: y[n, oh, ow, c] = max or mean over the real elements of each
 * kh x kw window (stride, padding as in conv; dilation fields ignored).
 * Preconditions: as rk_conv2d; every window overlaps the image (a window
 * that does not gets 0). pool is RK_POOL_MAX, anything else averages.
 * NaN inputs: average propagates them, max does not reliably. No scratch.
 */
int rk_pool2d(const float *x, float *y, const rk_conv_params *p, int pool)
{
    const int64_t rows = p->n * p->oh;
    if (rows <= 0 || p->ow <= 0 || p->c <= 0)
        return 0;
    double work = (double)rows * (double)p->ow * (double)p->c * (double)(p->kh * p->kw);
    int nt = threads_for(work, RK_SMALL_MIN_WORK_PER_THREAD);
    if (nt > rows)
        nt = (int)rows;
    pool_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        pool_task t = { x, y, p, pool, rows * i / nt, rows * (i + 1) / nt };
        tasks[i] = t;
    }
    if (nt == 1)
        pool_task_run(&tasks[0]);
    else
        run_tasks(pool_task_run, tasks, sizeof(pool_task), nt);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Elementwise                                                               */
/* ------------------------------------------------------------------------- */

/*
 * exp(x) = 2^n * e^r with n = round(x / ln2), |r| <= ln2/2, e^r by a degree-7
 * Taylor polynomial (truncation error < 1e-8 relative). 2^n is applied as two
 * factors so results in the subnormal range are still produced correctly.
 * Max error about 3 ulp; NaN propagates, overflow gives +inf, underflow 0.
 */
static inline vf4 exp_v4(vf4 x)
{
    const vf4 magic = vf4_splat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    /* unsigned lanes: the exponent arithmetic wraps (defined) for NaN input */
    const vu4 magic_bits = (vu4){ 0x4B400000u, 0x4B400000u, 0x4B400000u, 0x4B400000u };
    const vu4 bias = (vu4){ 127u, 127u, 127u, 127u };
    /* clamp so n stays in [-150, 128]; beyond that the result is 0 or inf
       anyway (x is the second operand, so a NaN passes through) */
    x = vf4_max(vf4_splat(-104.0f), x);
    x = vf4_min(vf4_splat(89.0f), x);
    vf4 n = (x * vf4_splat(1.44269504088896341f) + magic) - magic;
    vf4 r = x - n * vf4_splat(0.693145751953125f); /* ln2 high part: exact product for |n| < 2^9 */
    r = r - n * vf4_splat(1.428606765330187e-06f);  /* ln2 low part */
    vf4 p = vf4_splat(1.0f / 5040.0f);
    p = p * r + vf4_splat(1.0f / 720.0f);
    p = p * r + vf4_splat(1.0f / 120.0f);
    p = p * r + vf4_splat(1.0f / 24.0f);
    p = p * r + vf4_splat(1.0f / 6.0f);
    p = p * r + vf4_splat(0.5f);
    p = p * r + vf4_splat(1.0f);
    p = p * r + vf4_splat(1.0f);
    /* n = h + (n - h) with both halves in [-75, 64], so each 2^k is a normal
       float built directly in the exponent field */
    vf4 th = n * vf4_splat(0.5f) + magic;
    vf4 t2 = (n - (th - magic)) + magic;
    vf4 s1 = (vf4)((((vu4)th - magic_bits) + bias) << 23);
    vf4 s2 = (vf4)((((vu4)t2 - magic_bits) + bias) << 23);
    return (p * s1) * s2;
}

static inline vf4 sigmoid_v4(vf4 x)
{
    /* e = e^-|x| <= 1: nothing overflows or cancels, and for x << 0 the
       result e/(1+e) keeps its subnormal values instead of 1/inf = 0 */
    const vi4 sign = (vi4){ INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN };
    vf4 e = exp_v4((vf4)((vi4)x | sign));
    vf4 r = vf4_splat(1.0f) / (vf4_splat(1.0f) + e);
    return vf4_select(x < vf4_splat(0.0f), e * r, r);
}

static inline vf4 tanh_v4(vf4 x)
{
    /* |x| >= 0.25: tanh|x| = (1 - e) / (1 + e), e = e^-2|x| <= 1, where the
       cancellation in 1 - e costs at most a factor 2 in relative error.
       |x| < 0.25: odd Taylor series through x^11 (next term < 3e-10 relative). */
    const vi4 sign = (vi4){ INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN };
    vf4 ax = (vf4)((vi4)x & ~sign);
    vf4 e = exp_v4(vf4_splat(-2.0f) * ax);
    vf4 big = (vf4_splat(1.0f) - e) / (vf4_splat(1.0f) + e);
    vf4 x2 = x * x;
    vf4 p = vf4_splat(-1382.0f / 155925.0f);
    p = p * x2 + vf4_splat(62.0f / 2835.0f);
    p = p * x2 + vf4_splat(-17.0f / 315.0f);
    p = p * x2 + vf4_splat(2.0f / 15.0f);
    p = p * x2 + vf4_splat(-1.0f / 3.0f);
    vf4 small = x + x * x2 * p;
    /* big is |tanh|; OR-ing in the sign of x also keeps tanh(-0) = -0 */
    return (vf4)((vi4)vf4_select(ax < vf4_splat(0.25f), small, big) | ((vi4)x & sign));
}

/* Applies a vf4 function to count floats, the tail through a padded buffer. */
#define RK_MAP_V4(fn, x, y, count)                                          \
    do {                                                                    \
        int64_t i_ = 0;                                                     \
        for (; i_ + 4 <= (count); i_ += 4)                                  \
            vf4_store((y) + i_, fn(vf4_load((x) + i_)));                    \
        if (i_ < (count)) {                                                 \
            float tmp_[4] = { 0.0f, 0.0f, 0.0f, 0.0f };                     \
            memcpy(tmp_, (x) + i_, (size_t)((count) - i_) * sizeof(float)); \
            vf4_store(tmp_, fn(vf4_load(tmp_)));                            \
            memcpy((y) + i_, tmp_, (size_t)((count) - i_) * sizeof(float)); \
        }                                                                   \
    } while (0)

/*
 * rk_activation: y[i] = f(x[i]) for i < count. y may equal x.
 * relu, bounded_relu and leaky_relu propagate NaN. Sigmoid and tanh are
 * vectorized polynomial/exp evaluations accurate to a few ulp.
 */
int rk_activation(const float *x, float *y, int64_t count, int function, float a, float b)
{
    int64_t i = 0;
    switch (function) {
    case RK_RELU:
        for (; i < count; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case RK_BOUNDED_RELU:
        for (; i < count; i++) {
            float v = x[i] < b ? b : x[i];
            y[i] = v > a ? a : v;
        }
        break;
    case RK_SIGMOID:
        RK_MAP_V4(sigmoid_v4, x, y, count);
        break;
    case RK_TANH:
        RK_MAP_V4(tanh_v4, x, y, count);
        break;
    case RK_LEAKY_RELU:
        for (; i + 4 <= count; i += 4) {
            vf4 v = vf4_load(x + i);
            vf4_store(y + i, vf4_select(v > vf4_splat(0.0f), v, v * vf4_splat(a)));
        }
        for (; i < count; i++)
            y[i] = x[i] > 0.0f ? x[i] : a * x[i];
        break;
    default:
        break;
    }
    return 0;
}

/*
 * rk_binary: out[out_shape] = a + b (RK_ADD) or a * b (RK_MUL; any other op
 * adds) with NumPy broadcasting. Shapes padded to rank (1..8; anything else
 * does nothing); a dimension of size 0 makes it a no-op. out may be the same
 * buffer as a or b only if that input has the full output shape. No scratch.
 * Dimensions are coalesced first, so the innermost loop is as long as possible
 * and is one of: both contiguous, a broadcast scalar, b broadcast scalar.
 */
int rk_binary(int op, const float *a, const int64_t *a_shape, const float *b, const int64_t *b_shape,
              float *out, const int64_t *out_shape, int rank)
{
    int64_t shp[8], sa[8], sb[8];
    int nd = 0;
    int64_t sta = 1, stb = 1; /* element strides of a and b, innermost first */
    if (rank < 1 || rank > 8)
        return 0;
    for (int d = 0; d < rank; d++)
        if (out_shape[d] <= 0)
            return 0;

    /* Build innermost-first dims: drop size-1 output dims, merge a dim into the
       previous (inner) one when both operands continue the same stride pattern. */
    for (int d = rank - 1; d >= 0; d--) {
        int64_t len = out_shape[d];
        int64_t da = a_shape[d] == 1 ? 0 : sta;
        int64_t db = b_shape[d] == 1 ? 0 : stb;
        sta *= a_shape[d];
        stb *= b_shape[d];
        if (len == 1)
            continue;
        if (nd > 0 && da == sa[nd - 1] * shp[nd - 1] && db == sb[nd - 1] * shp[nd - 1]) {
            shp[nd - 1] *= len;
            continue;
        }
        shp[nd] = len;
        sa[nd] = da;
        sb[nd] = db;
        nd++;
    }
    if (nd == 0) {
        shp[0] = 1;
        sa[0] = sb[0] = 0;
        nd = 1;
    }

    const int64_t inner = shp[0], ia = sa[0], ib = sb[0];
    int64_t outer = 1;
    for (int d = 1; d < nd; d++)
        outer *= shp[d];
    int64_t idx[8] = { 0 };
    int64_t offa = 0, offb = 0;
    float *o = out;
    for (int64_t it = 0; it < outer; it++) {
        const float *pa = a + offa, *pb = b + offb;
        if (op == RK_MUL) {
            if (ia == 1 && ib == 1)
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] * pb[i];
            else if (ia == 0 && ib == 1) {
                const float s = pa[0];
                for (int64_t i = 0; i < inner; i++) o[i] = s * pb[i];
            } else if (ia == 1 && ib == 0) {
                const float s = pb[0];
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] * s;
            } else
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i * ia] * pb[i * ib];
        } else {
            if (ia == 1 && ib == 1)
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] + pb[i];
            else if (ia == 0 && ib == 1) {
                const float s = pa[0];
                for (int64_t i = 0; i < inner; i++) o[i] = s + pb[i];
            } else if (ia == 1 && ib == 0) {
                const float s = pb[0];
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] + s;
            } else
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i * ia] + pb[i * ib];
        }
        o += inner;
        /* odometer over the outer dims */
        for (int d = 1; d < nd; d++) {
            offa += sa[d];
            offb += sb[d];
            if (++idx[d] < shp[d])
                break;
            offa -= sa[d] * shp[d];
            offb -= sb[d] * shp[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Softmax                                                                   */
/* ------------------------------------------------------------------------- */

/*
 * rk_softmax: y[r, :] = exp(beta*x[r, :] - max_j beta*x[r, j]) / sum, for
 * `rows` rows of `cols` contiguous values (y has the shape of x); y may equal
 * x. exp is the vectorized exp_v4 (about 3 ulp). No scratch.
 */
int rk_softmax(const float *x, float *y, int64_t rows, int64_t cols, float beta)
{
    if (cols <= 0)
        return 0;
    const vf4 vb = vf4_splat(beta);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
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

        const vf4 vm = vf4_splat(mx);
        vf4 s0 = vf4_splat(0.0f), s1 = s0;
        for (i = 0; i + 8 <= cols; i += 8) {
            vf4 e0 = exp_v4(vb * vf4_load(xr + i) - vm);
            vf4 e1 = exp_v4(vb * vf4_load(xr + i + 4) - vm);
            vf4_store(yr + i, e0);
            vf4_store(yr + i + 4, e1);
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
            memcpy(yr + i, tmp, (size_t)len * sizeof(float));
        }

        const vf4 vs = vf4_splat(sum);
        for (i = 0; i + 4 <= cols; i += 4)
            vf4_store(yr + i, vf4_load(yr + i) / vs);
        for (; i < cols; i++)
            yr[i] /= sum;
    }
    return 0;
}
