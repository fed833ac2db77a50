/*
 * A pointwise convolution and the depthwise convolution that alone reads its output, run as one
 * pipeline: the inverted residual blocks of MobileNet and EfficientNet expand a few channels
 * into many (MobileNetV2's 112 x 112 x 96 is 4.8 MB) only for the depthwise convolution to read
 * them once. Here the expansion is computed a band of rows at a time into a buffer that stays in
 * the core's L2 cache, and the depthwise output rows those rows complete are computed from it at
 * once: the expanded tensor is never written out to memory and read back.
 *
 * Every value is what the two steps compute apart, with the same kernels and the same sums in
 * the same order (rk_conv2d_packed on a band of rows; the depthwise row kernels reading the band
 * through dw_task.first_row): the results are the same bits, for any band and thread count.
 */
#include "kernels_internal.h"

/* The band buffer of one thread: what stays in L2 beside the GEMM's own blocks. */
#ifndef RK_PIPELINE_BAND_BYTES
#define RK_PIPELINE_BAND_BYTES (384 * 1024)
#endif

/* Expanded rows a band buffer holds: the depthwise window's rows for `band` output rows. */
static int64_t band_rows(const rk_conv_params *dw, int64_t band)
{
    return (band - 1) * dw->stride_h + (dw->kh - 1) * dw->dil_h + 1;
}

/* Output rows per band: as many as keep the buffer within RK_PIPELINE_BAND_BYTES (at least 1). */
static int64_t band_outputs(const rk_conv_params *dw)
{
    const int64_t row_floats = dw->w * dw->c;
    int64_t band = 1;
    while (band < dw->oh && band_rows(dw, band + 1) * row_floats * (int64_t)sizeof(float) <= RK_PIPELINE_BAND_BYTES)
        band++;
    return band;
}

int64_t rk_pipeline_scratch_floats(const rk_conv_params *dw, int threads)
{
    const int64_t per = band_rows(dw, band_outputs(dw)) * dw->w * dw->c;
    return ceil_div(per, 16) * 16 * (int64_t)(threads > 1 ? threads : 1);
}

int rk_pipeline_available(void)
{
    return rk_use_avx512();
}

#if defined(RK_X86_AVX512)
typedef struct pipeline_task {
    const rk_pipeline *pl;
    float *band;                        /* band_rows(dw, band_outputs(dw)) rows */
    int64_t row0, row1;                 /* depthwise output rows over n * oh */
    int failed;
} pipeline_task;

static void *pipeline_run(void *arg)
{
    pipeline_task *t = (pipeline_task *)arg;
    const rk_pipeline *pl = t->pl;
    const rk_conv_params *dw = pl->dw;
    const int64_t H = dw->h, W = dw->w, C = dw->c, cin = pl->pw->c, row_floats = W * C;
    const int64_t band = band_outputs(dw);
    int64_t have_image = -1, have_lo = 0, have_hi = 0;  /* expanded rows in the buffer */
    rk_conv_params one = *dw;
    one.n = 1;
    for (int64_t row = t->row0; row < t->row1;) {
        const int64_t bi = row / dw->oh, oy0 = row - bi * dw->oh;
        const int64_t oy1 = min_i64(dw->oh, min_i64(oy0 + band, oy0 + (t->row1 - row)));
        int64_t need_lo = oy0 * dw->stride_h - dw->pad_top;
        int64_t need_hi = (oy1 - 1) * dw->stride_h - dw->pad_top + (dw->kh - 1) * dw->dil_h + 1;
        need_lo = max_i64(0, need_lo);
        need_hi = min_i64(H, need_hi);
        if (need_hi <= need_lo) {       /* every tap in the padding: no input row */
            need_lo = need_hi = have_hi;
        }
        if (have_image != bi || need_lo < have_lo || need_lo >= have_hi) {
            have_image = bi;            /* nothing in the buffer is needed again */
            have_lo = have_hi = need_lo;
        } else if (need_lo > have_lo) { /* the rows still needed move to the front */
            memmove(t->band, t->band + (need_lo - have_lo) * row_floats,
                    (size_t)((have_hi - need_lo) * row_floats) * sizeof(float));
            have_lo = need_lo;
        }
        if (need_hi > have_hi) {
            /* the expansion of input rows [have_hi, need_hi): one pointwise convolution of
               those rows' pixels, on this thread */
            rk_conv_params rows = *pl->pw;
            rows.n = 1;
            rows.h = rows.oh = need_hi - have_hi;
            if (rk_conv2d_packed(pl->x + (bi * H + have_hi) * W * cin, pl->w1, pl->w1_packed, pl->b1,
                                 t->band + (have_hi - have_lo) * row_floats, &rows, C, pl->e1, 1)) {
                t->failed = 1;
                return NULL;
            }
            have_hi = need_hi;
        }
        rk_depthwise_rows(t->band, have_lo, pl->w2, pl->b2, pl->y + bi * dw->oh * dw->ow * C, &one, oy0,
                          oy1, pl->e2);
        row += oy1 - oy0;
    }
    return NULL;
}

#endif

int rk_pointwise_depthwise(const rk_pipeline *pl, float *scratch, int threads)
{
#if !defined(RK_X86_AVX512)
    (void)pl, (void)scratch, (void)threads;
    return 1;
#else
    const rk_conv_params *dw = pl->dw;
    const int64_t rows = dw->n * dw->oh;
    if (rows <= 0)
        return 0;
    int nt = (int)max_i64(1, min_i64(min_i64(threads, rk_thread_count()), rows));
    const int64_t per = rk_pipeline_scratch_floats(dw, 1);
    pipeline_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        tasks[i].pl = pl;
        tasks[i].band = scratch + i * per;
        tasks[i].row0 = rows * i / nt;
        tasks[i].row1 = rows * (i + 1) / nt;
        tasks[i].failed = 0;
    }
    if (nt == 1)
        pipeline_run(&tasks[0]);
    else
        rk_run_tasks(pipeline_run, tasks, sizeof(pipeline_task), nt);
    for (int i = 0; i < nt; i++)
        if (tasks[i].failed)
            return 1;
    return 0;
#endif
}
