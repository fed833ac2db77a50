/*
 * Shared by the reference kernels (one file per operator family, see kernels.h for the
 * contract): target selection, threading thresholds, small integer helpers, 4-lane vectors
 * with the vectorized exp/sigmoid/tanh, window clipping, the thread helpers (threading.c) and
 * the packed SGEMM behind fully connected and convolution (gemm.c, its packers in gemm_pack.c,
 * its micro-kernels in gemm_kernels.c).
 */
#ifndef RK_INTERNAL_H
#define RK_INTERNAL_H

#include "kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
/*
 * The same thresholds for the steps of a network's execute, whose thread counts are decided
 * when the program is compiled (step_threads.c): there the pool is held (rk_pool_hold), its
 * workers spin between the steps and a block reaches one in about a microsecond, so a thread
 * pays from a few tens of microseconds of work on.
 */
#ifndef RK_STEP_GEMM_MIN_FLOP_PER_THREAD
#define RK_STEP_GEMM_MIN_FLOP_PER_THREAD 2e6
#endif
#ifndef RK_STEP_SMALL_MIN_WORK_PER_THREAD
#define RK_STEP_SMALL_MIN_WORK_PER_THREAD 0.4e6
#endif
/* Depthwise: little arithmetic per input byte, and in a network its input was just written by
   the step before, partly from the other cores' caches: on the development VM a second thread
   gained nothing on 14 x 14 x 576 (2 MFLOP), 1.3x on 28 x 28 x 192 (2.7 MFLOP) and 1.8x on
   56 x 56 x 144 (8 MFLOP), while alone, with its input in both caches, 14 x 14 x 384 gained
   1.7x. (The grouped convolution does cin times more work per byte: RK_STEP_SMALL.) */
#ifndef RK_STEP_DEPTHWISE_MIN_FLOP_PER_THREAD
#define RK_STEP_DEPTHWISE_MIN_FLOP_PER_THREAD 1.5e6
#endif
#ifndef RK_STEP_STREAM_MIN_WEIGHTS_PER_THREAD
#define RK_STEP_STREAM_MIN_WEIGHTS_PER_THREAD 0.25e6
#endif
/* GEMM work units per thread: enough that a thread started late or slowed
   down by other load is absorbed by the others. */
#ifndef RK_UNITS_PER_THREAD
#define RK_UNITS_PER_THREAD 3
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

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static inline void *alloc_aligned(size_t bytes)
{
    /* aligned_alloc wants a size that is a multiple of the alignment. */
    size_t sz = (bytes + RK_ALIGN - 1) / RK_ALIGN * RK_ALIGN;
    return aligned_alloc(RK_ALIGN, sz ? sz : RK_ALIGN);
}

#include "vec4.h"

#if defined(RK_X86_AVX512)
/* Transposes the 16 x 16 block r[0..15] in place (r[i][j] becomes r[j][i]). */
__attribute__((target("avx512f"), always_inline))
static inline void transpose16x16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 | ... */
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]); /* a2 b2 a3 b3 | ... */
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    /* r[4q + c] now holds column c of each 4 x 4 block of rows 4q..4q+3, one block per
       128-bit lane: gather the lanes of the four row groups. */
    for (int c = 0; c < 4; c++) {
        t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);      /* lanes 0, 2 of each */
        t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);  /* lanes 1, 3 */
        t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
        r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
    }
}
#endif

/* Taps k in [*k0, *k1) of a kmax-tap window (spacing d, first position base)
   that land inside [0, lim): the window clipped to the image. */
static inline void tap_range(int64_t base, int64_t d, int64_t lim, int64_t kmax, int64_t *k0, int64_t *k1)
{
    int64_t lo = base >= 0 ? 0 : ceil_div(-base, d);
    int64_t hi = lim - base <= 0 ? 0 : ceil_div(lim - base, d);
    *k0 = min_i64(lo, kmax);
    *k1 = max_i64(*k0, min_i64(hi, kmax));
}

/* ---- threading.c ------------------------------------------------------------------------ */

/* How long a thread that runs out of work polls for more before it sleeps (nanoseconds):
   longer than the gap between two kernel calls from Python (tens of microseconds). */
