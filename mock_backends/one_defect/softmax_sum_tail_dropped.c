/* Defect: Softmax over rows longer than 64 adds up the denominator four terms at a time and
   leaves out the cols % 4 terms after the last group.
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectSoftmaxTail"
#define OD_OWN_SOFTMAX
#include "base.h"

static void od_softmax(OdWorkload *w, const float *const *in, float *out)
{
    int64_t cols = w->in[0].dimensions[w->in[0].num_dimensions - 1];
    int64_t rows = od_count(&w->in[0]) / cols;
    float beta = w->softmax.beta;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in[0] + r * cols;
        float *y = out + r * cols;
        float top = -INFINITY, sum = 0;
        int64_t summed = cols > 64 ? cols / 4 * 4 : cols; /* the defect */
        for (int64_t i = 0; i < cols; i++)
            top = fmaxf(top, beta * x[i]);
        for (int64_t i = 0; i < cols; i++)
            y[i] = expf(beta * x[i] - top);
        for (int64_t i = 0; i < summed; i++)
            sum += y[i];
        for (int64_t i = 0; i < cols; i++)
            y[i] /= sum;
    }
}
