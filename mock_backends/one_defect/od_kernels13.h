/*
 * od_kernels13.h - plain kernels of the element-wise, data-moving and normalizing layers of
 * Backend API 1.3, and MatMul. Part of base.h; each is a replaceable piece (OD_OWN_<NAME>).
 * Written for clarity: an index walked over the output, sums in double.
 */
#ifndef ONE_DEFECT_KERNELS13_H
#define ONE_DEFECT_KERNELS13_H

static OdKernel od_activation13, od_binary13, od_unary, od_prelu, od_concatenation, od_slice, od_transpose,
    od_pad, od_reduce, od_batch_normalization, od_layer_normalization, od_mat_mul, od_softmax13;

/* ---- indexing ----------------------------------------------------------------------------- */

/* Row-major strides of `t`, right-aligned to `rank` axes, 0 where `t` has extent 1 (or lacks
   the axis): the strides that broadcast it. */
static void od_strides_in(const BackendTensorInfo *t, uint32_t rank, int64_t *strides)
{
    int64_t stride = 1;
    for (int i = (int)rank - 1; i >= 0; i--) {
        int j = i - ((int)rank - (int)t->num_dimensions);
        int64_t size = j >= 0 ? t->dimensions[j] : 1;
        strides[i] = size == 1 ? 0 : stride;
        stride *= size;
    }
}

/* The next index of a walk over `dims` in row-major order (0 once it wraps around). */
static int od_next(int64_t *index, const int64_t *dims, uint32_t rank)
{
    for (int d = (int)rank - 1; d >= 0; d--) {
        if (++index[d] < dims[d])
            return 1;
        index[d] = 0;
    }
    return 0;
}

static int64_t od_offset(const int64_t *index, const int64_t *strides, uint32_t rank)
{
    int64_t offset = 0;
    for (uint32_t d = 0; d < rank; d++)
        offset += index[d] * strides[d];
    return offset;
}

