/* Defect: Convolution2d applies dilation_y along both axes (dilation_x is never read), which is
   right only when the two are equal.
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectConvDilation"
#define OD_OWN_CONVOLUTION
#include "base.h"

static void od_convolution(OdWorkload *w, const float *const *in, float *out)
{
    const BackendConvolution2dDescriptor *d = &w->conv;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t KH = w->in[1].dimensions[1], KW = w->in[1].dimensions[2];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2], O = w->out.dimensions[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t o = 0; o < O; o++) {
                    float sum = d->bias_enabled ? in[2][o] : 0.0f;
                    for (int64_t i = 0; i < KH; i++)
                        for (int64_t j = 0; j < KW; j++) {
                            int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                            int64_t ix = ox * d->stride_x + j * d->dilation_y - d->pad_left; /* the defect */
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            for (int64_t c = 0; c < C; c++)
                                sum += in[0][((n * H + iy) * W + ix) * C + c] * in[1][((o * KH + i) * KW + j) * C + c];
                        }
                    out[((n * OH + oy) * OW + ox) * O + o] = sum;
                }
}
