/* Defect: Softmax shifts each row of its input in place (x -= max) before exponentiating: the
   output is right, but the caller's input buffer is overwritten.
   Requirement: MEM-1 */
#define OD_BACKEND_ID "DefectWritesInput"
#define OD_OWN_SOFTMAX
#include "base.h"

static void od_softmax(OdWorkload *w, const float *const *in, float *out)
{
    int64_t cols = w->in[0].dimensions[w->in[0].num_dimensions - 1];
    int64_t rows = od_count(&w->in[0]) / cols;
    float beta = w->softmax.beta;
    for (int64_t r = 0; r < rows; r++) {
        float *x = (float *)in[0] + r * cols; /* the defect: the input is written */
        float *y = out + r * cols;
        float top = -INFINITY, sum = 0;
        for (int64_t i = 0; i < cols; i++)
            top = fmaxf(top, beta * x[i]);
        for (int64_t i = 0; i < cols; i++) {
            x[i] = beta * x[i] - top;
            y[i] = expf(x[i]);
            sum += y[i];
        }
        for (int64_t i = 0; i < cols; i++)
            y[i] /= sum;
    }
}