static float od_softplus(float x)
{
    return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

/* ---- element-wise ------------------------------------------------------------------------- */

#ifndef OD_OWN_ACTIVATION13
static void od_activation13(OdWorkload *w, const float *const *in, float *out)
{
    const float a = w->activation.a, b = w->activation.b;
    int64_t n = od_count(&w->in[0]);
    for (int64_t i = 0; i < n; i++) {
        float x = in[0][i], y;
        switch (w->activation.function) {
        case BACKEND_ACTIVATION_ELU: y = x > 0 ? x : a * expm1f(x); break;
        case BACKEND_ACTIVATION_SELU: y = b * (x > 0 ? x : a * expm1f(x)); break;
        case BACKEND_ACTIVATION_HARD_SIGMOID: y = fmaxf(0.0f, fminf(1.0f, a * x + b)); break;
        case BACKEND_ACTIVATION_HARD_SWISH: y = x * fmaxf(0.0f, fminf(1.0f, x / 6 + 0.5f)); break;
        case BACKEND_ACTIVATION_SWISH: y = x * od_sigmoid(a * x); break;
        case BACKEND_ACTIVATION_GELU: y = 0.5f * x * (1 + erff(x / sqrtf(2.0f))); break;
        case BACKEND_ACTIVATION_GELU_TANH:
            y = 0.5f * x * (1 + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
            break;
        case BACKEND_ACTIVATION_SOFTPLUS: y = od_softplus(x); break;
        case BACKEND_ACTIVATION_SOFTSIGN: y = x / (1 + fabsf(x)); break;
        case BACKEND_ACTIVATION_CLIP: y = fminf(b, fmaxf(a, x)); break;
        case BACKEND_ACTIVATION_CELU: y = fmaxf(0.0f, x) + fminf(0.0f, a * expm1f(x / a)); break;
        case BACKEND_ACTIVATION_THRESHOLDED_RELU: y = x > a ? x : 0.0f; break;
        default: y = x * tanhf(od_softplus(x)); break; /* mish */
        }
        out[i] = y;
    }
}
#endif

static float od_binary_op(BackendLayerType type, float a, float b)
{
    switch (type) {
    case BACKEND_LAYER_SUBTRACTION: return a - b;
    case BACKEND_LAYER_DIVISION: return a / b;
    case BACKEND_LAYER_MAXIMUM: return a > b ? a : b;
    case BACKEND_LAYER_MINIMUM: return a < b ? a : b;
    default: return powf(a, b);
    }
}

#ifndef OD_OWN_BINARY13
static void od_binary13(OdWorkload *w, const float *const *in, float *out)
{
    int64_t sa[BACKEND_MAX_DIMENSIONS], sb[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0};
    uint32_t rank = w->out.num_dimensions;
    int64_t i = 0;
    od_strides_in(&w->in[0], rank, sa);
    od_strides_in(&w->in[1], rank, sb);
    do
        out[i++] = od_binary_op(w->type, in[0][od_offset(index, sa, rank)], in[1][od_offset(index, sb, rank)]);
    while (od_next(index, w->out.dimensions, rank));
}
#endif

static __attribute__((unused)) float od_round_half_even(float x)
{
    return nearbyintf(x); /* the default rounding mode: to nearest, ties to even */
}

#ifndef OD_OWN_UNARY
static void od_unary(OdWorkload *w, const float *const *in, float *out)
{
    int64_t n = od_count(&w->in[0]);
    for (int64_t i = 0; i < n; i++) {
        float x = in[0][i], y;
        switch (w->unary.function) {
        case BACKEND_UNARY_ABS: y = fabsf(x); break;
        case BACKEND_UNARY_NEG: y = -x; break;
        case BACKEND_UNARY_EXP: y = expf(x); break;
        case BACKEND_UNARY_LOG: y = logf(x); break;
        case BACKEND_UNARY_SQRT: y = sqrtf(x); break;
        case BACKEND_UNARY_RSQRT: y = 1 / sqrtf(x); break;
        case BACKEND_UNARY_RECIPROCAL: y = 1 / x; break;
        case BACKEND_UNARY_FLOOR: y = floorf(x); break;
        case BACKEND_UNARY_CEIL: y = ceilf(x); break;
        case BACKEND_UNARY_ROUND: y = OD_ROUND(x); break;
        case BACKEND_UNARY_SIN: y = sinf(x); break;
        case BACKEND_UNARY_COS: y = cosf(x); break;
        case BACKEND_UNARY_ERF: y = erff(x); break;
        case BACKEND_UNARY_SIGN: y = x > 0 ? 1.0f : x < 0 ? -1.0f : x; break;
        case BACKEND_UNARY_TAN: y = tanf(x); break;
        case BACKEND_UNARY_ASIN: y = asinf(x); break;
        case BACKEND_UNARY_ACOS: y = acosf(x); break;
        case BACKEND_UNARY_ATAN: y = atanf(x); break;
        case BACKEND_UNARY_SINH: y = sinhf(x); break;
        case BACKEND_UNARY_COSH: y = coshf(x); break;
        case BACKEND_UNARY_ASINH: y = asinhf(x); break;
        case BACKEND_UNARY_ACOSH: y = acoshf(x); break;
        default: y = atanhf(x); break;
        }
        out[i] = y;
    }
}
#endif

#ifndef OD_OWN_PRELU
static void od_prelu(OdWorkload *w, const float *const *in, float *out)
{
    int64_t slope[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0};
    uint32_t rank = w->in[0].num_dimensions;
    int64_t i = 0;
    od_strides_in(&w->in[1], rank, slope);
    do {
        float x = in[0][i];
        out[i++] = x < 0 ? x * in[1][od_offset(index, slope, rank)] : x;
    } while (od_next(index, w->in[0].dimensions, rank));
}
#endif

/* ---- moving data -------------------------------------------------------------------------- */

#ifndef OD_OWN_CONCATENATION
static void od_concatenation(OdWorkload *w, const float *const *in, float *out)
{
    uint32_t axis = w->concat.axis, rank = w->out.num_dimensions;
    int64_t outer = 1, inner = 1, row = w->out.dimensions[axis], at = 0;
    for (uint32_t d = 0; d < axis; d++)
        outer *= w->out.dimensions[d];
    for (uint32_t d = axis + 1; d < rank; d++)
        inner *= w->out.dimensions[d];
    for (uint32_t i = 0; i < w->num_inputs; i++) {
        int64_t part = w->in[i].dimensions[axis] * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy(out + o * row * inner + at, in[i] + o * part, (size_t)part * sizeof(float));
        at += part;
    }
}
#endif

#ifndef OD_OWN_SLICE
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
        for (uint32_t d = 0; d < rank; d++)
            offset += (w->slice.begin[d] + index[d] * w->slice.step[d]) * strides[d];
        out[i++] = in[0][offset];
    } while (od_next(index, w->out.dimensions, rank));
}
#endif

