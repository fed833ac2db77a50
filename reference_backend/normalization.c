/*
 * BatchNormalization (inference, over the last axis) and LayerNormalization (over trailing axes,
 * biased variance): statistics in double, the normalization itself 4 lanes at a time.
 */
#include <math.h>

#include "kernels_internal.h"

typedef struct affine_call {
    const float *x, *scale, *shift;
    float *y;
    int64_t channels;
} affine_call;

/* y = x * scale + shift per channel, over the rows [first, last). */
static void affine_rows(void *ctx, int64_t first, int64_t last)
{
    const affine_call *c = ctx;
    const int64_t n = c->channels;
    for (int64_t r = first; r < last; r++) {
        const float *xr = c->x + r * n;
        float *yr = c->y + r * n;
        for (int64_t j = 0; j < n; j++)
            yr[j] = xr[j] * c->scale[j] + c->shift[j];
    }
}

int rk_batch_normalization(const float *x, const float *mean, const float *variance,
                           const float *scale, const float *bias, float *y, int64_t rows,
                           int64_t channels, float epsilon)
{
    float *factors = malloc((size_t)(2 * channels) * sizeof *factors);
    if (factors == NULL)
        return 1;
    /* one multiply-add per element: scale / sqrt(variance + epsilon), then what it shifts by */
    for (int64_t j = 0; j < channels; j++) {
        double s = (double)scale[j] / sqrt((double)variance[j] + (double)epsilon);
        factors[j] = (float)s;
        factors[channels + j] = (float)((double)bias[j] - (double)mean[j] * s);
    }
    affine_call c = { x, factors, factors + channels, y, channels };
    rk_parallel_for(rows, 1, (double)channels, RK_COPY_MIN_PER_THREAD, affine_rows, &c);
    free(factors);
    return 0;
}

typedef struct layer_norm_call {
    const float *x, *scale, *bias;
    float *y;
    int64_t cols;
    float epsilon;
} layer_norm_call;

static void layer_norm_rows(void *ctx, int64_t first, int64_t last)
{
    const layer_norm_call *c = ctx;
    const int64_t n = c->cols;
    for (int64_t r = first; r < last; r++) {
        const float *xr = c->x + r * n;
        float *yr = c->y + r * n;
        double lane[8] = { 0 }, sum = 0.0, squares = 0.0;
        int64_t j = 0;
        for (; j + 8 <= n; j += 8)
            for (int l = 0; l < 8; l++)
                lane[l] += (double)xr[j + l];
        for (; j < n; j++)
            sum += (double)xr[j];
        for (int l = 0; l < 8; l++)
            sum += lane[l];
        const double mean = sum / (double)n;
        /* two passes: the variance of values far from 0 keeps its precision */
        for (int l = 0; l < 8; l++)
            lane[l] = 0.0;
        for (j = 0; j + 8 <= n; j += 8)
            for (int l = 0; l < 8; l++) {
                double d = (double)xr[j + l] - mean;
                lane[l] += d * d;
            }
        for (; j < n; j++)
            squares += ((double)xr[j] - mean) * ((double)xr[j] - mean);
        for (int l = 0; l < 8; l++)
            squares += lane[l];
        const float m = (float)mean;
        const float inv = (float)(1.0 / sqrt(squares / (double)n + (double)c->epsilon));
        if (c->bias != NULL)
            for (j = 0; j < n; j++)
                yr[j] = (xr[j] - m) * inv * c->scale[j] + c->bias[j];
        else
            for (j = 0; j < n; j++)
                yr[j] = (xr[j] - m) * inv * c->scale[j];
    }
}

int rk_layer_normalization(const float *x, const float *scale, const float *bias, float *y,
                           int64_t rows, int64_t cols, float epsilon)
{
    layer_norm_call c = { x, scale, bias, y, cols, epsilon };
    rk_parallel_for(rows, 1, 4.0 * (double)cols, RK_COPY_MIN_PER_THREAD, layer_norm_rows, &c);
    return 0;
}
