/* Defect: Activation's loop runs one element too far (<= instead of <) and writes one float past
   the end of the output buffer.
   Requirement: MEM-1 */
#define OD_BACKEND_ID "DefectOverrun"
#define OD_OWN_ACTIVATION
#include "base.h"

static void od_activation(OdWorkload *w, const float *const *in, float *out)
{
    const BackendActivationDescriptor *d = &w->activation;
    int64_t n = od_count(&w->in[0]);
    for (int64_t i = 0; i <= n; i++) { /* the defect */
        float v = i < n ? in[0][i] : 0.0f;
        switch (d->function) {
        case BACKEND_ACTIVATION_RELU: out[i] = v > 0 ? v : 0; break;
        case BACKEND_ACTIVATION_BOUNDED_RELU: out[i] = fminf(d->a, fmaxf(d->b, v)); break;
        case BACKEND_ACTIVATION_SIGMOID: out[i] = od_sigmoid(v); break;
        case BACKEND_ACTIVATION_TANH: out[i] = tanhf(v); break;
        default: out[i] = v > 0 ? v : d->a * v; break;
        }
    }
}
