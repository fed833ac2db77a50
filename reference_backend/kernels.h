/*
 * Reference CPU compute kernels (float32, dense C-contiguous tensors, NHWC images).
 *
 * Every function assumes its arguments were validated by the caller; for
 * arguments meeting the documented preconditions no function reads or writes
 * out of bounds. Return value: 0 on success, nonzero only when a scratch
 * allocation failed (the output is then unspecified). Outputs must not alias
 * inputs, except: rk_activation, rk_unary, rk_softmax and rk_softmax_axis may
 * run in place (y == x), and rk_binary may write over an input that has the
 * full output shape.
 * All functions are reentrant and may be called concurrently from several threads;
 * the heavy ones share their work with a persistent pool of up to rk_thread_count() - 1 threads
 * (started on first use, joined when the library is unloaded).
 */
#ifndef RK_KERNELS_H
#define RK_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Activation functions: the codes and formulas of BACKEND_ACTIVATION_* (backend_api.h). celu
   needs a != 0. Shares large tensors with the thread pool. */
enum rk_activation {
    RK_RELU = 0, RK_BOUNDED_RELU = 1, RK_SIGMOID = 2, RK_TANH = 3, RK_LEAKY_RELU = 4, RK_ELU = 5,
    RK_SELU = 6, RK_HARD_SIGMOID = 7, RK_HARD_SWISH = 8, RK_SWISH = 9, RK_GELU = 10,
    RK_GELU_TANH = 11, RK_SOFTPLUS = 12, RK_SOFTSIGN = 13, RK_CLIP = 14, RK_CELU = 15,
    RK_THRESHOLDED_RELU = 16, RK_MISH = 17, RK_ACTIVATION_COUNT = 18
};
int rk_activation(const float *x, float *y, int64_t count, int function, float a, float b);

/* Element-wise functions of one input: the codes and formulas of BACKEND_UNARY_* (round: half
   to even). y may equal x. */
enum { RK_UNARY_COUNT = 23 };
int rk_unary(const float *x, float *y, int64_t count, int function);

/* Elementwise with NumPy broadcasting. Shapes are given already right-aligned and padded to `rank`
   (1 <= rank <= 8) with leading 1s; out_shape[d] = max(a_shape[d], b_shape[d]) and each input dim is either equal to it or 1. */
enum rk_binary {
    RK_ADD = 0, RK_MUL = 1, RK_SUB = 2, RK_DIV = 3, RK_MAX = 4, RK_MIN = 5, RK_POW = 6,
    RK_PRELU = 7                        /* a < 0 ? a * b : a */
};
int rk_binary(int op, const float *a, const int64_t *a_shape, const float *b, const int64_t *b_shape,
              float *out, const int64_t *out_shape, int rank);

/* Geometry a layer's workload computes once (layers_*.c) and its kernels walk. */

/* Two operands broadcast to the output, each shape right-aligned and padded with leading 1s to
   `rank` (1..8); out[d] = max(a[d], b[d]) and each input dim is either equal to it or 1. */
typedef struct rk_broadcast {
    int rank;
    int64_t a[8], b[8], out[8];
} rk_broadcast;

/* A tensor seen as [outer, extent, inner] around one axis (or a run of axes). */
typedef struct rk_axis_split {
    int64_t outer, extent, inner;
} rk_axis_split;

/* A copy (Slice, Transpose) that reads input element offset + sum_d i[d] * stride[d] for output
   index i (extents outermost first; strides may be negative). */
typedef struct rk_strided_copy {
    int rank;                           /* 0..8 (0: one element) */
    int64_t extent[8];
    int64_t stride[8];
    int64_t offset;
} rk_strided_copy;
void rk_strided_copy_plan(rk_strided_copy *p);   /* drops extents of 1, merges what continues */
int rk_copy_strided(const float *x, float *y, const rk_strided_copy *p);

/* Pad: output index o along d reads input index o - begin[d], which a border (outside [lo[d],
   hi[d]), the input's part the negative pads leave) maps by `mode`: 0 none (the element is
   `value`), 1 reflect within [lo, hi), 2 the nearest edge. Elements are `element` floats (the
   trailing axes without padding); extents and indices count elements. */
