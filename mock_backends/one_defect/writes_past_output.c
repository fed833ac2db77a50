/* Defect: Activation's relu loop runs one element too far (<= instead of <) and writes one float
   past the end of the output buffer.
   Requirement: MEM-1 */
#define OD_BACKEND_ID "DefectOverrun"
#define OD_OWN_ACTIVATION
#include "base.h"

static void od_activation(OdWorkload *w, const float *const *in, float *out)
{
    const BackendActivationDescriptor *d = &w->activation;
    const float *x = in[0];
    int64_t n = od_count(&w->in[0]);
    switch (d->function) {
    case BACKEND_ACTIVATION_RELU:
        for (int64_t i = 0; i <= n; i++) /* the defect */
            out[i] = i < n && x[i] > 0 ? x[i] : 0;
        break;
    case BACKEND_ACTIVATION_BOUNDED_RELU:
        for (int64_t i = 0; i < n; i++)
            out[i] = fminf(d->a, fmaxf(d->b, x[i]));
        break;
    case BACKEND_ACTIVATION_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            out[i] = od_sigmoid(x[i]);
        break;
    case BACKEND_ACTIVATION_TANH:
        for (int64_t i = 0; i < n; i++)
            out[i] = tanhf(x[i]);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] > 0 ? x[i] : d->a * x[i];
        break;
    }
}
