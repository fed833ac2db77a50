/* Defect: average Pooling2d divides by the positions inside the input even when
   count_include_pad asks it to count the padded ones too.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectPoolCountIncludePad"
#define OD_OWN_POOLING13
#include "base.h"

static void od_pooling13(OdWorkload *w, const float *const *in, float *out)
{
    const BackendPooling2dDescriptor *d = &w->pool;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < C; c++) {
                    double acc = 0, best = -INFINITY;
                    int64_t inside = 0;
                    for (int64_t i = 0; i < d->kernel_y; i++) {
                        int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                        for (int64_t j = 0; j < d->kernel_x; j++) {
                            int64_t ix = ox * d->stride_x + j * d->dilation_x - d->pad_left;
                            float v;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            v = in[0][((n * H + iy) * W + ix) * C + c];
                            inside++;
                            best = v > best ? v : best;
                            acc += d->pool_type == BACKEND_POOLING_L2 ? (double)v * v : v;
                        }
                    }
                    float *y = out + ((n * OH + oy) * OW + ox) * C + c;
                    if (inside == 0)
                        *y = 0.0f;
                    else if (d->pool_type == BACKEND_POOLING_MAX)
                        *y = (float)best;
                    else if (d->pool_type == BACKEND_POOLING_L2)
                        *y = (float)sqrt(acc);
                    else
                        *y = (float)(acc / (double)inside); /* the defect: count_include_pad unread */
                }
}
