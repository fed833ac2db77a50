/*
 * Reference CPU compute kernels (float32, dense C-contiguous tensors, NHWC images).
 *
 * Every function assumes its arguments were validated by the caller; for
 * arguments meeting the documented preconditions no function reads or writes
 * out of bounds. Return value: 0 on success, nonzero only when a scratch
 * allocation failed (the output is then unspecified). Outputs must not alias
 * inputs, except: rk_activation and rk_softmax may run in place (y == x), and
 * rk_binary may write over an input that has the full output shape.
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

/* Activation functions */
enum rk_activation { RK_RELU = 0, RK_BOUNDED_RELU = 1, RK_SIGMOID = 2, RK_TANH = 3, RK_LEAKY_RELU = 4 };
/* bounded_relu: y = min(a, max(b, x)); leaky_relu: y = x > 0 ? x : a * x */
int rk_activation(const float *x, float *y, int64_t count, int function, float a, float b);

/* Elementwise with NumPy broadcasting. Shapes are given already right-aligned and padded to `rank`
   (1 <= rank <= 8) with leading 1s; out_shape[d] = max(a_shape[d], b_shape[d]) and each input dim is either equal to it or 1. */
enum rk_binary { RK_ADD = 0, RK_MUL = 1 };
int rk_binary(int op, const float *a, const int64_t *a_shape, const float *b, const int64_t *b_shape,
              float *out, const int64_t *out_shape, int rank);

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

/* Pooling: kh/kw are the window, dilation is always 1 (ignore dil fields), padding as in conv; y [n, oh, ow, c].
   max: padded positions never win (if a window contains only padding, output -INFINITY is not acceptable: the caller guarantees every window covers at least one real element).
   average: divide by the number of REAL (non-padding) elements in the window (exclude padding). */
enum rk_pool { RK_POOL_MAX = 0, RK_POOL_AVERAGE = 1 };
int rk_pool2d(const float *x, float *y, const rk_conv_params *p, int pool);

/* Softmax over the last axis, rows x cols, numerically stable (subtract the row max), with beta: y = exp(beta*(x - max)) / sum. Works for beta < 0 too (use max of beta*x). */
int rk_softmax(const float *x, float *y, int64_t rows, int64_t cols, float beta);

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
   The residual must not alias y. */
int rk_fully_connected_fused(const float *x, const float *w, const float *bias, float *y,
                             int64_t n, int64_t k, int64_t m, int transpose_weights,
                             const rk_epilogue *epilogue);
int rk_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                    const rk_conv_params *p, int64_t o, const rk_epilogue *epilogue);
int rk_depthwise_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                              const rk_conv_params *p, int64_t mult, const rk_epilogue *epilogue);

/* Grouped convolution (Backend API 1.3): filt [o, kh, kw, c / groups]; output channel j reads the
   input channels of group j / (o / groups) only; groups divides c and o. groups == 1 is
   rk_conv2d_fused, groups == c runs the depthwise kernel. */
int rk_grouped_conv2d_fused(const float *x, const float *filt, const float *bias, float *y,
                            const rk_conv_params *p, int64_t o, int64_t groups,
                            const rk_epilogue *epilogue);

/* Number of worker threads the heavy kernels may use (>=1). Default: number of online CPUs, capped at 8; the environment variable REFERENCE_BACKEND_THREADS (positive integer) overrides it when first read. */
int rk_thread_count(void);

#ifdef __cplusplus
}
#endif

#endif /* RK_KERNELS_H */
