/* Defect: Softmax subtracts beta times the row maximum of x, which is the maximum of beta * x
   only for beta >= 0: with a negative beta and large inputs e^(beta * x - shift) overflows.
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectSoftmaxBeta"
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
        for (int64_t i = 0; i < cols; i++)
            top = fmaxf(top, x[i]);
        for (int64_t i = 0; i < cols; i++) {
            y[i] = expf(beta * x[i] - beta * top); /* the defect: max of x, not of beta * x */
            sum += y[i];
        }
        for (int64_t i = 0; i < cols; i++)
            y[i] /= sum;
    }
}