#ifndef RK_SPIN_NS
#define RK_SPIN_NS 500000
#endif
/* How long a worker spins for the next job while an execute holds the pool: past the longest
   single-threaded step of a typical network, short enough that a caller who stops calling
   (or a step far longer than that) does not keep the cores busy for nothing. */
#ifndef RK_HOLD_SPIN_NS
#define RK_HOLD_SPIN_NS 4000000
#endif

static inline void rk_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t rk_now_ns(void);

/* Runs fn on n argument blocks (args + i*stride): block 0 on the caller, the others on the
   persistent pool's workers (or on the caller, when no worker is free to take them). */
void rk_run_tasks(void *(*fn)(void *), void *args, size_t stride, int n);

/* Whether a network's execute holds the pool now (rk_pool_hold): its workers spin, and a layer
   that runs as one of its steps reaches them in about a microsecond (then the RK_STEP_*
   thresholds apply). A hint: another thread's execute counts too. */
int rk_pool_held(void);

/* Threads worth using for `work` units when each thread should get at least
   `min_per_thread` units. */
int rk_threads_for(double work, double min_per_thread);

/* fn(ctx, begin, end) over [0, n) split among the threads worth using for n * work_per_item
   units of work, each part a multiple of `grain` items (but the last); on the caller alone when
   one thread is worth it. */
void rk_parallel_for(int64_t n, int64_t grain, double work_per_item, double min_work_per_thread,
                     void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);

/* rk_parallel_for on nt threads (at most; fewer where the range has fewer grains). */
void rk_parallel_for_threads(int64_t n, int64_t grain, int nt,
                             void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);

/* Chunks per thread in rk_parallel_for: enough that the threads finish close together when one
   is slowed down, few enough that each claim (one atomic add) stays negligible next to the
   chunk's work. */
#define RK_CHUNKS_PER_THREAD 4

#if defined(RK_X86_AVX512)
/* Depthwise output rows [row0, row1) of one image (p->n 1, multiplier 1) into y (which holds
   row row0 first), its input rows read from x, which holds the image's rows from first_row on
   (AVX-512 kernels only). */
void rk_depthwise_rows(const float *x, int64_t first_row, const float *filt, const float *bias, float *y,
                       const rk_conv_params *p, int64_t row0, int64_t row1, const rk_epilogue *epilogue);
#endif

/* The most parts a depthwise convolution splits into (output rows times channel blocks). */
int64_t rk_depthwise_parts(const rk_conv_params *p, int64_t mult);

/* Elements (floats copied) per thread before another is worth starting: memory-bound work
   (copies, cheap element-wise functions), and work of a few nanoseconds an element (exp, log,
   erf). Measured on the 2-core development VM: a second thread halves a copy of 3.2 MB (the
   pool's workers are already running), and pays from about 512 KiB a thread. */
#ifndef RK_COPY_MIN_PER_THREAD
#define RK_COPY_MIN_PER_THREAD 131072.0
#endif
#ifndef RK_MATH_MIN_PER_THREAD
#define RK_MATH_MIN_PER_THREAD 65536.0
#endif

/* ---- gemm.c (driver) and gemm_kernels.c (micro-kernels) --------------------------------- */

/* Applies `e` to rows x cols values at c (row stride ldc); residual offset by the same rows and
   columns relative to `row0`, `col0` of the whole output. */
void rk_apply_epilogue(const rk_epilogue *e, float *c, int64_t ldc, int64_t row0, int64_t col0,
                       int64_t rows, int64_t cols);

/* activation_avx512.c: y = f(x + residual) for n floats (residual may be NULL, function -1 is
   none), 16 lanes at a time; only where rk_use_avx512() and rk_act16_covers(function). y may
   equal x. No threads: the callers have split the work already. */
int rk_act16_covers(int function);
/* rk_activation on the calling thread alone. */
void rk_activation_serial(const float *x, float *y, int64_t count, int function, float a, float b);
void rk_act16(const float *x, const float *residual, float *y, int64_t n, int function, float a, float b);
/* rk_act16 in place over `rows` rows of n floats (row strides ldc; ldr in the residual, which
   may be NULL), the function chosen once for the block (a GEMM tile's 14 short rows). */
void rk_act16_rows(float *c, int64_t ldc, const float *residual, int64_t ldr, int64_t rows, int64_t n,
                   int function, float a, float b);

/* The largest tile of any micro-kernel (the driver's edge-tile buffer). */
#define RK_MAX_MR 14
#define RK_MAX_NR 32

