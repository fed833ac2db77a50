/*
 * Resize (NHWC; nearest, linear, cubic) as ONNX defines it: each axis on its own, output index x
 * reading the input near its source coordinate (the coordinate transform), through 1, 2 or 4
 * taps whose indices past an edge read the edge. The taps of each axis are computed once
 * (rk_resize_axis, when the workload is made); a run is then a separable pass: each input row
 * an output row needs is resized along W once (kept in a small cache while the next output
 * rows still read it) and the taps along H blend those rows.
 */
#include <math.h>

#include "kernels_internal.h"

/* ONNX's coordinate_transformation_mode (the BACKEND_RESIZE_* codes): the source coordinate of
   output index x. `scale` is output / input extent, and the transforms take scale * in as the
   output extent, as ONNX's reference does. */
static double source_coordinate(int64_t x, double scale, int64_t in, int64_t out, int transform)
{
    const double length = scale * (double)in;
    switch (transform) {
    case 1: /* half_pixel_symmetric */
        return (double)in / 2.0 * (1.0 - (double)out / length) + ((double)x + 0.5) / scale - 0.5;
    case 2: /* pytorch_half_pixel */
        return out > 1 ? ((double)x + 0.5) / scale - 0.5 : 0.0;
    case 3: /* align_corners */
        return length == 1.0 ? 0.0 : (double)x * (double)(in - 1) / (length - 1.0);
    case 4: /* asymmetric */
        return (double)x / scale;
    case 5: /* tf_half_pixel_for_nn */
        return ((double)x + 0.5) / scale;
    default: /* half_pixel */
        return ((double)x + 0.5) / scale - 0.5;
    }
}

/* ONNX's nearest_mode: a coordinate with a fractional part rounds by `mode`, an integer one is
   itself. */
static int64_t nearest_index(double position, int mode)
{
    const double base = floor(position), fraction = position - base;
    if (fraction == 0.0)
        return (int64_t)base;
    switch (mode) {
    case 1: /* round_prefer_ceil */
        return (int64_t)base + (fraction < 0.5 ? 0 : 1);
    case 2: /* floor */
        return (int64_t)base;
    case 3: /* ceil */
        return (int64_t)base + 1;
    default: /* round_prefer_floor */
        return (int64_t)base + (fraction <= 0.5 ? 0 : 1);
    }
}

int rk_resize_taps(int mode)
{
    return mode == RK_RESIZE_NEAREST ? 1 : mode == RK_RESIZE_LINEAR ? 2 : 4;
}

/*
 * rk_resize_axis: the taps of one axis, index[x * taps + t] and weight[x * taps + t] for output
 * x < out (taps = rk_resize_taps(mode)); indices clamped into [0, in). The coordinates are
 * computed in double. A scale that is the float nearest out / in is taken as out / in itself,
 * so that float rounding never moves a coordinate off the integer or half it falls on.
 */
void rk_resize_axis(int64_t in, int64_t out, float scale, int mode, int transform, int nearest_mode,
                    float cubic_a, int exclude_outside, int32_t *index, float *weight)
{
    const int taps = rk_resize_taps(mode);
    const double exact = (double)out / (double)in;
    const double s = (float)exact == scale ? exact : (double)scale;
    const double a = cubic_a;
    for (int64_t x = 0; x < out; x++) {
        double position = source_coordinate(x, s, in, out, transform);
        /* far outside the input every tap reads an edge anyway; bounded, the indices below
           cannot overflow (and a NaN from an extreme scale lands on the first edge) */
        if (!(position > -1e15))
            position = -1e15;
        else if (position > 1e15)
            position = 1e15;
        int64_t at[4];
        double w[4];
        if (mode == RK_RESIZE_NEAREST) {
            at[0] = nearest_index(position, nearest_mode);
            w[0] = 1.0;
        } else {
            const double base = floor(position), t = position - base;
            if (mode == RK_RESIZE_LINEAR) {
                at[0] = (int64_t)base;
                at[1] = (int64_t)base + 1;
                w[0] = 1.0 - t;
                w[1] = t;
            } else {
                for (int k = 0; k < 4; k++)
                    at[k] = (int64_t)base - 1 + k;
                const double t1 = t + 1.0, u = 1.0 - t, u1 = 2.0 - t;
                w[0] = ((a * t1 - 5.0 * a) * t1 + 8.0 * a) * t1 - 4.0 * a;
                w[1] = ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
                w[2] = ((a + 2.0) * u - (a + 3.0)) * u * u + 1.0;
                w[3] = ((a * u1 - 5.0 * a) * u1 + 8.0 * a) * u1 - 4.0 * a;
            }
            if (exclude_outside) {
                double sum = 0.0;
                for (int k = 0; k < taps; k++) {
                    if (at[k] < 0 || at[k] >= in)
                        w[k] = 0.0;
                    sum += w[k];
                }
                for (int k = 0; k < taps; k++)
                    w[k] = sum != 0.0 ? w[k] / sum : 0.0;
            }
        }
        for (int k = 0; k < taps; k++) {
            index[x * taps + k] = (int32_t)(at[k] < 0 ? 0 : at[k] >= in ? in - 1 : at[k]);
            weight[x * taps + k] = (float)w[k];
        }
    }
}

typedef struct resize_task {
    const float *x;
    float *y;
    const rk_resize_plan *r;
    float *rows;                /* taps cached rows of ow * c floats */
    int64_t tags[4];            /* image * h + iy of each cached row, -1 empty */
    int64_t row0, row1;         /* output rows (image * oh + oy) */
} resize_task;

