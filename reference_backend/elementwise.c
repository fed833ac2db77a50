/*
 * Broadcasting two-input element-wise layers and the fused epilogue.
 */
#include <math.h>

#include "kernels_internal.h"

/* NumPy's maximum and minimum: NaN in either operand gives NaN (a + b is then NaN). Every
   operand is computed unconditionally and then selected, so that the loops vectorize (a
   floating-point operation under a condition is a branch: the compiler may not speculate it). */
static inline float max_nan(float a, float b)
{
    float m = a > b ? a : b, s = a + b;
    return (a != a) | (b != b) ? s : m;
}
static inline float min_nan(float a, float b)
{
    float m = a < b ? a : b, s = a + b;
    return (a != a) | (b != b) ? s : m;
}
static inline float prelu(float x, float slope)
{
    float p = x * slope;
    return x < 0.0f ? p : x;
}

/* The three innermost loops of one operation: both contiguous, a a broadcast scalar, b one; and
   any strides (a dimension whose pattern merged with no other). */
#define INNER(expression)                                                                   \
    do {                                                                                    \
        if (ia == 1 && ib == 1)                                                             \
            for (int64_t i = 0; i < inner; i++) {                                           \
                const float x = pa[i], z = pb[i];                                           \
                o[i] = (expression);                                                        \
            }                                                                               \
        else if (ia == 0 && ib == 1) {                                                      \
            const float x = pa[0];                                                          \
            for (int64_t i = 0; i < inner; i++) {                                           \
                const float z = pb[i];                                                      \
                o[i] = (expression);                                                        \
            }                                                                               \
        } else if (ia == 1 && ib == 0) {                                                    \
            const float z = pb[0];                                                          \
            for (int64_t i = 0; i < inner; i++) {                                           \
                const float x = pa[i];                                                      \
                o[i] = (expression);                                                        \
            }                                                                               \
        } else                                                                              \
            for (int64_t i = 0; i < inner; i++) {                                           \
                const float x = pa[i * ia], z = pb[i * ib];                                 \
                o[i] = (expression);                                                        \
            }                                                                               \
    } while (0)

/* Maximum, minimum and Prelu 4 lanes at a time (as selects, which the compiler will not make of
   them itself) where both operands are contiguous or broadcast scalars; the rest by INNER. */
static inline vf4 select_v4(int op, vf4 x, vf4 z)
{
    vi4 unordered = (vi4)(x != x) | (vi4)(z != z);
    switch (op) {
    case RK_MAX: return vf4_select(unordered, x + z, vf4_select(x > z, x, z));
    case RK_MIN: return vf4_select(unordered, x + z, vf4_select(x < z, x, z));
    default: return vf4_select(x < vf4_splat(0.0f), x * z, x);       /* Prelu */
    }
}

static int64_t select_inner_v4(int op, const float *pa, int64_t ia, const float *pb, int64_t ib,
                               float *o, int64_t inner)
{
    int64_t i = 0;
    if ((ia != 0 && ia != 1) || (ib != 0 && ib != 1))
        return 0;
    for (; i + 4 <= inner; i += 4) {
        vf4 x = ia ? vf4_load(pa + i) : vf4_splat(pa[0]);
        vf4 z = ib ? vf4_load(pb + i) : vf4_splat(pb[0]);
        vf4_store(o + i, select_v4(op, x, z));
    }
    return i;
}

static void binary_inner(int op, const float *pa, int64_t ia, const float *pb, int64_t ib, float *o,
                         int64_t inner)
{
    if (op == RK_MAX || op == RK_MIN || op == RK_PRELU) {
        int64_t done = select_inner_v4(op, pa, ia, pb, ib, o, inner);
        pa += done * ia;
        pb += done * ib;
        o += done;
        inner -= done;
    }
    switch (op) {
    case RK_MUL: INNER(x * z); break;
    case RK_SUB: INNER(x - z); break;
    case RK_DIV: INNER(x / z); break;
    case RK_MAX: INNER(max_nan(x, z)); break;
    case RK_MIN: INNER(min_nan(x, z)); break;
    case RK_POW: INNER(powf(x, z)); break;
    case RK_PRELU: INNER(prelu(x, z)); break;
    default: INNER(x + z); break;
    }
}

typedef struct binary_call {
    int op, nd;
    const float *a, *b;
    float *out;
    const int64_t *shp, *sa, *sb;
} binary_call;

