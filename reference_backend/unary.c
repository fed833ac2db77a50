/*
 * Element-wise functions of one input (ElementwiseUnary): the common ones 4 lanes at a time,
 * the trigonometric and hyperbolic ones through the C library.
 */
#include <math.h>

#include "kernels_internal.h"

enum {
    ABS, NEG, EXP, LOG, SQRT, RSQRT, RECIPROCAL, FLOOR, CEIL, ROUND, SIN, COS, ERF, SIGN, TAN,
    ASIN, ACOS, ATAN, SINH, COSH, ASINH, ACOSH, ATANH
};

static inline vf4 neg_v4(vf4 x) { return -x; }
static inline vf4 sqrt_v4(vf4 x) { return vf4_sqrt(x); }
static inline vf4 rsqrt_v4(vf4 x) { return vf4_splat(1.0f) / vf4_sqrt(x); }
static inline vf4 reciprocal_v4(vf4 x) { return vf4_splat(1.0f) / x; }

/* From the nearest integer (ties to even): one step down where it lies above x. NaN and
   integral values pass through (the comparisons are false). */
static inline vf4 floor_v4(vf4 x)
{
    vf4 r = round_even_v4(x);
    return vf4_select(r > x, r - vf4_splat(1.0f), r);
}

static inline vf4 ceil_v4(vf4 x)
{
    vf4 r = round_even_v4(x);
    return vf4_or_sign(vf4_select(r < x, r + vf4_splat(1.0f), r), x);
}

/* -1, 0 or 1; zeros keep their sign and NaN stays NaN. */
static inline vf4 sign_v4(vf4 x)
{
    return vf4_select(x > vf4_splat(0.0f), vf4_splat(1.0f),
                      vf4_select(x < vf4_splat(0.0f), vf4_splat(-1.0f), x));
}

#define SCALAR(fn)                       \
    for (int64_t i = 0; i < count; i++)  \
        y[i] = fn(x[i]);                 \
    break

static void unary_part(const float *x, float *y, int64_t count, int function)
{
    switch (function) {
    case ABS: RK_MAP_V4(vf4_abs, x, y, count); break;
    case NEG: RK_MAP_V4(neg_v4, x, y, count); break;
    case EXP: RK_MAP_V4(exp_v4, x, y, count); break;
    case LOG: RK_MAP_V4(log_v4, x, y, count); break;
    case SQRT: RK_MAP_V4(sqrt_v4, x, y, count); break;
    case RSQRT: RK_MAP_V4(rsqrt_v4, x, y, count); break;
    case RECIPROCAL: RK_MAP_V4(reciprocal_v4, x, y, count); break;
    case FLOOR: RK_MAP_V4(floor_v4, x, y, count); break;
    case CEIL: RK_MAP_V4(ceil_v4, x, y, count); break;
    case ROUND: RK_MAP_V4(round_even_v4, x, y, count); break;
    case ERF: RK_MAP_V4(erf_v4, x, y, count); break;
    case SIGN: RK_MAP_V4(sign_v4, x, y, count); break;
    case SIN: SCALAR(sinf);
    case COS: SCALAR(cosf);
    case TAN: SCALAR(tanf);
    case ASIN: SCALAR(asinf);
    case ACOS: SCALAR(acosf);
    case ATAN: SCALAR(atanf);
    case SINH: SCALAR(sinhf);
    case COSH: SCALAR(coshf);
    case ASINH: SCALAR(asinhf);
    case ACOSH: SCALAR(acoshf);
    case ATANH: SCALAR(atanhf);
    default:
        break;
    }
}

typedef struct unary_call {
    const float *x;
    float *y;
    int function;
} unary_call;

static void unary_range(void *ctx, int64_t begin, int64_t end)
{
    const unary_call *c = ctx;
    unary_part(c->x + begin, c->y + begin, end - begin, c->function);
}

/* rk_unary: y[i] = f(x[i]) for i < count; y may equal x. No scratch. */
int rk_unary(const float *x, float *y, int64_t count, int function)
{
    unary_call call = { x, y, function };
    int cheap = function == ABS || function == NEG || function == FLOOR || function == CEIL ||
                function == ROUND || function == SIGN || function == RECIPROCAL || function == SQRT ||
                function == RSQRT;
    rk_parallel_for(count, 16, 1.0, cheap ? RK_COPY_MIN_PER_THREAD : RK_MATH_MIN_PER_THREAD,
                    unary_range, &call);
    return 0;
}
