/*
 * Softmax over the last axis.
 */
#include "kernels_internal.h"

/* ------------------------------------------------------------------------- */
/* Softmax                                                                   */
/* ------------------------------------------------------------------------- */

/*
 * rk_softmax: y[r, :] = exp(beta*x[r, :] - max_j beta*x[r, j]) / sum, for
 * `rows` rows of `cols` contiguous values (y has the shape of x); y may equal
 * x. exp is the vectorized exp_v4 (about 3 ulp). No scratch.
 */
int rk_softmax(const float *x, float *y, int64_t rows, int64_t cols, float beta)
{
    if (cols <= 0)
        return 0;
    const vf4 vb = vf4_splat(beta);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        int64_t i = 0;

        /* two accumulators per pass hide the add/select latency */
        vf4 m0 = vf4_splat(beta * xr[0]), m1 = m0;
        for (; i + 8 <= cols; i += 8) {
            m0 = vf4_max(vb * vf4_load(xr + i), m0);
            m1 = vf4_max(vb * vf4_load(xr + i + 4), m1);
        }
        float mx = vf4_hmax(vf4_max(m0, m1));
        for (; i < cols; i++) {
            float v = beta * xr[i];
            mx = v > mx ? v : mx;
        }

        const vf4 vm = vf4_splat(mx);
        vf4 s0 = vf4_splat(0.0f), s1 = s0;
        for (i = 0; i + 8 <= cols; i += 8) {
            vf4 e0 = exp_v4(vb * vf4_load(xr + i) - vm);
            vf4 e1 = exp_v4(vb * vf4_load(xr + i + 4) - vm);
            vf4_store(yr + i, e0);
            vf4_store(yr + i + 4, e1);
            s0 += e0;
            s1 += e1;
        }
        s0 += s1;
        float sum = (s0[0] + s0[2]) + (s0[1] + s0[3]);
        for (; i < cols; i += 4) {
            const int64_t len = min_i64(4, cols - i);
            float tmp[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
            memcpy(tmp, xr + i, (size_t)len * sizeof(float));
            vf4_store(tmp, exp_v4(vb * vf4_load(tmp) - vm));
            for (int64_t l = 0; l < len; l++)
                sum += tmp[l];
            memcpy(yr + i, tmp, (size_t)len * sizeof(float));
        }

        const vf4 vs = vf4_splat(sum);
        for (i = 0; i + 4 <= cols; i += 4)
            vf4_store(yr + i, vf4_load(yr + i) / vs);
        for (; i < cols; i++)
            yr[i] /= sum;
    }
    return 0;
}
