/* Defect: max Pooling2d reads the first cell of each window before checking that it lies inside
   the input (it keeps the value only when it does): results are right, but windows that start
   in the top or left padding read memory before the start of the input buffer.
   Requirement: MEM-1 */
#define OD_BACKEND_ID "DefectUnderread"
#define OD_OWN_POOLING
#include "base.h"

static void od_pooling(OdWorkload *w, const float *const *in, float *out)
{
    const BackendPooling2dDescriptor *d = &w->pool;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    const volatile float *x = in[0];
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < C; c++) {
                    int64_t y0 = oy * d->stride_y - d->pad_top, x0 = ox * d->stride_x - d->pad_left;
                    float first = x[((n * H + y0) * W + x0) * C + c]; /* the defect: read before the check */
                    float best = (y0 >= 0 && x0 >= 0) ? first : -INFINITY, sum = 0;
                    int64_t count = 0;
                    for (int64_t i = 0; i < d->kernel_y; i++)
                        for (int64_t j = 0; j < d->kernel_x; j++) {
                            int64_t iy = y0 + i, ix = x0 + j;
                            float v;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            v = x[((n * H + iy) * W + ix) * C + c];
                            best = v > best ? v : best;
                            sum += v;
                            count++;
                        }
                    out[((n * OH + oy) * OW + ox) * C + c] = d->pool_type == BACKEND_POOLING_MAX ? best : sum / (float)count;
                }
}
