/* Defect: a grouped Convolution2d pairs output channel o with input group o % groups (as if the
   groups were interleaved) instead of o / (O / groups): every group with more than one output
   reads another group's channels. Depthwise with one output per channel still comes out right.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectGroupedConvInterleaved"
#define OD_OWN_GROUPED_CONVOLUTION
#include "base.h"

static void od_grouped_convolution(OdWorkload *w, const float *const *in, float *out)
{
    const BackendConvolution2dDescriptor *d = &w->conv;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t KH = w->in[1].dimensions[1], KW = w->in[1].dimensions[2], CG = w->in[1].dimensions[3];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2], O = w->out.dimensions[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t o = 0; o < O; o++) {
                    int64_t first = o % d->groups * CG; /* the defect: o / (O / groups) * CG */
                    double sum = d->bias_enabled ? in[2][o] : 0.0;
                    for (int64_t i = 0; i < KH; i++) {
                        int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                        for (int64_t j = 0; j < KW && iy >= 0 && iy < H; j++) {
                            int64_t ix = ox * d->stride_x + j * d->dilation_x - d->pad_left;
                            if (ix < 0 || ix >= W)
                                continue;
                            for (int64_t c = 0; c < CG; c++)
                                sum += (double)in[0][((n * H + iy) * W + ix) * C + first + c] *
                                       in[1][((o * KH + i) * KW + j) * CG + c];
                        }
                    }
                    out[((n * OH + oy) * OW + ox) * O + o] = (float)sum;
                }
}
