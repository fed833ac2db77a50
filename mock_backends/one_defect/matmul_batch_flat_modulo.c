/* Defect: MatMul does not broadcast the batch axis by axis: batch b of the output reads batch
   b % (the operand's batch count) of each operand, which is right when one operand has a single
   batch or both have the output's, and wrong when each broadcasts along a different axis.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectMatMulBatch"
#define OD_OWN_MAT_MUL
#include "base.h"

static void od_mat_mul(OdWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *a = &w->in[0], *b = &w->in[1];
    uint32_t ra = a->num_dimensions, rb = b->num_dimensions;
    int64_t m = ra > 1 ? a->dimensions[ra - 2] : 1, k = a->dimensions[ra - 1], n = rb > 1 ? b->dimensions[rb - 1] : 1;
    int64_t batches_a = od_count(a) / (m * k), batches_b = od_count(b) / (k * n);
    int64_t batches = od_count(&w->out) / (m * n), o = 0;
    for (int64_t batch = 0; batch < batches; batch++) {
        const float *x = in[0] + batch % batches_a * m * k; /* the defect */
        const float *y = in[1] + batch % batches_b * k * n;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double sum = 0;
                for (int64_t t = 0; t < k; t++)
                    sum += (double)x[i * k + t] * y[t * n + j];
                out[o++] = (float)sum;
            }
    }
}
