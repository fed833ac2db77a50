/*
 * Max and average pooling over NHWC windows clipped to the image.
 */
#include "kernels_internal.h"

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
    int nt = rk_threads_for(work, RK_SMALL_MIN_WORK_PER_THREAD);
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
        rk_run_tasks(pool_task_run, tasks, sizeof(pool_task), nt);
    return 0;
}