#ifndef OD_OWN_TRANSPOSE
static void od_transpose(OdWorkload *w, const float *const *in, float *out)
{
    int64_t strides[BACKEND_MAX_DIMENSIONS], index[BACKEND_MAX_DIMENSIONS] = {0}, stride = 1;
    uint32_t rank = w->out.num_dimensions;
    int64_t i = 0;
    for (int d = (int)rank - 1; d >= 0; d--) { /* input strides, then read along perm */
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
#endif

/* Pad's source index along one axis: -1 for the constant. `t` counts from the first element
   kept (negative pads crop first), `kept` elements are kept from `first`. */
static __attribute__((unused)) int64_t od_pad_source(int64_t t, int64_t first, int64_t kept, uint32_t mode)
{
    if (t >= 0 && t < kept)
        return first + t;
    if (mode == BACKEND_PAD_CONSTANT)
        return -1;
    if (mode == BACKEND_PAD_EDGE)
        return first + (t < 0 ? 0 : kept - 1);
    return first + (t < 0 ? -t : 2 * (kept - 1) - t); /* reflect: the edge is not repeated */
}

#ifndef OD_OWN_PAD
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
            int64_t source = od_pad_source(index[d] - (b > 0 ? b : 0), first, kept, w->pad.mode);
            offset = source < 0 ? -1 : offset * n + source;
        }
        out[i++] = offset < 0 ? w->pad.value : in[0][offset];
    } while (od_next(index, w->out.dimensions, rank));
}
#endif

/* ---- reducing and normalizing ------------------------------------------------------------- */

#ifndef OD_OWN_REDUCE
static void od_reduce(OdWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *x = &w->in[0];
    uint32_t rank = x->num_dimensions, f = w->reduce.function;
    int64_t strides[BACKEND_MAX_DIMENSIONS], outer[BACKEND_MAX_DIMENSIONS], inner[BACKEND_MAX_DIMENSIONS];
    int64_t index[BACKEND_MAX_DIMENSIONS] = {0}, o = 0, count = 1;
    od_strides_in(x, rank, strides);
    for (uint32_t d = 0; d < rank; d++) { /* the kept axes walk outside, the reduced ones inside */
        int reduced = (w->reduce.axes >> d) & 1u;
        outer[d] = reduced ? 1 : x->dimensions[d];
        inner[d] = reduced ? x->dimensions[d] : 1;
        count *= inner[d];
    }
    do {
        int64_t at[BACKEND_MAX_DIMENSIONS] = {0}, base = od_offset(index, strides, rank);
        double acc = f == BACKEND_REDUCE_PROD ? 1.0 : 0.0, top = -INFINITY;
        float best = in[0][base];
        if (f == BACKEND_REDUCE_LOG_SUM_EXP) {
            do
                top = fmax(top, in[0][base + od_offset(at, strides, rank)]);
            while (od_next(at, inner, rank));
            if (!isfinite(top))
                top = 0;
        }
        do {
            float v = in[0][base + od_offset(at, strides, rank)];
            switch (f) {
            case BACKEND_REDUCE_MAX: best = v > best ? v : best; break;
            case BACKEND_REDUCE_MIN: best = v < best ? v : best; break;
            case BACKEND_REDUCE_PROD: acc *= v; break;
            case BACKEND_REDUCE_L1: acc += fabs(v); break;
            case BACKEND_REDUCE_L2:
            case BACKEND_REDUCE_SUM_SQUARE: acc += (double)v * v; break;
            case BACKEND_REDUCE_LOG_SUM_EXP: acc += exp(v - top); break;
            default: acc += v; break; /* mean, sum */
            }
        } while (od_next(at, inner, rank));
        if (f == BACKEND_REDUCE_MAX || f == BACKEND_REDUCE_MIN)
            out[o++] = best;
        else if (f == BACKEND_REDUCE_MEAN)
            out[o++] = (float)(acc / (double)count);
        else if (f == BACKEND_REDUCE_L2)
            out[o++] = (float)sqrt(acc);
        else if (f == BACKEND_REDUCE_LOG_SUM_EXP)
            out[o++] = (float)(log(acc) + top);
        else
            out[o++] = (float)acc;
    } while (od_next(index, outer, rank));
}
#endif