typedef struct rk_pad_plan {
    int rank;                           /* 1..8 */
    int64_t out[8], in[8], begin[8], lo[8], hi[8];
    int64_t element;
    int mode;
    float value;
} rk_pad_plan;
int rk_pad(const float *x, float *y, const rk_pad_plan *p);

/* Concatenation of n inputs along an axis: the output is `outer` rows of `row` floats, each the
   rows of the inputs in order, input i contributing chunk[i] floats (its extent along the axis
   times what follows it). */
int rk_concat(const float *const *x, const int64_t *chunk, uint32_t n, int64_t outer, int64_t row,
              float *y);

/* A reduction over the input [extent[0], ..., extent[rank-1]] (outermost first, adjacent axes
   of the same kind merged); bit d of `reduced` marks a reduced axis. */
typedef struct rk_reduce_plan {
    int rank;                           /* 1..6 */
    int64_t extent[6];
    uint32_t reduced;
    int function;                       /* BACKEND_REDUCE_* */
    int64_t count;                      /* elements reduced into each output */
} rk_reduce_plan;

/* Batched matrix products [m, k] @ [k, n]; batch index i over batch[] (outermost first) reads
   matrix sum_d i[d] * a_stride[d] of a and likewise of b (0 where that operand broadcasts). */
typedef struct rk_matmul_plan {
    int batch_rank;                     /* 0..6 */
    int64_t batch[6], a_stride[6], b_stride[6];
    int64_t m, k, n;
} rk_matmul_plan;

/* FullyConnected: x [n, k]; if transpose_weights: w is [m, k] (y = x @ w.T), else w is [k, m] (y = x @ w); bias [m] or NULL; y [n, m]. */
int rk_fully_connected(const float *x, const float *w, const float *bias, float *y,
                       int64_t n, int64_t k, int64_t m, int transpose_weights);

/* 2-D convolution, NHWC. x [n, h, w, c]; filt [o, kh, kw, c]; bias [o] or NULL; y [n, oh, ow, o]
   with oh = (h + pad_top + pad_bottom - ((kh - 1) * dil_h + 1)) / stride_h + 1 (floor, caller guarantees >= 1), same for ow.
   Padding is zero padding. */
typedef struct rk_conv_params {
    int64_t n, h, w, c;      /* input */
    int64_t kh, kw;          /* kernel */
    int64_t stride_h, stride_w, dil_h, dil_w;
    int64_t pad_top, pad_bottom, pad_left, pad_right;
    int64_t oh, ow;          /* output spatial size, computed by the caller with the formula above */
} rk_conv_params;
int rk_conv2d(const float *x, const float *filt, const float *bias, float *y, const rk_conv_params *p, int64_t o);

/* Depthwise convolution: filt [1, kh, kw, c * mult]; output channel (ci * mult + j) uses input channel ci and filter channel ci*mult + j; bias [c*mult] or NULL; y [n, oh, ow, c*mult]. */
int rk_depthwise_conv2d(const float *x, const float *filt, const float *bias, float *y, const rk_conv_params *p, int64_t mult);

/* Pooling over kh x kw windows (stride, dilation and padding as in conv; oh, ow from the
   caller, ceil_mode's included; every window starts inside the padded input); y [n, oh, ow, c].
   Positions outside the input never take part: max never picks them, L2 (sqrt of the sum of
   squares) adds nothing; the average divides by the positions inside the input, or with
   count_include_pad inside the padded input. */
enum rk_pool { RK_POOL_MAX = 0, RK_POOL_AVERAGE = 1, RK_POOL_L2 = 2 };
int rk_pool2d(const float *x, float *y, const rk_conv_params *p, int pool, int count_include_pad);

/* Softmax over the last axis, rows x cols, numerically stable (subtract the row max), with beta: y = exp(beta*(x - max)) / sum. Works for beta < 0 too (use max of beta*x). */
int rk_softmax(const float *x, float *y, int64_t rows, int64_t cols, float beta);

/* Softmax (log = 0) or LogSoftmax (log != 0) of exp(beta * x) over the middle axis of
   [outer, extent, inner]; y may equal x. */
int rk_softmax_axis(const float *x, float *y, const rk_axis_split *s, float beta, int log);

/* Reduce (rk_reduce_plan): y holds one value per combination of the kept axes, in order.
   Sums accumulate in double. Scratch: one double per output (not for max and min). */