/*
 * A micro-kernel computes one MR x NR tile of C from a packed A micro-panel (kc steps of MR
 * contiguous values) and a packed B micro-panel (kc steps of NR contiguous values). The products
 * are summed from zero in registers and then added either to C (later K blocks, accumulate) or
 * to the bias row (first K block; NR values, or NULL for zero): starting from zero rather than
 * from C keeps the prologue free of loads, so the accumulators never spill. Full tiles only: the
 * driver routes edge tiles through a local buffer.
 */
typedef struct ukr_tail ukr_tail;
typedef void (*ukr_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       const float *bias, int accumulate, const ukr_tail *tail);

/*
 * An epilogue a micro-kernel applies on its final store (kernels whose descriptor has `tail`
 * set, on full tiles of the last K block): the tile, bias or earlier K blocks added, plus the
 * residual tile (NULL: none; row stride ldr), then clamped to [lo, hi] as max(lo, .) then
 * min(hi, .), which is ReLU (0, +inf), bounded ReLU and Clip exactly as the activation code
 * computes them (NaN kept), and nothing at (-inf, +inf). rk_epilogue_tail says which
 * epilogues have this form.
 */
struct ukr_tail {
    const float *residual;
    int64_t ldr;
    float lo, hi;
};

/* 1 and *t (residual left NULL) when `e` is a residual and/or a clamp, else 0. */
int rk_epilogue_tail(const rk_epilogue *e, ukr_tail *t);

/* dst[k * width + i] = src[i * ld + k] for i < rows (times scale[k] where scale is not NULL),
   zero for rows <= i < width, k < kc. */
typedef void (*pack_t_fn)(const float *src, int64_t ld, int64_t rows, int64_t kc, float *dst, int width,
                          const float *scale);

/* The implicit im2col block of a convolution (rows output pixels from row0, columns [k0, k0+kc))
   packed as mr-row micro-panels (mr <= 16), as the driver's portable packer does. */
typedef void (*pack_conv_fn)(const float *x, const rk_conv_params *p, int64_t row0, int64_t rows,
                             int64_t k0, int64_t kc, float *dst, int mr);

/* The micro-kernel with A row i, step k read at seg[s][i * lda + k] instead of from a packed
   panel: the K block is nseg segments of len[s] steps (in K order). */
typedef void (*ukr_direct_fn)(const float *const *seg, const int64_t *len, int nseg, int64_t lda,
                              const float *b, float *c, int64_t ldc, const float *bias,
                              int accumulate, const ukr_tail *tail);

typedef struct ukr_desc {
    ukr_fn fn;
    pack_t_fn pack_t;         /* vectorized transposing packer for this ISA, or NULL */
    pack_conv_fn pack_conv;   /* vectorized im2col packer for this ISA, or NULL */
    ukr_direct_fn direct;     /* fn reading a convolution's input directly, or NULL */
    /* fn and direct for a B micro-panel of at most nr / 2 columns (the tile nr / 2 wide; B
       still read with its nr-float step), or NULL */
    ukr_fn half;
    ukr_direct_fn direct_half;
    int mr, nr;
    int64_t mc, kc, nc; /* A block mc x kc; work unit mc x nc */
    int tail;           /* fn and direct apply a ukr_tail (else they are passed NULL) */
    /* part[r]: fn for the first r rows of a tile only (r < RK_PART_ROWS; NULL: none), from the
       same packed panels, the same bits; never given a tail */
    ukr_fn part[8];
} ukr_desc;
#define RK_PART_ROWS 8

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
    const rk_epilogue *epilogue; /* or NULL */
    /* threads to use (a network step's decision, see step_threads.c), or 0: decided here
       from the work (RK_GEMM_MIN_FLOP_PER_THREAD) */
    int threads;
    /* B already packed by rk_gemm_pack_b for this u, k and n (then b, rsb and csb are not
       read), or NULL: packed during the call, slab by slab */
    const float *bpacked;
    /* A's columns scaled as they are packed (A a plain matrix, conv NULL), or NULL: row i's
       column j multiplied by a_scale[(i / a_scale_rows) * a_scale_stride + j] (rk_conv2d_scaled) */
    const float *a_scale;
    int64_t a_scale_rows, a_scale_stride;
} gemm_op;

