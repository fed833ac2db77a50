/*
 * od_spatial13.h - plain kernels of the spatial layers and members of Backend API 1.3: grouped
 * convolution (depthwise is groups = channels), transposed convolution, pooling with ceil_mode,
 * count_include_pad, dilation and L2, and Resize. Part of base.h; each is a replaceable piece
 * (OD_OWN_<NAME>). Coordinates are computed in double from the descriptor's float scales.
 */
#ifndef ONE_DEFECT_SPATIAL13_H
#define ONE_DEFECT_SPATIAL13_H

static OdKernel od_grouped_convolution, od_transpose_convolution, od_pooling13, od_resize;

#ifndef OD_OWN_GROUPED_CONVOLUTION
static void od_grouped_convolution(OdWorkload *w, const float *const *in, float *out)
{
    const BackendConvolution2dDescriptor *d = &w->conv;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t KH = w->in[1].dimensions[1], KW = w->in[1].dimensions[2], CG = w->in[1].dimensions[3];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2], O = w->out.dimensions[3];
    int64_t OG = O / d->groups; /* outputs per group */
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t o = 0; o < O; o++) {
                    int64_t first = o / OG * CG; /* the group's first input channel */
                    double sum = d->bias_enabled ? in[2][o] : 0.0;
                    for (int64_t i = 0; i < KH; i++) {
                        int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                        for (int64_t j = 0; j < KW && iy >= 0 && iy < H; j++) {
                            int64_t ix = ox * d->stride_x + j * d->dilation_x - d->pad_left;
                            if (ix < 0 || ix >= W)
                                continue;
                            for (int64_t c = 0; c < CG; c++)
                                sum += (double)in[0][((n * H + iy) * W + ix) * C + first + c] *
                                       in[1][((o * KH + i) * KW + j) * CG + c];
                        }
                    }
                    out[((n * OH + oy) * OW + ox) * O + o] = (float)sum;
                }
}
#endif

#ifndef OD_OWN_TRANSPOSE_CONVOLUTION
static void od_transpose_convolution(OdWorkload *w, const float *const *in, float *out)
{
    const BackendTransposeConvolution2dDescriptor *d = &w->tconv;
    int64_t N = w->in[0].dimensions[0], H = w->in[0].dimensions[1], W = w->in[0].dimensions[2];
    int64_t C = w->in[0].dimensions[3], KH = w->in[1].dimensions[1], KW = w->in[1].dimensions[2];
    int64_t OG = w->in[1].dimensions[3], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    int64_t O = w->out.dimensions[3], CG = C / d->groups, total = od_count(&w->out);
    for (int64_t i = 0; i < total; i++)
        out[i] = d->bias_enabled ? in[2][i % O] : 0.0f;
    /* Each input pixel scatters its kernel into the output; the padding crops it. */
    for (int64_t n = 0; n < N; n++)
        for (int64_t iy = 0; iy < H; iy++)
            for (int64_t ix = 0; ix < W; ix++)
                for (int64_t c = 0; c < C; c++) {
                    float x = in[0][((n * H + iy) * W + ix) * C + c];
                    int64_t group = c / CG;
                    for (int64_t i = 0; i < KH; i++) {
                        int64_t oy = iy * d->stride_y + i * d->dilation_y - d->pad_top;
                        for (int64_t j = 0; j < KW && oy >= 0 && oy < OH; j++) {
                            int64_t ox = ix * d->stride_x + j * d->dilation_x - d->pad_left;
                            float *y = out + ((n * OH + oy) * OW + ox) * O + group * OG;
                            const float *f = in[1] + ((c * KH + i) * KW + j) * OG;
                            if (ox < 0 || ox >= OW)
                                continue;
                            for (int64_t o = 0; o < OG; o++)
                                y[o] += x * f[o];
                        }
                    }
                }
}
#endif

#ifndef OD_OWN_POOLING13
static void od_pooling13(OdWorkload *w, const float *const *in, float *out)
{
    const BackendPooling2dDescriptor *d = &w->pool;
    int64_t H = w->in[0].dimensions[1], W = w->in[0].dimensions[2], C = w->in[0].dimensions[3];
    int64_t N = w->out.dimensions[0], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t c = 0; c < C; c++) {
                    double acc = 0, best = -INFINITY;
                    int64_t inside = 0, rows = 0, cols = 0;
                    for (int64_t i = 0; i < d->kernel_y; i++) {
                        int64_t iy = oy * d->stride_y + i * d->dilation_y - d->pad_top;
                        rows += iy >= -(int64_t)d->pad_top && iy < H + d->pad_bottom;
                        for (int64_t j = 0; j < d->kernel_x; j++) {
                            int64_t ix = ox * d->stride_x + j * d->dilation_x - d->pad_left;
                            float v;
                            if (i == 0)
                                cols += ix >= -(int64_t)d->pad_left && ix < W + d->pad_right;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            v = in[0][((n * H + iy) * W + ix) * C + c];
                            inside++;
                            best = v > best ? v : best;
                            acc += d->pool_type == BACKEND_POOLING_L2 ? (double)v * v : v;
                        }
                    }
                    float *y = out + ((n * OH + oy) * OW + ox) * C + c;
                    if (inside == 0)
                        *y = 0.0f;
                    else if (d->pool_type == BACKEND_POOLING_MAX)
                        *y = (float)best;
                    else if (d->pool_type == BACKEND_POOLING_L2)
                        *y = (float)sqrt(acc);
                    else /* count_include_pad counts the padded positions, not those past them */
                        *y = (float)(acc / (double)(d->count_include_pad ? rows * cols : inside));
                }
}
#endif