int rk_reduce(const float *x, float *y, const rk_reduce_plan *p);

/* Inference BatchNormalization over the last axis of [rows, channels]: (x - mean) /
   sqrt(variance + epsilon) * scale + bias, the four of [channels]. Scratch: 2 floats a channel. */
int rk_batch_normalization(const float *x, const float *mean, const float *variance,
                           const float *scale, const float *bias, float *y, int64_t rows,
                           int64_t channels, float epsilon);

/* LayerNormalization of each row of [rows, cols]: mean and biased variance (in double), then
   * scale (+ bias), both of [cols] (bias may be NULL). No scratch. */
int rk_layer_normalization(const float *x, const float *scale, const float *bias, float *y,
                           int64_t rows, int64_t cols, float epsilon);

/* Batched matrix products (rk_matmul_plan) through the packed SGEMM; y [batch..., m, n]. */
int rk_matmul(const float *a, const float *b, float *y, const rk_matmul_plan *p);

/* A fused epilogue, applied to each part of the output as soon as it is final (while it is
   still in cache): y = act(y + residual). residual has the output's shape and layout (row
   stride ldr floats between output pixels / rows) or is NULL; function is an rk_activation
   value, or -1 for none. */
typedef struct rk_epilogue {
    const float *residual;
    int64_t ldr;
    int function;
    float a, b;
} rk_epilogue;

/* rk_fully_connected, rk_conv2d and rk_depthwise_conv2d followed by `epilogue` (NULL: none).
   The residual must not alias y (but see rk_conv_residual_in_place). Where a function takes `threads`, it is how many threads to
   use (at most rk_thread_count(); a network step's decision, see rk_conv2d_step_threads), or 0:
   decided from the call's work. */
int rk_fully_connected_fused(const float *x, const float *w, const float *bias, float *y,
                             int64_t n, int64_t k, int64_t m, int transpose_weights,
                             const rk_epilogue *epilogue);
int rk_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                    const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue);
int rk_depthwise_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                              const rk_conv_params *p, int64_t mult, const rk_epilogue *epilogue,
                              int threads);

/* The steps of an inverted residual block as one pipeline (pipeline.c): a pointwise expansion
   (groups 1, its filter packed for rk_conv2d_packed), the depthwise convolution (multiplier 1)
   that alone reads its output, and the pointwise projection (packed too) that alone reads the
   depthwise output; the expansion or the projection may be absent. The tensors between them
   exist only a band of rows at a time, in scratch. The results are the bits of the steps apart.
   Only the projection's epilogue may have a residual. */
typedef struct rk_pipeline {
    const float *x;                     /* the first step's input, NHWC */
    const float *w1, *w1_packed, *b1;   /* the expansion's filter [c_exp, 1, 1, c], packed; bias */
    const rk_conv_params *pw;           /* its window (1 x 1, stride 1, unpadded), or NULL: none */
    const rk_epilogue *e1;
    const float *w2, *b2;               /* the depthwise filter [1, kh, kw, c_exp]; bias or NULL */
    const rk_conv_params *dw;           /* its window: c = c_exp */
    const rk_epilogue *e2;
    const float *w3, *w3_packed, *b3;   /* the projection's filter [proj_out, 1, 1, c_exp], packed */
    const rk_conv_params *proj;         /* its window (the depthwise output's), or NULL: none */
    int64_t proj_out;
    const rk_epilogue *e3;
    float *y;                           /* the last step's output */
} rk_pipeline;
/* Whether pipelines run on this CPU (the depthwise kernels that read and write bands are the
   AVX-512 ones). */
int rk_pipeline_available(void);
/* Scratch floats a pipeline around this depthwise window needs on `threads` threads (band
   buffers each: the expanded rows where it expands, the depthwise rows where it projects). */
int64_t rk_pipeline_scratch_floats(const rk_conv_params *dw, int expands, int projects, int threads);
/* Runs the pipeline on `threads` threads (at most rk_thread_count()), the depthwise output rows
   split between them; 1 when a GEMM's scratch could not be allocated. */
int rk_pointwise_depthwise(const rk_pipeline *pipeline, float *scratch, int threads);

