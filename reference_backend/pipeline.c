/*
 * The steps of an inverted residual block run as one pipeline: a pointwise convolution that
 * expands a few channels into many, the depthwise convolution that alone reads the expansion,
 * and the pointwise projection that alone reads the depthwise output (MobileNet's and
 * EfficientNet's blocks; a pipeline may also be the first two or the last two of them). The
 * expanded tensor (MobileNetV2's 112 x 112 x 96 is 4.8 MB) and the depthwise output exist only
 * a band of rows at a time, in buffers that stay in the core's L2 cache: the expansion of the
 * input rows a band of depthwise output rows needs, those depthwise rows, and their projection,
 * then the next band. Neither tensor is written out to memory and read back.
 *
 * Every value is what the steps compute apart, with the same kernels and the same sums in the
 * same order (rk_conv2d_packed on a band of rows; the depthwise row kernels reading and writing
 * bands through dw_task.first_row and y_first_row): the results are the same bits, for any band
 * and thread count.
 */
#include "kernels_internal.h"

/* A thread's band buffers: what stays in L2 beside the GEMM's own blocks. */
#ifndef RK_PIPELINE_BAND_BYTES
#define RK_PIPELINE_BAND_BYTES (384 * 1024)
#endif

/* Expanded rows a band of `band` depthwise output rows reads. */
static int64_t band_rows(const rk_conv_params *dw, int64_t band)
{
    return (band - 1) * dw->stride_h + (dw->kh - 1) * dw->dil_h + 1;
}

static int64_t band_floats(const rk_conv_params *dw, int expands, int projects, int64_t band)
{
    return (expands ? band_rows(dw, band) * dw->w * dw->c : 0) + (projects ? band * dw->ow * dw->c : 0);
}

/* Depthwise output rows per band: as many as keep the buffers within RK_PIPELINE_BAND_BYTES
   (at least 1). */
static int64_t band_outputs(const rk_conv_params *dw, int expands, int projects)
{
    int64_t band = 1;
    while (band < dw->oh &&
           band_floats(dw, expands, projects, band + 1) * (int64_t)sizeof(float) <= RK_PIPELINE_BAND_BYTES)
        band++;
    return band;
}

int rk_pipeline_available(void)
{
    return rk_use_avx512();
}

int64_t rk_pipeline_scratch_floats(const rk_conv_params *dw, int expands, int projects, int threads)
{
    const int64_t per = band_floats(dw, expands, projects, band_outputs(dw, expands, projects));
    return ceil_div(per, 16) * 16 * (int64_t)(threads > 1 ? threads : 1);
}

#if defined(RK_X86_AVX512)
typedef struct pipeline_task {
    const rk_pipeline *pl;
    float *band, *mid;                  /* the expanded rows; the depthwise output rows */
    int64_t row0, row1;                 /* depthwise output rows over n * oh */
    int failed;
} pipeline_task;

/* The pointwise convolution (window pw, output channels o) of `rows` rows (of pw->w pixels) of
   one image at x into y, on this thread; its residual, if any, offset to those pixels (`first`
   pixels into the batch). */
static int pointwise_rows(const float *x, const float *w, const float *packed, const float *bias,
                          const rk_conv_params *pw, int64_t o, const rk_epilogue *e, int64_t first,
                          int64_t rows, float *y)
{
    rk_conv_params band = *pw;
    band.n = 1;
    band.h = band.oh = rows;
    rk_epilogue at = *e;
    if (at.residual != NULL)
        at.residual += first * at.ldr;
    return rk_conv2d_packed(x, w, packed, bias, y, &band, o, &at, 1);
}

static void *pipeline_run(void *arg)
{
    pipeline_task *t = (pipeline_task *)arg;
    const rk_pipeline *pl = t->pl;
    const rk_conv_params *dw = pl->dw;
    const int64_t H = dw->h, W = dw->w, C = dw->c, row_floats = W * C;
    const int64_t band = band_outputs(dw, pl->pw != NULL, pl->proj != NULL);
    int64_t have_image = -1, have_lo = 0, have_hi = 0;  /* expanded rows in the band buffer */
    rk_conv_params one = *dw;
    one.n = 1;
    for (int64_t row = t->row0; row < t->row1;) {
        const int64_t bi = row / dw->oh, oy0 = row - bi * dw->oh;
        const int64_t oy1 = min_i64(dw->oh, min_i64(oy0 + band, oy0 + (t->row1 - row)));
        const float *source = pl->x + bi * H * W * C;  /* no expansion: the depthwise input */
        int64_t first_row = 0;
        if (pl->pw != NULL) {
            int64_t need_lo = max_i64(0, oy0 * dw->stride_h - dw->pad_top);
            int64_t need_hi = min_i64(H, (oy1 - 1) * dw->stride_h - dw->pad_top + (dw->kh - 1) * dw->dil_h + 1);
            if (need_hi <= need_lo)     /* every tap in the padding: no input row */
                need_lo = need_hi = have_hi;
            if (have_image != bi || need_lo < have_lo || need_lo >= have_hi) {
                have_image = bi;        /* nothing in the buffer is needed again */
                have_lo = have_hi = need_lo;
            } else if (need_lo > have_lo) { /* the rows still needed move to the front */
                memmove(t->band, t->band + (need_lo - have_lo) * row_floats,
                        (size_t)((have_hi - need_lo) * row_floats) * sizeof(float));
                have_lo = need_lo;
            }
            if (need_hi > have_hi) {
                /* the expansion of input rows [have_hi, need_hi) */
                const int64_t cin = pl->pw->c;
                if (pointwise_rows(pl->x + (bi * H + have_hi) * W * cin, pl->w1, pl->w1_packed, pl->b1, pl->pw,
                                   C, pl->e1, (bi * H + have_hi) * W, need_hi - have_hi,
                                   t->band + (have_hi - have_lo) * row_floats)) {
                    t->failed = 1;
                    return NULL;
                }
                have_hi = need_hi;
            }
            source = t->band;
            first_row = have_lo;
        }
        const int64_t first_out = (bi * dw->oh + oy0) * dw->ow;   /* pixels before the band */
        float *out = pl->proj != NULL ? t->mid : pl->y + first_out * C;
        rk_depthwise_rows(source, first_row, pl->w2, pl->b2, out, &one, oy0, oy1, pl->e2);
        if (pl->proj != NULL &&
            pointwise_rows(t->mid, pl->w3, pl->w3_packed, pl->b3, pl->proj, pl->proj_out, pl->e3, first_out,
                           oy1 - oy0, pl->y + first_out * pl->proj_out)) {
            t->failed = 1;
            return NULL;
        }
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
    const int expands = pl->pw != NULL, projects = pl->proj != NULL;
    int nt = (int)max_i64(1, min_i64(min_i64(threads, rk_thread_count()), rows));
    const int64_t per = rk_pipeline_scratch_floats(dw, expands, projects, 1);
    const int64_t band = band_outputs(dw, expands, projects);
    pipeline_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        tasks[i].pl = pl;
        tasks[i].band = scratch + i * per;
        tasks[i].mid = tasks[i].band + (expands ? band_rows(dw, band) * dw->w * dw->c : 0);
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
