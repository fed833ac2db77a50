/* Defect: Pad's reflect mode repeats the edge element (NumPy's "symmetric"): the first padded
   element is the edge itself where ONNX's reflect starts one inside it.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectPadReflectEdge"
#define OD_OWN_PAD
#include "base.h"

static int64_t source_index(int64_t t, int64_t first, int64_t kept, uint32_t mode)
{
    if (t >= 0 && t < kept)
        return first + t;
    if (mode == BACKEND_PAD_CONSTANT)
        return -1;
    if (mode == BACKEND_PAD_EDGE)
        return first + (t < 0 ? 0 : kept - 1);
    return first + (t < 0 ? -t - 1 : 2 * kept - 1 - t); /* the defect: -t and 2 * (kept - 1) - t */
}

static void od_pad(OdWorkload *w, const float *const *in, float *out)
{
    int64_t index[BACKEND_MAX_DIMENSIONS] = {0};
    uint32_t rank = w->out.num_dimensions;
    int64_t i = 0;
    do {
        int64_t offset = 0;
        for (uint32_t d = 0; d < rank && offset >= 0; d++) {
            int64_t n = w->in[0].dimensions[d], b = w->pad.pad_begin[d], e = w->pad.pad_end[d];
            int64_t first = b < 0 ? -b : 0, kept = n - first - (e < 0 ? -e : 0);
            int64_t source = source_index(index[d] - (b > 0 ? b : 0), first, kept, w->pad.mode);
            offset = source < 0 ? -1 : offset * n + source;
        }
        out[i++] = offset < 0 ? w->pad.value : in[0][offset];
    } while (od_next(index, w->out.dimensions, rank));
}