/* The weights of rk_conv2d_fused (groups 1) and rk_fully_connected_fused packed once, as their
   GEMM reads them: B [k, n] with B[i][j] = b[i * rsb + j * csb] (a filter [o, K]: rsb 1,
   csb K; FullyConnected's w [m, k] transposed: rsb 1, csb k; w [k, m]: rsb m, csb 1). Returns
   memory for free(), NULL when out of memory. The layout follows the kernel chosen for this
   CPU when the library was loaded: never write it to bytes, pack again in each process. */
float *rk_pack_weights(const float *b, int64_t rsb, int64_t csb, int64_t k, int64_t n);
/* Whether rk_fully_connected_packed of n rows reads its packed weights (few rows stream w). */
int rk_fully_connected_uses_packed(int64_t n);
/* 1 for a 1 x 1, stride-1, unpadded convolution (its NHWC input is the [pixels, c] matrix). */
static inline int rk_conv_is_pointwise(const rk_conv_params *p)
{
    return p->kh == 1 && p->kw == 1 && p->stride_h == 1 && p->stride_w == 1 && p->pad_top == 0 &&
           p->pad_left == 0 && p->oh == p->h && p->ow == p->w;
}
/* 1 for a pointwise convolution of so few pixels that it runs as the few-row fully connected
   layer (its [o, c] weights streamed once, never packed; see rk_conv2d_packed). */
int rk_conv_streams_weights(const rk_conv_params *p);

/* rk_conv2d_packed of the input with its channels scaled first, image b's channel c by
   scale[b * scale_stride + c] (scale_stride 0: one scale for every image): a squeeze-and-
   excitation's Multiplication folded into the convolution that reads its product. The products
   are those the Multiplication would have written, so the bits are the same. Only where
   rk_conv_takes_scale(p) (a pointwise convolution of a GEMM's many pixels); else nothing is
   written. 1 if scratch allocation failed. */
int rk_conv_takes_scale(const rk_conv_params *p);
int rk_conv2d_scaled(const float *x, const float *scale, int64_t scale_stride, const float *filt,
                     const float *packed, const float *bias, float *y, const rk_conv_params *p, int64_t o,
                     const rk_epilogue *epilogue, int threads);

/* A convolution's filter [o, kh, kw, c] (groups 1) packed once for rk_conv2d_packed with these
   very parameters: as rk_pack_weights packs it for the GEMM, or transformed for the Winograd
   convolution of 3 x 3 windows. free() it; NULL when out of memory. */
float *rk_pack_conv_weights(const float *filt, const rk_conv_params *p, int64_t o);

/* rk_conv2d_fused and rk_fully_connected_fused with the weights packed once (a convolution's by
   rk_pack_conv_weights for the same parameters, fully connected's by rk_pack_weights); packed
   may be NULL: then they are packed during the call, as without _packed (a 3 x 3 convolution
   then always takes the GEMM). */
int rk_conv2d_packed(const float *x, const float *filt, const float *packed, const float *bias,
                     float *y, const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue,
                     int threads);
int rk_fully_connected_packed(const float *x, const float *w, const float *packed,
                              const float *bias, float *y, int64_t n, int64_t k, int64_t m,
                              int transpose_weights, const rk_epilogue *epilogue, int threads);
/* rk_conv2d_packed of an input given channels first, x [n, c, h, w] (an image as a network is
   given it; p describes the channels-last input [n, h, w, c] it stands for): where the
   convolution takes the zero-padded copy of few channels (rk_conv_reads_channels_first: an
   image's first layer with padding), that copy is made from the planes, so no channels-last
   copy of the input is written and read again. The same bits as rk_conv2d_packed of the
   channels-last input. -1 where it does not apply (nothing done), else as rk_conv2d_packed. */
int rk_conv_reads_channels_first(const rk_conv_params *p, int64_t o, int packed);
int rk_conv2d_channels_first(const float *x, const float *filt, const float *packed, const float *bias,
                             float *y, const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue,
                             int threads);
/* 1 when rk_conv2d_packed (and rk_conv2d_scaled) with these parameters, packed weights or not
   (`packed`), may write y over its own residual (epilogue->residual == y, ldr == o): it takes
   the GEMM with a single K block, whose epilogue reads each residual value before the same
   place of y is written, by the same thread. A network's last reader of a residual then writes
   its output into the residual's bytes: one tensor less in the cache, and no line of y fetched
   only to be overwritten. The same bits as with a separate y. */
