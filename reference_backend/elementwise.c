/*
 * Activation functions and broadcasting Addition/Multiplication.
 */
#include "kernels_internal.h"

/*
 * rk_activation: y[i] = f(x[i]) for i < count. y may equal x.
 * relu, bounded_relu and leaky_relu propagate NaN. Sigmoid and tanh are
 * vectorized polynomial/exp evaluations accurate to a few ulp.
 */
int rk_activation(const float *x, float *y, int64_t count, int function, float a, float b)
{
    int64_t i = 0;
    switch (function) {
    case RK_RELU:
        for (; i < count; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case RK_BOUNDED_RELU:
        for (; i < count; i++) {
            float v = x[i] < b ? b : x[i];
            y[i] = v > a ? a : v;
        }
        break;
    case RK_SIGMOID:
        RK_MAP_V4(sigmoid_v4, x, y, count);
        break;
    case RK_TANH:
        RK_MAP_V4(tanh_v4, x, y, count);
        break;
    case RK_LEAKY_RELU:
        for (; i + 4 <= count; i += 4) {
            vf4 v = vf4_load(x + i);
            vf4_store(y + i, vf4_select(v > vf4_splat(0.0f), v, v * vf4_splat(a)));
        }
        for (; i < count; i++)
            y[i] = x[i] > 0.0f ? x[i] : a * x[i];
        break;
    default:
        break;
    }
    return 0;
}

/*
 * rk_binary: out[out_shape] = a + b (RK_ADD) or a * b (RK_MUL; any other op
 * adds) with NumPy broadcasting. Shapes padded to rank (1..8; anything else
 * does nothing); a dimension of size 0 makes it a no-op. out may be the same
 * buffer as a or b only if that input has the full output shape. No scratch.
 * Dimensions are coalesced first, so the innermost loop is as long as possible
 * and is one of: both contiguous, a broadcast scalar, b broadcast scalar.
 */
int rk_binary(int op, const float *a, const int64_t *a_shape, const float *b, const int64_t *b_shape,
              float *out, const int64_t *out_shape, int rank)
{
    int64_t shp[8], sa[8], sb[8];
    int nd = 0;
    int64_t sta = 1, stb = 1; /* element strides of a and b, innermost first */
    if (rank < 1 || rank > 8)
        return 0;
    for (int d = 0; d < rank; d++)
        if (out_shape[d] <= 0)
            return 0;

    /* Build innermost-first dims: drop size-1 output dims, merge a dim into the
       previous (inner) one when both operands continue the same stride pattern. */
    for (int d = rank - 1; d >= 0; d--) {
        int64_t len = out_shape[d];
        int64_t da = a_shape[d] == 1 ? 0 : sta;
        int64_t db = b_shape[d] == 1 ? 0 : stb;
        sta *= a_shape[d];
        stb *= b_shape[d];
        if (len == 1)
            continue;
        if (nd > 0 && da == sa[nd - 1] * shp[nd - 1] && db == sb[nd - 1] * shp[nd - 1]) {
            shp[nd - 1] *= len;
            continue;
        }
        shp[nd] = len;
        sa[nd] = da;
        sb[nd] = db;
        nd++;
    }
    if (nd == 0) {
        shp[0] = 1;
        sa[0] = sb[0] = 0;
        nd = 1;
    }

    const int64_t inner = shp[0], ia = sa[0], ib = sb[0];
    int64_t outer = 1;
    for (int d = 1; d < nd; d++)
        outer *= shp[d];
    int64_t idx[8] = { 0 };
    int64_t offa = 0, offb = 0;
    float *o = out;
    for (int64_t it = 0; it < outer; it++) {
        const float *pa = a + offa, *pb = b + offb;
        if (op == RK_MUL) {
            if (ia == 1 && ib == 1)
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] * pb[i];
            else if (ia == 0 && ib == 1) {
                const float s = pa[0];
                for (int64_t i = 0; i < inner; i++) o[i] = s * pb[i];
            } else if (ia == 1 && ib == 0) {
                const float s = pb[0];
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] * s;
            } else
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i * ia] * pb[i * ib];
        } else {
            if (ia == 1 && ib == 1)
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] + pb[i];
            else if (ia == 0 && ib == 1) {
                const float s = pa[0];
                for (int64_t i = 0; i < inner; i++) o[i] = s + pb[i];
            } else if (ia == 1 && ib == 0) {
                const float s = pb[0];
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i] + s;
            } else
                for (int64_t i = 0; i < inner; i++) o[i] = pa[i * ia] + pb[i * ib];
        }
        o += inner;
        /* odometer over the outer dims */
        for (int d = 1; d < nd; d++) {
            offa += sa[d];
            offb += sb[d];
            if (++idx[d] < shp[d])
                break;
            offa -= sa[d] * shp[d];
            offb -= sb[d] * shp[d];
            idx[d] = 0;
        }
    }
    return 0;
}

/*
 * rk_apply_epilogue: rows x cols values at c (row stride ldc), which are rows row0.. and
 * columns col0.. of the whole output: add the residual, then apply the activation, in place.
 */
void rk_apply_epilogue(const rk_epilogue *e, float *c, int64_t ldc, int64_t row0, int64_t col0,
                       int64_t rows, int64_t cols)
{
    for (int64_t i = 0; i < rows; i++) {
        float *row = c + i * ldc;
        if (e->residual != NULL) {
            const float *r = e->residual + (row0 + i) * e->ldr + col0;
            for (int64_t j = 0; j < cols; j++)
                row[j] += r[j];
        }
        if (e->function >= 0)
            rk_activation(row, row, cols, e->function, e->a, e->b);
    }
}