/* ONNX's coordinate_transformation_mode: where output index x lies in the input. */
static double od_source_coordinate(int64_t x, double scale, int64_t in, int64_t out, uint32_t transform)
{
    double length = scale * (double)in;
    switch (transform) {
    case BACKEND_RESIZE_HALF_PIXEL: return (x + 0.5) / scale - 0.5;
    case BACKEND_RESIZE_HALF_PIXEL_SYMMETRIC:
        return in / 2.0 * (1 - out / length) + (x + 0.5) / scale - 0.5;
    case BACKEND_RESIZE_PYTORCH_HALF_PIXEL: return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case BACKEND_RESIZE_ALIGN_CORNERS: return length == 1 ? 0.0 : x * (double)(in - 1) / (length - 1);
    case BACKEND_RESIZE_ASYMMETRIC: return x / scale;
    default: return (x + 0.5) / scale; /* tf_half_pixel_for_nn */
    }
}

/* The (at most 4) input indices and weights output index x reads along one axis. */
static int od_resize_taps(const BackendResizeDescriptor *d, int64_t x, double scale, int64_t in, int64_t out,
                          int64_t *index, double *weight)
{
    double position = od_source_coordinate(x, scale, in, out, d->coordinate_transformation);
    double base = floor(position), t = position - base, a = d->cubic_coeff_a, total = 0;
    int taps;
    if (d->mode == BACKEND_RESIZE_NEAREST) {
        int up = t == 0 ? 0 : d->nearest_mode == BACKEND_RESIZE_ROUND_PREFER_FLOOR ? t > 0.5
                            : d->nearest_mode == BACKEND_RESIZE_ROUND_PREFER_CEIL ? t >= 0.5
                            : d->nearest_mode == BACKEND_RESIZE_CEIL;
        index[0] = (int64_t)base + up;
        weight[0] = 1;
        taps = 1;
    } else if (d->mode == BACKEND_RESIZE_LINEAR) {
        index[0] = (int64_t)base, index[1] = (int64_t)base + 1;
        weight[0] = 1 - t, weight[1] = t;
        taps = 2;
    } else {
        double s[4] = {t + 1, t, 1 - t, 2 - t}; /* distances to the four taps */
        for (int k = 0; k < 4; k++) {
            double v = s[k];
            index[k] = (int64_t)base - 1 + k;
            weight[k] = v <= 1 ? ((a + 2) * v - (a + 3)) * v * v + 1 : ((a * v - 5 * a) * v + 8 * a) * v - 4 * a;
        }
        taps = 4;
    }
    for (int k = 0; k < taps; k++) {
        if (d->exclude_outside && d->mode == BACKEND_RESIZE_CUBIC && (index[k] < 0 || index[k] >= in))
            weight[k] = 0;
        total += weight[k];
        index[k] = index[k] < 0 ? 0 : index[k] >= in ? in - 1 : index[k];
    }
    if (d->exclude_outside && d->mode == BACKEND_RESIZE_CUBIC)
        for (int k = 0; k < taps; k++)
            weight[k] /= total;
    return taps;
}

#ifndef OD_OWN_RESIZE
static void od_resize(OdWorkload *w, const float *const *in, float *out)
{
    const BackendResizeDescriptor *d = &w->resize;
    int64_t N = w->in[0].dimensions[0], H = w->in[0].dimensions[1], W = w->in[0].dimensions[2];
    int64_t C = w->in[0].dimensions[3], OH = w->out.dimensions[1], OW = w->out.dimensions[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t y = 0; y < OH; y++) {
            int64_t rows[4], cols[4];
            double wy[4], wx[4];
            int ty = od_resize_taps(d, y, d->scale_y, H, OH, rows, wy);
            for (int64_t x = 0; x < OW; x++) {
                int tx = od_resize_taps(d, x, d->scale_x, W, OW, cols, wx);
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
#endif

#endif /* ONE_DEFECT_SPATIAL13_H */