/* The outer iterations [first, last). */
static void binary_range(void *ctx, int64_t first, int64_t last)
{
    const binary_call *t = ctx;
    const int64_t inner = t->shp[0], ia = t->sa[0], ib = t->sb[0];
    int64_t idx[8] = { 0 }, offa = 0, offb = 0, rest = first;
    /* the odometer at iteration `first` */
    for (int d = 1; d < t->nd; d++) {
        idx[d] = rest % t->shp[d];
        rest /= t->shp[d];
        offa += idx[d] * t->sa[d];
        offb += idx[d] * t->sb[d];
    }
    float *o = t->out + first * inner;
    for (int64_t it = first; it < last; it++) {
        binary_inner(t->op, t->a + offa, ia, t->b + offb, ib, o, inner);
        o += inner;
        for (int d = 1; d < t->nd; d++) {
            offa += t->sa[d];
            offb += t->sb[d];
            if (++idx[d] < t->shp[d])
                break;
            offa -= t->sa[d] * t->shp[d];
            offb -= t->sb[d] * t->shp[d];
            idx[d] = 0;
        }
    }
}

/* One dimension only: the elements [begin, end). */
static void binary_flat_range(void *ctx, int64_t begin, int64_t end)
{
    const binary_call *t = ctx;
    binary_inner(t->op, t->a + begin * t->sa[0], t->sa[0], t->b + begin * t->sb[0], t->sb[0],
                 t->out + begin, end - begin);
}

/*
 * rk_binary: out[out_shape] = a op b (enum rk_binary; an unknown op adds) with NumPy
 * broadcasting. Shapes padded to rank (1..8; anything else does nothing); a dimension of size 0
 * makes it a no-op. out may be the same buffer as a or b only if that input has the full output
 * shape. No scratch. Dimensions are coalesced first, so the innermost loop is as long as possible
 * and is one of: both contiguous, a broadcast scalar, b broadcast scalar. Large outputs are
 * split among threads by outer iterations.
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

    int64_t outer = 1;
    for (int d = 1; d < nd; d++)
        outer *= shp[d];
    binary_call call = { op, nd, a, b, out, shp, sa, sb };
    double per_thread = op == RK_POW ? RK_MATH_MIN_PER_THREAD : RK_COPY_MIN_PER_THREAD;
    if (nd == 1)
        rk_parallel_for(shp[0], 16, 1.0, per_thread, binary_flat_range, &call);
    else
        rk_parallel_for(outer, 1, (double)shp[0], per_thread, binary_range, &call);
    return 0;
}

int rk_epilogue_tail(const rk_epilogue *e, ukr_tail *t)
{
    t->residual = NULL;
    t->ldr = e->ldr;
    t->lo = -INFINITY;
    t->hi = INFINITY;
    switch (e->function) {
    case -1:
        return 1;
    case RK_RELU:
        t->lo = 0.0f;
        return 1;
    case RK_BOUNDED_RELU:       /* min(a, max(b, x)) */
        t->lo = e->b;
        t->hi = e->a;
        return 1;
    case RK_CLIP:               /* min(b, max(a, x)) */
        t->lo = e->a;
        t->hi = e->b;
        return 1;
    default:
        return 0;
    }
}

/*
 * rk_apply_epilogue: rows x cols values at c (row stride ldc), which are rows row0.. and
 * columns col0.. of the whole output: add the residual, then apply the activation, in place.
 */
void rk_apply_epilogue(const rk_epilogue *e, float *c, int64_t ldc, int64_t row0, int64_t col0,
                       int64_t rows, int64_t cols)
{
    /* rows that follow each other in memory, and in the residual: one run (a tile as wide as
       the output, e.g. a 14 x 16 tile of a 16-channel layer, is one call instead of 14) */
    if (rows > 1 && ldc == cols && (e->residual == NULL || e->ldr == cols)) {
        cols *= rows;
        rows = 1;
    }
    if (rk_use_avx512() && rk_act16_covers(e->function)) {
        rk_act16_rows(c, ldc, e->residual ? e->residual + row0 * e->ldr + col0 : NULL, e->ldr, rows, cols,
                      e->function, e->a, e->b);
        return;
    }
    for (int64_t i = 0; i < rows; i++) {
        float *row = c + i * ldc;
        if (e->residual != NULL) {
            const float *r = e->residual + (row0 + i) * e->ldr + col0;
            for (int64_t j = 0; j < cols; j++)
                row[j] += r[j];
        }
        if (e->function >= 0)
            rk_activation_serial(row, row, cols, e->function, e->a, e->b);
    }
}
