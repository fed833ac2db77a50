/*
 * Max, average and L2 pooling over NHWC windows (dilated, clipped to the image), as ONNX
 * Runtime computes them: positions outside the input never take part (max never picks them,
 * L2 adds nothing), the average divides by the positions inside the input, or with
 * count_include_pad by those inside the padded input (not those beyond it that ceil_mode's
 * last window may reach).
 */
#include <math.h>

#include "kernels_internal.h"

typedef struct pool_task {
    const float *x;
    float *y;
    const rk_conv_params *p;
    int pool, count_include_pad;
    int wide;       /* max and average take 16-lane vectors (pool_avx512) */
    int64_t row0, row1;
} pool_task;

/* 16 channels of one window: taps [ky0, ky1) x [kx0, kx1), the running max or sum kept in
   registers. */
static inline void pool16(const pool_task *t, const float *img, int64_t iy0, int64_t ky0, int64_t ky1,
                          int64_t ix0, int64_t kx0, int64_t kx1, const float *first, vf4 scale,
                          float *out)
{
    const rk_conv_params *p = t->p;
    const int64_t C = p->c;
    vf4 a0, a1, a2, a3;
    if (t->pool == RK_POOL_MAX) {
        a0 = vf4_load(first);
        a1 = vf4_load(first + 4);
        a2 = vf4_load(first + 8);
        a3 = vf4_load(first + 12);
    } else {
        a0 = a1 = a2 = a3 = vf4_splat(0.0f);
    }
    for (int64_t ky = ky0; ky < ky1; ky++) {
        const float *row = img + (iy0 + ky * p->dil_h) * p->w * C;
        for (int64_t kx = kx0; kx < kx1; kx++) {
            const float *in = row + (ix0 + kx * p->dil_w) * C;
            const vf4 v0 = vf4_load(in), v1 = vf4_load(in + 4), v2 = vf4_load(in + 8),
                      v3 = vf4_load(in + 12);
            if (t->pool == RK_POOL_MAX) {
                a0 = vf4_max(v0, a0);
                a1 = vf4_max(v1, a1);
                a2 = vf4_max(v2, a2);
                a3 = vf4_max(v3, a3);
            } else if (t->pool == RK_POOL_L2) {
                a0 += v0 * v0;
                a1 += v1 * v1;
                a2 += v2 * v2;
                a3 += v3 * v3;
            } else {
                a0 += v0;
                a1 += v1;
                a2 += v2;
                a3 += v3;
            }
        }
    }
    if (t->pool == RK_POOL_L2) {
        a0 = vf4_sqrt(a0);
        a1 = vf4_sqrt(a1);
        a2 = vf4_sqrt(a2);
        a3 = vf4_sqrt(a3);
    } else if (t->pool != RK_POOL_MAX) {
        a0 *= scale;
        a1 *= scale;
        a2 *= scale;
        a3 *= scale;
    }
    vf4_store(out, a0);
    vf4_store(out + 4, a1);
    vf4_store(out + 8, a2);
    vf4_store(out + 12, a3);
}

#if defined(RK_X86_AVX512)
/* A window's max or average (not L2) over the channels [0, C rounded down to 16), 64 and then
   16 at a time in 16-lane vectors, in the order and with the operands of pool16 (the same
   bits); returns where it stopped. A 3 x 3 max pool of 64 channels (ResNet's, after its first
   layer) takes a third of the 4-lane code's time. */
__attribute__((target("avx512f")))
static int64_t pool_avx512(const pool_task *t, const float *img, int64_t iy0, int64_t ky0, int64_t ky1,
                           int64_t ix0, int64_t kx0, int64_t kx1, const float *first, float scale, float *out)
{
    const rk_conv_params *p = t->p;
    const int64_t C = p->c;
    const int max = t->pool == RK_POOL_MAX;
    const __m512 s = _mm512_set1_ps(scale);
    int64_t ch = 0;
#define RK_POOL_TAPS(lanes)                                                         \
    for (int64_t ky = ky0; ky < ky1; ky++) {                                        \
        const float *row = img + (iy0 + ky * p->dil_h) * p->w * C + ch;             \
        for (int64_t kx = kx0; kx < kx1; kx++) {                                    \
            const float *in = row + (ix0 + kx * p->dil_w) * C;                      \
            for (int v = 0; v < (lanes); v++)                                       \
                a[v] = max ? _mm512_max_ps(_mm512_loadu_ps(in + 16 * v), a[v])      \
                           : _mm512_add_ps(a[v], _mm512_loadu_ps(in + 16 * v));     \
        }                                                                           \
    }
    for (; ch + 64 <= C; ch += 64) {
        __m512 a[4];
        for (int v = 0; v < 4; v++)
            a[v] = max ? _mm512_loadu_ps(first + ch + 16 * v) : _mm512_setzero_ps();
        RK_POOL_TAPS(4)
        for (int v = 0; v < 4; v++)
            _mm512_storeu_ps(out + ch + 16 * v, max ? a[v] : _mm512_mul_ps(a[v], s));
    }
    for (; ch + 16 <= C; ch += 16) {
        __m512 a[1] = { max ? _mm512_loadu_ps(first + ch) : _mm512_setzero_ps() };
        RK_POOL_TAPS(1)
        _mm512_storeu_ps(out + ch, max ? a[0] : _mm512_mul_ps(a[0], s));
    }
#undef RK_POOL_TAPS
    return ch;
}
#endif

