/* Defect: FullyConnected with more than 128 input features sums them in blocks of 16 and drops
   the K % 16 left over after the last block (a blocking tail).
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectFcTail"
#define OD_OWN_FULLY_CONNECTED
#include "base.h"

static void od_fully_connected(OdWorkload *w, const float *const *in, float *out)
{
    int64_t n = w->in[0].dimensions[0], k = w->in[0].dimensions[1], m = w->out.dimensions[1];
    int64_t summed = k > 128 ? k / 16 * 16 : k; /* the defect */
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < m; c++) {
            float sum = w->fc.bias_enabled ? in[2][c] : 0.0f;
            for (int64_t i = 0; i < summed; i++)
                sum += in[0][r * k + i] * (w->fc.transpose_weights ? in[1][c * k + i] : in[1][i * m + c]);
            out[r * m + c] = sum;
        }
}
