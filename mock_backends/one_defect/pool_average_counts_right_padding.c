/* Defect: average Pooling2d divides by a count that includes the padded cells on the right side
   (the other sides are excluded correctly).
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectPoolAverageRight"
#define OD_OWN_POOLING
#include "base.h"

static void od_pooling(OdWorkload *w, const float *const *in, float *out)
{
    const BackendPooling2dDescriptor *d = &w->pool;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    int max = d->pool_type == BACKEND_POOLING_MAX;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                float *y = out + ((n * OH + oy) * OW + ox) * C;
                int64_t count = 0;
                for (int64_t c = 0; c < C; c++)
                    y[c] = max ? -INFINITY : 0.0f;
                for (int64_t i = 0; i < d->kernel_y; i++) {
                    int64_t iy = oy * d->stride_y + i - d->pad_top;
                    for (int64_t j = 0; j < d->kernel_x; j++) {
                        int64_t ix = ox * d->stride_x + j - d->pad_left;
                        const float *x;
                        if (ix >= W && iy >= 0 && iy < H)
                            count++; /* the defect: right padding is counted */
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                            continue;
                        x = in[0] + ((n * H + iy) * W + ix) * C;
                        count++;
                        if (max)
                            for (int64_t c = 0; c < C; c++)
                                y[c] = x[c] > y[c] ? x[c] : y[c];
                        else
                            for (int64_t c = 0; c < C; c++)
                                y[c] += x[c];
                    }
                }
                if (!max)
                    for (int64_t c = 0; c < C; c++)
                        y[c] /= (float)count;
            }
}