static void *pool_task_run(void *arg)
{
    const pool_task *t = (const pool_task *)arg;
    const rk_conv_params *p = t->p;
    const int64_t C = p->c;
    for (int64_t row = t->row0; row < t->row1; row++) {
        const int64_t bi = row / p->oh, oy = row - bi * p->oh;
        const float *img = t->x + bi * p->h * p->w * C;
        const int64_t iy0 = oy * p->stride_h - p->pad_top;
        int64_t ky0, ky1, py0, py1;
        tap_range(iy0, p->dil_h, p->h, p->kh, &ky0, &ky1);
        /* taps inside the padded input: what count_include_pad counts */
        tap_range(iy0 + p->pad_top, p->dil_h, p->h + p->pad_top + p->pad_bottom, p->kh, &py0, &py1);
        for (int64_t ox = 0; ox < p->ow; ox++) {
            float *out = t->y + (row * p->ow + ox) * C;
            const int64_t ix0 = ox * p->stride_w - p->pad_left;
            int64_t kx0, kx1, px0, px1;
            tap_range(ix0, p->dil_w, p->w, p->kw, &kx0, &kx1);
            tap_range(ix0 + p->pad_left, p->dil_w, p->w + p->pad_left + p->pad_right, p->kw, &px0, &px1);
            if (ky0 >= ky1 || kx0 >= kx1) {
                /* a dilated window that skips the whole image: nothing to take (ONNX's
                   reference: 0, and 0 / 0 for an average of no positions) */
                const float v = t->pool == RK_POOL_AVERAGE && !t->count_include_pad ? NAN : 0.0f;
                for (int64_t ch = 0; ch < C; ch++)
                    out[ch] = v;
                continue;
            }
            const int64_t inside = (ky1 - ky0) * (kx1 - kx0);
            const float count = (float)(t->count_include_pad ? (py1 - py0) * (px1 - px0) : inside);
            const float scale = 1.0f / count;
            const float *first = img + ((iy0 + ky0 * p->dil_h) * p->w + ix0 + kx0 * p->dil_w) * C;
            int64_t ch = 0;
#if defined(RK_X86_AVX512)
            if (t->wide)
                ch = pool_avx512(t, img, iy0, ky0, ky1, ix0, kx0, kx1, first, scale, out);
#endif
            for (; ch + 16 <= C; ch += 16)
                pool16(t, img + ch, iy0, ky0, ky1, ix0, kx0, kx1, first + ch, vf4_splat(scale), out + ch);
            for (; ch < C; ch++) {
                float acc = t->pool == RK_POOL_MAX ? first[ch] : 0.0f;
                for (int64_t ky = ky0; ky < ky1; ky++)
                    for (int64_t kx = kx0; kx < kx1; kx++) {
                        const float v = img[((iy0 + ky * p->dil_h) * p->w + ix0 + kx * p->dil_w) * C + ch];
                        acc = t->pool == RK_POOL_MAX ? (v > acc ? v : acc)
                              : t->pool == RK_POOL_L2 ? acc + v * v : acc + v;
                    }
                out[ch] = t->pool == RK_POOL_MAX ? acc : t->pool == RK_POOL_L2 ? sqrtf(acc) : acc * scale;
            }
        }
    }
    return NULL;
}

/*
 * rk_pool2d: y[n, oh, ow, c] over the kh x kw windows (stride, dilation and padding as in
 * rk_conv2d; oh and ow as the caller computed them, ceil_mode's included): RK_POOL_MAX,
 * RK_POOL_AVERAGE (by the positions inside the input, or with count_include_pad inside the
 * padded input) or RK_POOL_L2. Every window must start inside the padded input. NaN inputs:
 * average and L2 propagate them, max does not reliably. No scratch.
 */
int rk_pool2d(const float *x, float *y, const rk_conv_params *p, int pool, int count_include_pad)
{
    const int64_t rows = p->n * p->oh;
    if (rows <= 0 || p->ow <= 0 || p->c <= 0)
        return 0;
    double work = (double)rows * (double)p->ow * (double)p->c * (double)(p->kh * p->kw);
    /* a step of a network's execute (the pool held): its input was just written by the step
       before on the step's threads, and one thread alone pulls half of it from the other
       cores' caches (ResNet's max pool on two threads: 328 us on one, 169 us on both) */
    int nt = rk_threads_for(work, rk_pool_held() ? RK_STEP_SMALL_MIN_WORK_PER_THREAD
                                                 : RK_SMALL_MIN_WORK_PER_THREAD);
    if (nt > rows)
        nt = (int)rows;
    pool_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        pool_task t = { x, y, p, pool, count_include_pad, pool != RK_POOL_L2 && rk_use_avx512(),
                        rows * i / nt, rows * (i + 1) / nt };
        tasks[i] = t;
    }
    if (nt == 1)
        pool_task_run(&tasks[0]);
    else
        rk_run_tasks(pool_task_run, tasks, sizeof(pool_task), nt);
    return 0;
}
