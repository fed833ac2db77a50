/* Defect: Softmax over any axis ignores log: a LogSoftmax comes out as the plain softmax.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectSoftmaxLogIgnored"
#define OD_OWN_SOFTMAX13
#include "base.h"

static void od_softmax13(OdWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *x = &w->in[0];
    uint32_t axis = w->softmax.axis;
    int64_t outer = 1, inner = 1, len = x->dimensions[axis];
    float beta = w->softmax.beta;
    for (uint32_t d = 0; d < x->num_dimensions; d++)
        if (d != axis)
            *(d < axis ? &outer : &inner) *= x->dimensions[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *v = in[0] + o * len * inner + i;
            float *y = out + o * len * inner + i;
            double top = -INFINITY, sum = 0;
            for (int64_t k = 0; k < len; k++)
                top = fmax(top, (double)beta * v[k * inner]);
            for (int64_t k = 0; k < len; k++)
                sum += exp((double)beta * v[k * inner] - top);
            for (int64_t k = 0; k < len; k++) /* the defect: w->softmax.log is never read */
                y[k * inner] = (float)(exp((double)beta * v[k * inner] - top) / sum);
        }
}
