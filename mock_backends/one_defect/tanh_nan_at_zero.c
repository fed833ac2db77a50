/* Defect: tanh is computed from |x| and the sign x / |x|, which is 0 / 0 = NaN for +0 and -0.
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectTanhZero"
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
        case BACKEND_ACTIVATION_SIGMOID: out[i] = od_sigmoid(v); break;
        case BACKEND_ACTIVATION_TANH: out[i] = v / fabsf(v) * tanhf(fabsf(v)); break; /* the defect */
        default: out[i] = v > 0 ? v : d->a * v; break;
        }
    }
}