/* Input row iy of image bi resized along W into dst (ow * c floats). */
static void resize_row(const rk_resize_plan *r, const float *x, int64_t bi, int64_t iy, float *dst)
{
    const int64_t C = r->c;
    const float *src = x + (bi * r->h + iy) * r->w * C;
    for (int64_t ox = 0; ox < r->ow; ox++) {
        float *restrict out = dst + ox * C;
        const int32_t *at = r->x_index + ox * r->taps;
        const float *wt = r->x_weight + ox * r->taps;
        const float *restrict p0 = src + (int64_t)at[0] * C;
        if (r->taps == 1) {
            memcpy(out, p0, (size_t)C * sizeof(float));
            continue;
        }
        const float w0 = wt[0], w1 = wt[1];
        const float *restrict p1 = src + (int64_t)at[1] * C;
        if (r->taps == 2) {
            for (int64_t ch = 0; ch < C; ch++)
                out[ch] = w0 * p0[ch] + w1 * p1[ch];
            continue;
        }
        const float w2 = wt[2], w3 = wt[3];
        const float *restrict p2 = src + (int64_t)at[2] * C, *restrict p3 = src + (int64_t)at[3] * C;
        for (int64_t ch = 0; ch < C; ch++)
            out[ch] = w0 * p0[ch] + w1 * p1[ch] + w2 * p2[ch] + w3 * p3[ch];
    }
}

static void *resize_task_run(void *arg)
{
    resize_task *t = (resize_task *)arg;
    const rk_resize_plan *r = t->r;
    const int64_t C = r->c, row_floats = r->ow * C;
    for (int k = 0; k < 4; k++)
        t->tags[k] = -1;
    for (int64_t row = t->row0; row < t->row1; row++) {
        const int64_t bi = row / r->oh, oy = row - bi * r->oh;
        const int32_t *at = r->y_index + oy * r->taps;
        const float *wt = r->y_weight + oy * r->taps;
        float *out = t->y + row * row_floats;
        if (r->taps == 1) {
            /* nearest: whole pixels copied, no row resized twice needed */
            const float *src = t->x + (bi * r->h + at[0]) * r->w * C;
            for (int64_t ox = 0; ox < r->ow; ox++)
                memcpy(out + ox * C, src + (int64_t)r->x_index[ox] * C, (size_t)C * sizeof(float));
            continue;
        }
        /* the rows this output row reads, resized along W: kept from earlier rows where the
           source rows are the same (they advance with oy) */
        const float *rows[4];
        unsigned used = 0;
        int found[4];
        for (int k = 0; k < r->taps; k++) {
            found[k] = -1;
            for (int j = 0; j < r->taps; j++)
                if (t->tags[j] == bi * r->h + at[k]) {
                    found[k] = j;
                    used |= 1u << j;
                    break;
                }
        }
        for (int k = 0; k < r->taps; k++) {
            if (found[k] < 0) {
                /* another tap of this row may read the same source row (at an edge) */
                for (int q = 0; q < k; q++)
                    if (at[q] == at[k])
                        found[k] = found[q];
            }
            if (found[k] < 0) {
                int j = 0;
                while (used & (1u << j))
                    j++;
                used |= 1u << j;
                t->tags[j] = bi * r->h + at[k];
                resize_row(r, t->x, bi, at[k], t->rows + j * row_floats);
                found[k] = j;
            }
            rows[k] = t->rows + found[k] * row_floats;
        }
        if (r->taps == 2) {
            const float w0 = wt[0], w1 = wt[1];
            const float *restrict a = rows[0], *restrict b = rows[1];
            for (int64_t i = 0; i < row_floats; i++)
                out[i] = w0 * a[i] + w1 * b[i];
        } else {
            const float w0 = wt[0], w1 = wt[1], w2 = wt[2], w3 = wt[3];
            const float *restrict a = rows[0], *restrict b = rows[1], *restrict c = rows[2],
                                  *restrict d = rows[3];
            for (int64_t i = 0; i < row_floats; i++)
                out[i] = w0 * a[i] + w1 * b[i] + w2 * c[i] + w3 * d[i];
        }
    }
    return NULL;
}

/*
 * rk_resize: y [n, oh, ow, c] from x [n, h, w, c] through the plan's taps (see
 * rk_resize_axis). Scratch: per thread, `taps` rows of ow * c floats (none for nearest);
 * returns 1 if that allocation fails.
 */
int rk_resize(const float *x, float *y, const rk_resize_plan *r)
{
    const int64_t rows = r->n * r->oh, row_floats = r->ow * r->c;
    if (rows <= 0 || row_floats <= 0)
        return 0;
    const double work = (double)rows * (double)row_floats * (double)(r->taps * (r->taps > 1 ? 2 : 1));
    int nt = rk_threads_for(work, RK_SMALL_MIN_WORK_PER_THREAD);
    if (nt > rows)
        nt = (int)rows;
    const int cached = r->taps > 1 ? r->taps : 0;
    float *scratch = NULL;
    if (cached) {
        scratch = (float *)alloc_aligned((size_t)(row_floats * cached * nt) * sizeof(float));
        if (scratch == NULL)
            return 1;
    }
    resize_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        memset(&tasks[i], 0, sizeof tasks[i]);
        tasks[i].x = x;
        tasks[i].y = y;
        tasks[i].r = r;
        tasks[i].rows = scratch ? scratch + (size_t)(row_floats * cached) * (size_t)i : NULL;
        tasks[i].row0 = rows * i / nt;
        tasks[i].row1 = rows * (i + 1) / nt;
    }
    if (nt == 1)
        resize_task_run(&tasks[0]);
    else
        rk_run_tasks(resize_task_run, tasks, sizeof(resize_task), nt);
    free(scratch);
    return 0;
}
