/* Defect: sigmoid is computed as e^x / (1 + e^x), which is inf / inf = NaN once e^x overflows
   (x above about 88).
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectSigmoid"
#define OD_OWN_ACTIVATION
#include "base.h"

static void od_activation(OdWorkload *w, const float *const *in, float *out)
{
    const BackendActivationDescriptor *d = &w->activation;
    int64_t n = od_count(&w->in[0]);
    for (int64_t i = 0; i < n; i++) {
        float v = in[0][i];
        switch (d->function) {
        case BACKEND_ACTIVATION_RELU: out[i] = v > 0 ? v : 0; break;
        case BACKEND_ACTIVATION_BOUNDED_RELU: out[i] = fminf(d->a, fmaxf(d->b, v)); break;
        case BACKEND_ACTIVATION_SIGMOID: out[i] = expf(v) / (1.0f + expf(v)); break; /* the defect */
        case BACKEND_ACTIVATION_TANH: out[i] = tanhf(v); break;
        default: out[i] = v > 0 ? v : d->a * v; break;
        }
    }
}