/* The micro-kernel for this CPU (chosen when the library is loaded). */
const ukr_desc *rk_gemm_kernel(void);
/* 1 when the AVX-512 kernels were selected at run time (the CPU has AVX-512F and it was
   compiled in), else 0. */
int rk_use_avx512(void);

/* C = A * B + bias (then the epilogue) as described by op; 1 if scratch allocation failed.
   C may be the epilogue's residual itself (same pointer, ldr == ldc) where rk_gemm_in_place. */
int rk_gemm_run(const gemm_op *op);
/* 1 when a GEMM of depth k on u is one K block: no partial sums are stored in C before its
   epilogue, which then reads each residual value before the same place of C is written. */
int rk_gemm_in_place(const ukr_desc *u, int64_t k);

/* All of op's B (u, b, rsb, csb, k, n) packed into one slab, the layout rk_gemm_run reads
   through op->bpacked: rk_gemm_packed_b_floats(op->u, k, n) floats. */
int64_t rk_gemm_packed_b_floats(const ukr_desc *u, int64_t k, int64_t n);
void rk_gemm_pack_b(const gemm_op *op, float *dst);
/* The K block of that layout: block pc starts at pc * ceil(n / nr) * nr floats, its
   micro-panels nr * kc floats apart (kc = min(this, k - pc)). */
int64_t rk_gemm_packed_b_kc(const ukr_desc *u, int64_t k);

/* ---- gemm_pack.c (the GEMM's packers) ------------------------------------------------------- */

/* A rows [i0, i0 + mc) x columns [k0, k0 + kc) of op packed into ceil(mc / mr) micro-panels
   (op's A scale applied); B rows [k0, k0 + kc) x columns [j0, j0 + nc) into ceil(nc / nr). */
void rk_gemm_pack_a(const gemm_op *op, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float *dst);
void rk_gemm_pack_b_block(const gemm_op *op, int64_t j0, int64_t nc, int64_t k0, int64_t kc, float *dst);

/* y[j * c + k] = x[k * plane + j] for j < n, k < c: n pixels of c planes (plane floats apart)
   as interleaved channels (NCHW rows to NHWC). */
void rk_interleave_planes(const float *x, int64_t plane, int64_t c, float *y, int64_t n);

/*
 * Where a convolution's kernel can read A straight from the NHWC input (ukr_desc.direct): the
 * mr output pixels of a panel lie in one output row and every tap of the K block falls inside
 * the image for all of them. Segments are the K block's runs of input: the channels of one
 * tap, merged with the next tap's where that continues them in memory (the taps of a window
 * row when the dilation is 1), so a 7 x 7 window of 3 channels is 7 runs of 21 floats.
 */
#define RK_DIRECT_MAX_SEGS 40
/* A pointwise convolution's input is read directly (not packed) up to this many B micro-panels
   of output channels (gemm_unit) */
#ifndef RK_DIRECT_POINTWISE_PANELS
#define RK_DIRECT_POINTWISE_PANELS 4
#endif

/* The K block [k0, k0 + kc)'s segments (at most RK_DIRECT_MAX_SEGS) for the panel of mr output
   pixels from row0, or -1 when a pixel is in another output row or a tap falls in the padding. */
int rk_conv_direct_segments(const rk_conv_params *p, int mr, int64_t row0, int64_t k0, int64_t kc,
                            const float *x, const float **seg, int64_t *len);

/* ---- winograd.c ------------------------------------------------------------------------- */

/* The output tile m (4 or 2) of the Winograd convolution a convolution of o output channels
   takes, or 0 when it takes the GEMM: the one place that decides. */
int rk_winograd_tile(const rk_conv_params *p, int64_t o);
/* The filter [o, 3, 3, c] transformed for tile m and packed for the GEMM's kernel (free());
   NULL when out of memory or the size overflows. */
float *rk_winograd_pack(const float *filt, const rk_conv_params *p, int64_t o, int m);
/* rk_conv2d_packed for a convolution rk_winograd_tile gave m for, its filter packed by
   rk_winograd_pack. */
int rk_winograd_conv(const float *x, const float *packed, const float *bias, float *y,
                     const rk_conv_params *p, int64_t o, int m, const rk_epilogue *epilogue,
                     int threads);

#endif /* RK_INTERNAL_H */
