/* Defect: Concatenation along axis 0 joins the inputs along the last axis instead (each input's
   rows interleaved as columns), as if axis 0 meant "the default, the last axis".
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectConcatAxis0"
#define OD_OWN_CONCATENATION
#include "base.h"

static void od_concatenation(OdWorkload *w, const float *const *in, float *out)
{
    uint32_t rank = w->out.num_dimensions;
    uint32_t axis = w->concat.axis == 0 ? rank - 1 : w->concat.axis; /* the defect */
    int64_t row = w->out.dimensions[axis], at = 0, inner = 1;
    for (uint32_t d = axis + 1; d < rank; d++)
        inner *= w->out.dimensions[d];
    for (uint32_t i = 0; i < w->num_inputs; i++) {
        int64_t outer = 1, part = w->in[i].dimensions[axis] * inner;
        for (uint32_t d = 0; d < axis; d++)
            outer *= w->in[i].dimensions[d];
        for (int64_t o = 0; o < outer; o++)
            memcpy(out + o * row * inner + at, in[i] + o * part, (size_t)part * sizeof(float));
        at += part;
    }
}
