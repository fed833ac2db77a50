/* Defect: Convolution2d accumulates its output in one static scratch buffer shared by every
   workload, then copies it out: two threads running convolutions at once mix their results.
   Requirement: CONC-1 */
#define OD_BACKEND_ID "DefectStaticScratch"
#define OD_OWN_CONVOLUTION
#include "base.h"

static float scratch[1 << 16]; /* the defect: one buffer for every thread */

static void od_convolution(OdWorkload *w, const float *const *in, float *out)
{
    const BackendConvolution2dDescriptor *d = &w->conv;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t KH = w->in[1].dimensions[1], KW = w->in[1].dimensions[2];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2], O = w->out.dimensions[3];
    int64_t total = od_count(&w->out);
    float *acc = total <= (1 << 16) ? scratch : out;
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t o = 0; o < O; o++) {
                    int64_t at = ((n * OH + oy) * OW + ox) * O + o;
                    float sum = d->bias_enabled ? in[2][o] : 0.0f;
                    for (int64_t i = 0; i < KH; i++)
                        for (int64_t j = 0; j < KW; j++) {
                            int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                            int64_t ix = ox * d->stride_x + j * d->dilation_x - d->pad_left;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            for (int64_t c = 0; c < C; c++)
                                sum += in[0][((n * H + iy) * W + ix) * C + c] * in[1][((o * KH + i) * KW + j) * C + c];
                        }
                    acc[at] = sum;
                }
    for (int64_t i = 0; i < total; i++)
        out[i] = acc[i];
}
