/* Defect: Activation remembers the input pointer of its last execution and, when it is handed
   the same buffer again, copies its previous output instead of reading the (new) values.
   Requirement: LAYER-2 */
#define OD_BACKEND_ID "DefectMemoized"
#define OD_OWN_ACTIVATION
#define OD_WORKLOAD_STATE const float *last_input; float *last_output;
#define OD_FREE_STATE(w) free((w)->last_output)
#include "base.h"

static void od_activation(OdWorkload *w, const float *const *in, float *out)
{
    const BackendActivationDescriptor *d = &w->activation;
    int64_t n = od_count(&w->in[0]);
    if (w->last_input == in[0] && w->last_output != NULL) { /* the defect */
        memcpy(out, w->last_output, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float v = in[0][i];
        switch (d->function) {
        case BACKEND_ACTIVATION_RELU: out[i] = v > 0 ? v : 0; break;
        case BACKEND_ACTIVATION_BOUNDED_RELU: out[i] = fminf(d->a, fmaxf(d->b, v)); break;
        case BACKEND_ACTIVATION_SIGMOID: out[i] = od_sigmoid(v); break;
        case BACKEND_ACTIVATION_TANH: out[i] = tanhf(v); break;
        default: out[i] = v > 0 ? v : d->a * v; break;
        }
    }
    free(w->last_output);
    w->last_output = malloc((size_t)n * sizeof(float));
    if (w->last_output != NULL)
        memcpy(w->last_output, out, (size_t)n * sizeof(float));
    w->last_input = in[0];
}
