/* Defect: Addition and Multiplication assume the first input has the output's rank: when the
   second input has the higher rank, the first is aligned to the left instead of the right.
   Requirement: LAYER-1 */
#define OD_BACKEND_ID "DefectBroadcastRank"
#define OD_OWN_BINARY
#include "base.h"

static void od_binary(OdWorkload *w, const float *const *in, float *out)
{
    int64_t sa[BACKEND_MAX_DIMENSIONS], sb[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0};
    int rank = (int)w->out.num_dimensions;
    int64_t n = od_count(&w->out), stride = 1;
    for (int i = rank - 1; i >= 0; i--) { /* the defect: dimension i of a taken as the output's */
        int64_t size = i < (int)w->in[0].num_dimensions ? w->in[0].dimensions[i] : 1;
        sa[i] = size == 1 ? 0 : stride;
        stride *= size;
    }
    od_broadcast_strides(&w->in[1], &w->out, sb);
    for (int64_t i = 0; i < n; i++) {
        int64_t ia = 0, ib = 0;
        for (int d = 0; d < rank; d++) {
            ia += index[d] * sa[d];
            ib += index[d] * sb[d];
        }
        out[i] = w->type == BACKEND_LAYER_ADDITION ? in[0][ia] + in[1][ib] : in[0][ia] * in[1][ib];
        for (int d = rank - 1; d >= 0; d--) {
            if (++index[d] < w->out.dimensions[d])
                break;
            index[d] = 0;
        }
    }
}