int rk_conv_residual_in_place(const rk_conv_params *p, int64_t o, int packed);

/* Grouped convolution (Backend API 1.3): filt [o, kh, kw, c / groups]; output channel j reads the
   input channels of group j / (o / groups) only; groups divides c and o. groups == 1 is
   rk_conv2d_fused, groups == c runs the depthwise kernel. */
int rk_grouped_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                            const rk_conv_params *p, int64_t o, int64_t groups,
                            const rk_epilogue *epilogue);
int rk_grouped_conv2d_threads(const float *x, const float *filt, const float *bias, float *y,
                              const rk_conv_params *p, int64_t o, int64_t groups,
                              const rk_epilogue *epilogue, int threads);

/* TransposeConvolution2d (ONNX's ConvTranspose), NHWC: x [n, h, w, c]; filt [c, kh, kw, o / groups];
   bias [o] or NULL; y [n, oh, ow, o], input pixel (iy, ix) adding into output
   (iy * stride_h + ky * dil_h - pad_top, ix * stride_w + kx * dil_w - pad_left); oh and ow from
   the caller (output_padding included; pad_bottom and pad_right are implied by them). */
int rk_transpose_conv2d(const float *x, const float *filt, const float *bias, float *y,
                        const rk_conv_params *p, int64_t o, int64_t groups);

/* Resize, NHWC: output (oy, ox) = sum over the taps of y_weight * x_weight * x[iy, ix], with
   the taps of each axis precomputed by rk_resize_axis (indices already inside the input). */
enum rk_resize_mode { RK_RESIZE_NEAREST = 0, RK_RESIZE_LINEAR = 1, RK_RESIZE_CUBIC = 2 };
typedef struct rk_resize_plan {
    int64_t n, h, w, c, oh, ow;
    int taps;                           /* rk_resize_taps(mode): 1, 2 or 4 */
    const int32_t *y_index, *x_index;   /* [oh][taps], [ow][taps] */
    const float *y_weight, *x_weight;
} rk_resize_plan;
int rk_resize_taps(int mode);
/* The taps of one axis of extent `in` resized to `out` (index and weight: out * taps entries):
   mode, transform (BACKEND_RESIZE_HALF_PIXEL ...), nearest_mode (BACKEND_RESIZE_ROUND_PREFER_FLOOR
   ...), cubic_a and exclude_outside as ONNX's Resize; scale > 0 (output / input extent unless
   the model gave another). */
void rk_resize_axis(int64_t in, int64_t out, float scale, int mode, int transform, int nearest_mode,
                    float cubic_a, int exclude_outside, int32_t *index, float *weight);
int rk_resize(const float *x, float *y, const rk_resize_plan *plan);

/* Number of worker threads the heavy kernels may use (>=1). Default: number of online CPUs, capped at 8; the environment variable REFERENCE_BACKEND_THREADS (positive integer) overrides it when first read. */
int rk_thread_count(void);

/*
 * A network's execute: between rk_pool_hold() and rk_pool_release() the pool's workers (up to
 * threads - 1, started and woken by the hold) spin between the steps' jobs instead of going to
 * sleep, so that a step's hand-off costs about a microsecond and a thread pays for much
 * smaller layers than in a lone call. Holds from several threads add up; each hold is released
 * once.
 */
void rk_pool_hold(int threads);
void rk_pool_release(void);

/*
 * The threads a network step of this layer should run on while the pool is held, decided once
 * when its program is compiled or loaded (step_threads.c): the layer's work over the work that
 * pays a hot thread (RK_STEP_*), at most rk_thread_count(), and never more than the parts its
 * split gives (row panels times column blocks of the GEMM, output rows times channel blocks of
 * a depthwise convolution). 1: the step stays on the calling thread.
 */
int rk_conv2d_step_threads(const rk_conv_params *p, int64_t o, int64_t groups);
int rk_depthwise_step_threads(const rk_conv_params *p, int64_t mult);
int rk_fully_connected_step_threads(int64_t n, int64_t k, int64_t m);

#ifdef __cplusplus
}
#endif

#endif /* RK_KERNELS_H */
