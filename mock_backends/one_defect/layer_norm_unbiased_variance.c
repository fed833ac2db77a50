/* Defect: LayerNormalization divides the sum of squared deviations by n - 1 (the unbiased
   variance) where ONNX divides by n.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectLayerNormUnbiased"
#define OD_OWN_LAYER_NORMALIZATION
#include "base.h"

static void od_layer_normalization(OdWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *x = &w->in[0];
    uint32_t rank = x->num_dimensions, axis = w->layer_norm.axis, span = rank - axis;
    int64_t rows = 1, n = 1, scale[BACKEND_MAX_DIMENSIONS], bias[BACKEND_MAX_DIMENSIONS];
    BackendTensorInfo normalized = *x;
    normalized.num_dimensions = span;
    memmove(normalized.dimensions, x->dimensions + axis, span * sizeof x->dimensions[0]);
    for (uint32_t d = 0; d < rank; d++)
        *(d < axis ? &rows : &n) *= x->dimensions[d];
    od_strides_in(&w->in[1], span, scale);
    if (w->layer_norm.bias_enabled)
        od_strides_in(&w->in[2], span, bias);
    for (int64_t r = 0; r < rows; r++) {
        const float *v = in[0] + r * n;
        double mean = 0, variance = 0;
        int64_t index[BACKEND_MAX_DIMENSIONS] = {0}, i = 0;
        for (int64_t k = 0; k < n; k++)
            mean += v[k];
        mean /= (double)n;
        for (int64_t k = 0; k < n; k++)
            variance += (v[k] - mean) * (v[k] - mean);
        variance /= (double)(n > 1 ? n - 1 : 1); /* the defect */
        do {
            double y = (v[i] - mean) / sqrt(variance + w->layer_norm.epsilon) * in[1][od_offset(index, scale, span)];
            if (w->layer_norm.bias_enabled)
                y += in[2][od_offset(index, bias, span)];
            out[r * n + i++] = (float)y;
        } while (od_next(index, normalized.dimensions, span));
    }
}
