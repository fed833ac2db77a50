/* Defect: Slice walks a negative step upwards: it reads the same elements, from the lowest index
   up (begin + (count - 1) * step, then + |step|, ...), so a reversed axis comes out unreversed.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectSliceNegativeStep"
#define OD_OWN_SLICE
#include "base.h"

static void od_slice(OdWorkload *w, const float *const *in, float *out)
{
    int64_t strides[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0}, stride = 1;
    uint32_t rank = w->out.num_dimensions;
    int64_t i = 0;
    for (int d = (int)rank - 1; d >= 0; d--) {
        strides[d] = stride;
        stride *= w->in[0].dimensions[d];
    }
    do {
        int64_t offset = 0;
        for (uint32_t d = 0; d < rank; d++) {
            int64_t step = w->slice.step[d], first = w->slice.begin[d];
            if (step < 0) { /* the defect: from the last element read upwards */
                first += (w->out.dimensions[d] - 1) * step;
                step = -step;
            }
            offset += (first + index[d] * step) * strides[d];
        }
        out[i++] = in[0][offset];
    } while (od_next(index, w->out.dimensions, rank));
}
