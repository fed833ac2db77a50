/* Defect: Addition and Multiplication assume the first input has the output's rank: when the
   second input has the higher rank, the first is aligned to the left instead of the right.
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectBroadcastRank"
#define OD_OWN_BINARY
#include "base.h"

static void od_binary(OdWorkload *w, const float *const *in, float *out)
{
    int64_t sa[BACKEND_MAX_DIMENSIONS], sb[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0};
    int rank = (int)w->out.num_dimensions, add = w->type == BACKEND_LAYER_ADDITION;
    int64_t n = od_count(&w->out), stride = 1, inner;
    if (rank == 0) {
        out[0] = add ? in[0][0] + in[1][0] : in[0][0] * in[1][0];
        return;
    }
    for (int i = rank - 1; i >= 0; i--) { /* the defect: dimension i of a taken as the output's */
        int64_t size = i < (int)w->in[0].num_dimensions ? w->in[0].dimensions[i] : 1;
        sa[i] = size == 1 ? 0 : stride;
        stride *= size;
    }
    od_broadcast_strides(&w->in[1], &w->out, sb);
    inner = w->out.dimensions[rank - 1];
    for (int64_t start = 0; start < n; start += inner) {
        const float *a = in[0], *b = in[1];
        for (int d = 0; d < rank - 1; d++) {
            a += index[d] * sa[d];
            b += index[d] * sb[d];
        }
        for (int64_t i = 0; i < inner; i++)
            out[start + i] = add ? a[i * sa[rank - 1]] + b[i * sb[rank - 1]] : a[i * sa[rank - 1]] * b[i * sb[rank - 1]];
        for (int d = rank - 2; d >= 0; d--) {
            if (++index[d] < w->out.dimensions[d])
                break;
            index[d] = 0;
        }
    }
}
