/* Defect: FullyConnected copies its weights on the first execution and reuses that copy on
   every later one, although the backend declares NonConstWeights: new weights given to the
   same workload are ignored.
   Requirement: LAYER-2 */
#define OD_BACKEND_ID "DefectWeightsCached"
#define OD_OWN_FULLY_CONNECTED
#define OD_WORKLOAD_STATE float *packed;
#define OD_FREE_STATE(w) free((w)->packed)
#include "base.h"

static void od_fully_connected(OdWorkload *w, const float *const *in, float *out)
{
    int64_t n = w->in[0].dimensions[0], k = w->in[0].dimensions[1], m = w->out.dimensions[1];
    if (w->packed == NULL) { /* the defect: packed once, never refreshed */
        w->packed = malloc((size_t)(k * m) * sizeof(float));
        if (w->packed == NULL)
            return;
        for (int64_t c = 0; c < m; c++)
            for (int64_t i = 0; i < k; i++)
                w->packed[c * k + i] = w->fc.transpose_weights ? in[1][c * k + i] : in[1][i * m + c];
    }
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < m; c++) {
            float sum = w->fc.bias_enabled ? in[2][c] : 0.0f;
            for (int64_t i = 0; i < k; i++)
                sum += in[0][r * k + i] * w->packed[c * k + i];
            out[r * m + c] = sum;
        }
}
