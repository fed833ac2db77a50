/* Defect: Transpose copies a rank-5 tensor as it is (a fast path for "rank 5 is always the
   identity" left in), whatever its perm says.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectTransposeRank5"
#define OD_OWN_TRANSPOSE
#include "base.h"

static void od_transpose(OdWorkload *w, const float *const *in, float *out)
{
    int64_t strides[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0}, stride = 1;
    uint32_t rank = w->out.num_dimensions;
    int64_t i = 0;
    if (rank == 5) { /* the defect */
        memcpy(out, in[0], (size_t)od_count(&w->in[0]) * sizeof(float));
        return;
    }
    for (int d = (int)rank - 1; d >= 0; d--) {
        strides[d] = stride;
        stride *= w->in[0].dimensions[d];
    }
    do {
        int64_t offset = 0;
        for (uint32_t d = 0; d < rank; d++)
            offset += index[d] * strides[w->transpose.perm[d]];
        out[i++] = in[0][offset];
    } while (od_next(index, w->out.dimensions, rank));
}
