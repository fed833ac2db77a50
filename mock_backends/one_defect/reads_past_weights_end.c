/* Defect: FullyConnected (transposed weights) reads each weight row four floats at a time and
   reads a whole group even when fewer than four remain: the products past the row are masked
   out, so results are right, but the last row reads up to three floats past the end of w.
   Requirement: MEM-1 */
#define OD_BACKEND_ID "DefectOverread"
#define OD_OWN_FULLY_CONNECTED
#include "base.h"

static void od_fully_connected(OdWorkload *w, const float *const *in, float *out)
{
    int64_t n = w->in[0].dimensions[0], k = w->in[0].dimensions[1], m = w->out.dimensions[1];
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < m; c++) {
            float sum = w->fc.bias_enabled ? in[2][c] : 0.0f;
            if (!w->fc.transpose_weights) {
                for (int64_t i = 0; i < k; i++)
                    sum += in[0][r * k + i] * in[1][i * m + c];
            } else {
                for (int64_t i = 0; i < k; i += 4) {
                    const volatile float *row = in[1] + c * k; /* the defect: a full group is read */
                    float group[4] = {row[i], row[i + 1], row[i + 2], row[i + 3]};
                    for (int64_t j = 0; j < 4; j++)
                        if (i + j < k)
                            sum += in[0][r * k + i + j] * group[j];
                }
            }
            out[r * m + c] = sum;
        }
}