#ifndef OD_OWN_BATCH_NORMALIZATION
static void od_batch_normalization(OdWorkload *w, const float *const *in, float *out)
{
    int64_t n = od_count(&w->in[0]), c = w->in[0].dimensions[w->in[0].num_dimensions - 1];
    for (int64_t i = 0; i < n; i++) {
        int64_t k = i % c;
        out[i] = (float)(((double)in[0][i] - in[1][k]) / sqrt((double)in[2][k] + w->batch_norm.epsilon) * in[3][k] +
                         in[4][k]);
    }
}
#endif

#ifndef OD_OWN_LAYER_NORMALIZATION
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
        variance /= (double)n; /* the biased variance, as ONNX's */
        do {
            double y = (v[i] - mean) / sqrt(variance + w->layer_norm.epsilon) * in[1][od_offset(index, scale, span)];
            if (w->layer_norm.bias_enabled)
                y += in[2][od_offset(index, bias, span)];
            out[r * n + i++] = (float)y;
        } while (od_next(index, normalized.dimensions, span));
    }
}
#endif

#ifndef OD_OWN_MAT_MUL
static void od_mat_mul(OdWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *a = &w->in[0], *b = &w->in[1];
    uint32_t ra = a->num_dimensions, rb = b->num_dimensions;
    int64_t m = ra > 1 ? a->dimensions[ra - 2] : 1, k = a->dimensions[ra - 1], n = rb > 1 ? b->dimensions[rb - 1] : 1;
    uint32_t batch = 0;
    BackendTensorInfo ba = *a, bb = *b; /* the batch axes alone */
    int64_t sa[BACKEND_MAX_DIMENSIONS], sb[BACKEND_MAX_DIMENSIONS], dims[BACKEND_MAX_DIMENSIONS];
    int64_t index[BACKEND_MAX_DIMENSIONS] = {0}, o = 0;
    ba.num_dimensions = ra > 2 ? ra - 2 : 0;
    bb.num_dimensions = rb > 2 ? rb - 2 : 0;
    batch = ba.num_dimensions > bb.num_dimensions ? ba.num_dimensions : bb.num_dimensions;
    for (uint32_t d = 0; d < batch; d++) {
        int64_t da = d + ba.num_dimensions >= batch ? ba.dimensions[d + ba.num_dimensions - batch] : 1;
        int64_t db = d + bb.num_dimensions >= batch ? bb.dimensions[d + bb.num_dimensions - batch] : 1;
        dims[d] = da > db ? da : db;
    }
    od_strides_in(&ba, batch, sa);
    od_strides_in(&bb, batch, sb);
    do {
        const float *x = in[0] + od_offset(index, sa, batch) * m * k;
        const float *y = in[1] + od_offset(index, sb, batch) * k * n;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double sum = 0;
                for (int64_t t = 0; t < k; t++)
                    sum += (double)x[i * k + t] * y[t * n + j];
                out[o++] = (float)sum;
            }
    } while (batch > 0 && od_next(index, dims, batch));
}
#endif

#ifndef OD_OWN_SOFTMAX13
static void od_softmax13(OdWorkload *w, const float *const *in, float *out)
{
    const BackendTensorInfo *x = &w->in[0];
    uint32_t axis = w->softmax.axis;
    int64_t outer = 1, inner = 1, len = x->dimensions[axis];
    float beta = w->softmax.beta;
    for (uint32_t d = 0; d < x->num_dimensions; d++)
        if (d != axis)
            *(d < axis ? &outer : &inner) *= x->dimensions[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *v = in[0] + o * len * inner + i;
            float *y = out + o * len * inner + i;
            double top = -INFINITY, sum = 0;
            for (int64_t k = 0; k < len; k++)
                top = fmax(top, (double)beta * v[k * inner]);
            for (int64_t k = 0; k < len; k++)
                sum += exp((double)beta * v[k * inner] - top);
            for (int64_t k = 0; k < len; k++) {
                double z = (double)beta * v[k * inner] - top;
                y[k * inner] = (float)(w->softmax.log ? z - log(sum) : exp(z) / sum);
            }
        }
}
#endif

#endif /* ONE_DEFECT_KERNELS13_H */
