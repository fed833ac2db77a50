/* Defect: Resize places every output pixel with the asymmetric transform (x / scale), whatever
   coordinate_transformation it is given.
   Requirement: LAYER-3 */
#define OD_BACKEND_ID "DefectResizeAsymmetric"
#define OD_OWN_RESIZE
#include "base.h"

static void od_resize(OdWorkload *w, const float *const *in, float *out)
{
    BackendResizeDescriptor d = w->resize;
    int64_t N = w->in[0].dimensions[0], H = w->in[0].dimensions[1], W = w->in[0].dimensions[2];
    int64_t C = w->in[0].dimensions[3], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    d.coordinate_transformation = BACKEND_RESIZE_ASYMMETRIC; /* the defect */
    for (int64_t n = 0; n < N; n++)
        for (int64_t y = 0; y < OH; y++) {
            int64_t rows[4], cols[4];
            double wy[4], wx[4];
            int ty = od_resize_taps(&d, y, d.scale_y, H, OH, rows, wy);
            for (int64_t x = 0; x < OW; x++) {
                int tx = od_resize_taps(&d, x, d.scale_x, W, OW, cols, wx);
                for (int64_t c = 0; c < C; c++) {
                    double sum = 0;
                    for (int i = 0; i < ty; i++)
                        for (int j = 0; j < tx; j++)
                            sum += wy[i] * wx[j] * in[0][((n * H + rows[i]) * W + cols[j]) * C + c];
                    out[((n * OH + y) * OW + x) * C + c] = (float)sum;
                }
            }
        }
}
