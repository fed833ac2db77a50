/*
 * backend_api.h - the C ABI between a runtime and a dynamic backend.
 *
 * This header is the single source of truth for the Backend API version, the
 * entry points a backend shared object exports and the layout of every struct
 * that crosses the boundary. The loader's Cython declarations
 * (abi/backend_api.pxd) mirror it name for name.
 *
 * VERSIONING POLICY
 *
 *   The Backend API version is MAJOR.MINOR.
 *
 *   MAJOR is bumped by any change that breaks a backend built against the
 *   previous version: removing, renaming, retyping or reordering a struct
 *   member, function parameter or enum value, or changing the meaning of one.
 *
 *   MINOR is bumped by changes that keep every existing backend working:
 *   appending members at the end of a struct, appending enum values, adding
 *   entry points a runtime treats as optional.
 *
 *   A backend reports the version it was built against through GetVersion().
 *   A runtime accepts it iff
 *
 *       backend.major == runtime.major && backend.minor <= runtime.minor
 *
 *   Every struct begins with `struct_size`, set by whoever fills the struct to
 *   sizeof() as compiled against its own copy of this header. A runtime reads
 *   only the members that struct_size covers, so a backend built against an
 *   older minor version keeps working: the members it lacks count as absent.
 *   For each struct, BACKEND_<STRUCT>_SIZE_<MAJOR>_<MINOR> gives the size the
 *   struct had at that version, computed through its last member.
 *
 *   abi/CHANGELOG.md has one entry per version.
 *
 * RULES FOR EVERY BACKEND
 *
 *   - The three entry points below are exported with C linkage and default
 *     visibility.
 *   - A backend never aborts, exits or throws across this boundary.
 *   - Strings returned by a backend are NUL-terminated, 7-bit ASCII.
 */
#ifndef DYNAMIC_BACKENDS_BACKEND_API_H
#define DYNAMIC_BACKENDS_BACKEND_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The Backend API version this header describes. */
#define BACKEND_API_VERSION_MAJOR 1
#define BACKEND_API_VERSION_MINOR 3

/* Longest backend id a runtime accepts, in bytes, not counting the NUL. */
#define BACKEND_ID_MAX_LENGTH 256

/* Most dimensions a tensor may have. */
#define BACKEND_MAX_DIMENSIONS 8

/* Most dimensions a tensor of a layer type added in 1.3 may have (the
   convolution and pooling family keep rank 4). */
#define BACKEND_MAX_LAYER_RANK 6

/* Marks a symbol a backend exports to the runtime. */
#if defined(__GNUC__)
#define BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define BACKEND_EXPORT
#endif

/* An anonymous union (C11, C++, and GNU C in every mode; the keyword keeps
   -std=c99 -pedantic quiet). */
#if defined(__GNUC__)
#define BACKEND_ANONYMOUS_UNION __extension__
#else
#define BACKEND_ANONYMOUS_UNION
#endif

/* Size of a struct at a given version: offset of its last member plus that
   member's size (trailing padding is not part of the contract). */
#define BACKEND_STRUCT_SIZE_THROUGH(type, last_member) \
    (offsetof(type, last_member) + sizeof(((type *)0)->last_member))

/* Whether the struct at `p` (whose first member is struct_size) is large
   enough to contain `member`: the test a runtime makes before reading it. */
#define BACKEND_STRUCT_HAS(type, p, member) \
    ((p)->struct_size >= BACKEND_STRUCT_SIZE_THROUGH(type, member))

/* ========================================================================
 * Status codes and messages
 *
 * Every fallible function returns a BackendStatus and, on failure, writes a
 * NUL-terminated, human-readable message into the caller's buffer
 * (`message`, `message_size` bytes, truncated to fit; the buffer may be NULL
 * when `message_size` is 0). On success the buffer is left alone.
 * ======================================================================== */
typedef int32_t BackendStatus;

#define BACKEND_STATUS_OK               0 /* success */
#define BACKEND_STATUS_INVALID_ARGUMENT 1 /* a shape, type, descriptor or buffer is wrong */
#define BACKEND_STATUS_UNSUPPORTED      2 /* valid, but this backend does not do it */
#define BACKEND_STATUS_OUT_OF_MEMORY    3 /* an allocation failed */
#define BACKEND_STATUS_INVALID_STATE    4 /* called at the wrong time (e.g. release before acquire) */
#define BACKEND_STATUS_INTERNAL_ERROR   5 /* anything else; the message says what */

/* ========================================================================
 * Tensors
 *
 * Data is dense and C-contiguous (row-major); images are NHWC.
 * ======================================================================== */
typedef uint32_t BackendDataType;

#define BACKEND_DATA_TYPE_FLOAT32 0

typedef struct BackendTensorInfo {
    uint32_t struct_size;
    BackendDataType data_type;
    uint32_t num_dimensions;              /* 0 .. BACKEND_MAX_DIMENSIONS */
    uint32_t reserved;                    /* zero */
    int64_t dimensions[BACKEND_MAX_DIMENSIONS]; /* first num_dimensions used, each >= 1 */
    /* Append new members at the end only. */
} BackendTensorInfo;

#define BACKEND_TENSOR_INFO_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendTensorInfo, dimensions)

/* A buffer handed to a workload for one execution. Borrowed: valid only for
   the duration of the call. Arrays of buffers are passed with the stride of
   this struct, so it never grows. A backend never writes an input buffer. */
typedef struct BackendBuffer {
    uint32_t struct_size;
    BACKEND_ANONYMOUS_UNION union {
        uint32_t reserved;                /* 1.1, 1.2: zero */
        uint32_t flags;                   /* 1.3: BACKEND_BUFFER_* bits */
    };
    void *data;                           /* borrowed; at least size_bytes long */
    uint64_t size_bytes;
    /* Append new members at the end only. */
} BackendBuffer;

/* Backend API 1.3: the buffer's memory may be read-only, so writing it may
   fault. A runtime sets it on input buffers holding network constants and
   on arrays its caller marked read-only. (No backend writes an input buffer
   in any case; the bit tells one that wants to run a layer in place that it
   must not reuse this input's memory for its output.) Runtimes before 1.3
   set no bit. */
#define BACKEND_BUFFER_READ_ONLY 0x1u

#define BACKEND_BUFFER_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendBuffer, size_bytes)

/* ========================================================================
 * Layers and their descriptors
 *
 * A layer is described by its type, its input and output tensors and, for
 * the types that have one, a descriptor struct (which starts with its size).
 * ======================================================================== */
typedef uint32_t BackendLayerType;

#define BACKEND_LAYER_ACTIVATION               0 /* inputs: x; descriptor: BackendActivationDescriptor */
#define BACKEND_LAYER_ADDITION                 1 /* inputs: a, b (broadcasting); no descriptor */
#define BACKEND_LAYER_MULTIPLICATION           2 /* inputs: a, b (broadcasting); no descriptor */
#define BACKEND_LAYER_FULLY_CONNECTED          3 /* inputs: x, w[, bias]; BackendFullyConnectedDescriptor */
#define BACKEND_LAYER_CONVOLUTION2D            4 /* inputs: x, w[, bias]; BackendConvolution2dDescriptor */
#define BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D  5 /* inputs: x, w[, bias]; BackendConvolution2dDescriptor */
#define BACKEND_LAYER_POOLING2D                6 /* inputs: x; BackendPooling2dDescriptor */
#define BACKEND_LAYER_SOFTMAX                  7 /* inputs: x; BackendSoftmaxDescriptor */
#define BACKEND_LAYER_RESHAPE                  8 /* inputs: x; no descriptor (the output info is the shape) */

/* ---- Backend API 1.3 ----

   Layer types a runtime offers only to backends built against 1.3 or later.
   Their tensors have rank 1 to BACKEND_MAX_LAYER_RANK. Where ONNX defines an
   operator of the same meaning, its semantics, defaults and edge cases apply
   (broadcasting, rounding, coordinate transforms). Every axis, index and
   count in their descriptors is resolved by the runtime: axes are
   non-negative and below the rank, slice bounds are clamped, so a backend
   computes without re-deriving ONNX's conventions, but it still checks every
   value against the tensor infos it is given.

   1.3 also appends members to the descriptors of Convolution2d, Pooling2d
   and Softmax. A runtime never hands a backend built against an earlier
   minor version a 1.3 layer type, nor a descriptor whose 1.3 members differ
   from the defaults written beside them (the behaviour before they existed),
   since such a backend cannot read them. A backend built against 1.3 reads a
   1.3 member only when the descriptor's struct_size covers it
   (BACKEND_STRUCT_HAS), and otherwise takes that default. */
#define BACKEND_LAYER_SUBTRACTION             9 /* inputs: a, b (broadcasting); no descriptor */
#define BACKEND_LAYER_DIVISION               10 /* inputs: a, b (broadcasting); no descriptor */
#define BACKEND_LAYER_MAXIMUM                11 /* inputs: a, b (broadcasting); no descriptor */
#define BACKEND_LAYER_MINIMUM                12 /* inputs: a, b (broadcasting); no descriptor */
#define BACKEND_LAYER_POWER                  13 /* inputs: a, b (broadcasting); no descriptor */
#define BACKEND_LAYER_ELEMENTWISE_UNARY      14 /* inputs: x; BackendElementwiseUnaryDescriptor */
#define BACKEND_LAYER_PRELU                  15 /* inputs: x, slope (broadcast to x); no descriptor */
#define BACKEND_LAYER_CONCATENATION          16 /* inputs: x1 .. xn (n >= 1); BackendConcatenationDescriptor */
#define BACKEND_LAYER_SLICE                  17 /* inputs: x; BackendSliceDescriptor */
#define BACKEND_LAYER_TRANSPOSE              18 /* inputs: x; BackendTransposeDescriptor */
#define BACKEND_LAYER_PAD                    19 /* inputs: x; BackendPadDescriptor */
#define BACKEND_LAYER_RESIZE                 20 /* inputs: x [N, H, W, C]; BackendResizeDescriptor */
#define BACKEND_LAYER_REDUCE                 21 /* inputs: x; BackendReduceDescriptor */
#define BACKEND_LAYER_BATCH_NORMALIZATION    22 /* inputs: x, mean, variance, scale, bias; BackendBatchNormalizationDescriptor */
#define BACKEND_LAYER_LAYER_NORMALIZATION    23 /* inputs: x, scale[, bias]; BackendLayerNormalizationDescriptor */
#define BACKEND_LAYER_MAT_MUL                24 /* inputs: a, b (NumPy matmul); no descriptor */
#define BACKEND_LAYER_TRANSPOSE_CONVOLUTION2D 25 /* inputs: x, w[, bias]; BackendTransposeConvolution2dDescriptor */

/* Number of layer types at each version. BACKEND_LAYER_TYPE_COUNT keeps the
   value it had in 1.1 (a macro that changed value would change the meaning
   of code compiled against it, such as a table of names sized by it). */
#define BACKEND_LAYER_TYPE_COUNT               9
#define BACKEND_LAYER_TYPE_COUNT_1_2           9
#define BACKEND_LAYER_TYPE_COUNT_1_3          26

/* Activation functions. f(x) with the descriptor's parameters a and b. */
#define BACKEND_ACTIVATION_RELU              0 /* max(0, x) */
#define BACKEND_ACTIVATION_BOUNDED_RELU      1 /* min(a, max(b, x)) */
#define BACKEND_ACTIVATION_SIGMOID           2 /* 1 / (1 + exp(-x)) */
#define BACKEND_ACTIVATION_TANH              3
#define BACKEND_ACTIVATION_LEAKY_RELU        4 /* x > 0 ? x : a * x */
/* Backend API 1.3 */
#define BACKEND_ACTIVATION_ELU               5 /* x > 0 ? x : a * (exp(x) - 1) */
#define BACKEND_ACTIVATION_SELU              6 /* b * (x > 0 ? x : a * (exp(x) - 1)) */
#define BACKEND_ACTIVATION_HARD_SIGMOID      7 /* max(0, min(1, a * x + b)) */
#define BACKEND_ACTIVATION_HARD_SWISH        8 /* x * max(0, min(1, x / 6 + 1/2)) */
#define BACKEND_ACTIVATION_SWISH             9 /* x / (1 + exp(-a * x)) */
#define BACKEND_ACTIVATION_GELU             10 /* x / 2 * (1 + erf(x / sqrt(2))) */
#define BACKEND_ACTIVATION_GELU_TANH        11 /* x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) */
#define BACKEND_ACTIVATION_SOFTPLUS         12 /* log(1 + exp(x)) */
#define BACKEND_ACTIVATION_SOFTSIGN         13 /* x / (1 + |x|) */
#define BACKEND_ACTIVATION_CLIP             14 /* min(b, max(a, x)) */
#define BACKEND_ACTIVATION_CELU             15 /* max(0, x) + min(0, a * (exp(x / a) - 1)) */
#define BACKEND_ACTIVATION_THRESHOLDED_RELU 16 /* x > a ? x : 0 */
#define BACKEND_ACTIVATION_MISH             17 /* x * tanh(log(1 + exp(x))) */

typedef struct BackendActivationDescriptor {
    uint32_t struct_size;
    uint32_t function;                    /* BACKEND_ACTIVATION_* */
    float a;
    float b;
    /* Append new members at the end only. */
} BackendActivationDescriptor;

typedef struct BackendFullyConnectedDescriptor {
    uint32_t struct_size;
    uint32_t transpose_weights;           /* 1: w is [M, K]; 0: w is [K, M] */
    uint32_t bias_enabled;                /* 1: a third input, bias [M] */
    /* Append new members at the end only. */
} BackendFullyConnectedDescriptor;

/* Used by Convolution2d (w [O, kH, kW, C / groups]) and
   DepthwiseConvolution2d (w [1, kH, kW, C * multiplier]). */
typedef struct BackendConvolution2dDescriptor {
    uint32_t struct_size;
    uint32_t stride_y, stride_x;          /* >= 1 */
    uint32_t pad_top, pad_bottom, pad_left, pad_right;
    uint32_t dilation_y, dilation_x;      /* >= 1 */
    uint32_t bias_enabled;                /* 1: a third input, bias [O] */
    /* ---- Backend API 1.3 ---- */
    /* Convolution2d: the input channels C and the outputs O split into
       `groups` equal groups; output group g reads input group g only.
       1 before 1.3, and always for DepthwiseConvolution2d. */
    uint32_t groups;
    /* Append new members at the end only. */
} BackendConvolution2dDescriptor;

#define BACKEND_POOLING_MAX     0
#define BACKEND_POOLING_AVERAGE 1         /* padding is excluded unless count_include_pad */
#define BACKEND_POOLING_L2      2         /* 1.3: sqrt of the sum of squares; padding adds 0 */

typedef struct BackendPooling2dDescriptor {
    uint32_t struct_size;
    uint32_t pool_type;                   /* BACKEND_POOLING_* */
    uint32_t kernel_y, kernel_x;          /* >= 1 */
    uint32_t stride_y, stride_x;          /* >= 1 */
    uint32_t pad_top, pad_bottom, pad_left, pad_right; /* each < the kernel extent */
    /* ---- Backend API 1.3 (before: 0, 0, 1, 1) ---- */
    /* 1: the output size rounds up, as ONNX's ceil_mode; a window that would
       start in the bottom or right padding is not made. */
    uint32_t ceil_mode;
    uint32_t count_include_pad;           /* average: 1 counts padded positions */
    uint32_t dilation_y, dilation_x;      /* >= 1 */
    /* Append new members at the end only. */
} BackendPooling2dDescriptor;

typedef struct BackendSoftmaxDescriptor {
    uint32_t struct_size;
    float beta;                           /* exp(beta * x), normalized */
    /* ---- Backend API 1.3 (before: the last axis, 0) ---- */
    uint32_t axis;                        /* the axis normalized over, < rank */
    uint32_t log;                         /* 1: LogSoftmax, the log of the result */
    /* Append new members at the end only. */
} BackendSoftmaxDescriptor;

#define BACKEND_ACTIVATION_DESCRIPTOR_SIZE_1_1 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendActivationDescriptor, b)
#define BACKEND_FULLY_CONNECTED_DESCRIPTOR_SIZE_1_1 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendFullyConnectedDescriptor, bias_enabled)
#define BACKEND_CONVOLUTION2D_DESCRIPTOR_SIZE_1_1 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendConvolution2dDescriptor, bias_enabled)
#define BACKEND_CONVOLUTION2D_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendConvolution2dDescriptor, groups)
#define BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_1 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendPooling2dDescriptor, pad_right)
#define BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendPooling2dDescriptor, dilation_x)
#define BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendSoftmaxDescriptor, beta)
#define BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendSoftmaxDescriptor, log)

/* ---- Descriptors of the layer types of Backend API 1.3 ---- */

#define BACKEND_UNARY_ABS         0
#define BACKEND_UNARY_NEG         1
#define BACKEND_UNARY_EXP         2
#define BACKEND_UNARY_LOG         3
#define BACKEND_UNARY_SQRT        4
#define BACKEND_UNARY_RSQRT       5       /* 1 / sqrt(x) */
#define BACKEND_UNARY_RECIPROCAL  6
#define BACKEND_UNARY_FLOOR       7
#define BACKEND_UNARY_CEIL        8
#define BACKEND_UNARY_ROUND       9       /* half to even */
#define BACKEND_UNARY_SIN        10
#define BACKEND_UNARY_COS        11
#define BACKEND_UNARY_ERF        12
#define BACKEND_UNARY_SIGN       13       /* -1, 0 or 1 (NaN stays NaN) */
#define BACKEND_UNARY_TAN        14
#define BACKEND_UNARY_ASIN       15
#define BACKEND_UNARY_ACOS       16
#define BACKEND_UNARY_ATAN       17
#define BACKEND_UNARY_SINH       18
#define BACKEND_UNARY_COSH       19
#define BACKEND_UNARY_ASINH      20
#define BACKEND_UNARY_ACOSH      21
#define BACKEND_UNARY_ATANH      22

typedef struct BackendElementwiseUnaryDescriptor {
    uint32_t struct_size;
    uint32_t function;                    /* BACKEND_UNARY_* */
    /* Append new members at the end only. */
} BackendElementwiseUnaryDescriptor;

/* The inputs have the output's rank and equal dimensions except along
   `axis`, where the output's is their sum. */
typedef struct BackendConcatenationDescriptor {
    uint32_t struct_size;
    uint32_t axis;                        /* < rank */
    /* Append new members at the end only. */
} BackendConcatenationDescriptor;

/* Output element i along axis d reads input index begin[d] + i * step[d];
   the runtime has clamped ONNX's bounds so that every index read lies
   inside the input (for the output's extent along d, in its info). */
typedef struct BackendSliceDescriptor {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    int64_t begin[BACKEND_MAX_DIMENSIONS]; /* first rank entries: 0 <= begin[d] < input dim */
    int64_t step[BACKEND_MAX_DIMENSIONS];  /* first rank entries: non-zero */
    /* Append new members at the end only. */
} BackendSliceDescriptor;

/* Output dimension d is input dimension perm[d]. */
typedef struct BackendTransposeDescriptor {
    uint32_t struct_size;
    uint32_t perm[BACKEND_MAX_DIMENSIONS]; /* first rank entries: a permutation of 0 .. rank-1 */
    /* Append new members at the end only. */
} BackendTransposeDescriptor;

#define BACKEND_PAD_CONSTANT 0            /* the new elements are `value` */
#define BACKEND_PAD_REFLECT  1            /* mirrored without repeating the edge; pads < dim */
#define BACKEND_PAD_EDGE     2            /* the edge element repeated */

/* Output dimension d is input dimension + pad_begin[d] + pad_end[d]; a
   negative pad removes elements, as in ONNX. */
typedef struct BackendPadDescriptor {
    uint32_t struct_size;
    uint32_t mode;                        /* BACKEND_PAD_* */
    float value;                          /* BACKEND_PAD_CONSTANT */
    uint32_t reserved;                    /* zero */
    int64_t pad_begin[BACKEND_MAX_DIMENSIONS]; /* first rank entries */
    int64_t pad_end[BACKEND_MAX_DIMENSIONS];
    /* Append new members at the end only. */
} BackendPadDescriptor;

#define BACKEND_RESIZE_NEAREST 0
#define BACKEND_RESIZE_LINEAR  1
#define BACKEND_RESIZE_CUBIC   2

/* ONNX's coordinate_transformation_mode: where output pixel x lies in the
   input, from the scale (output / input extent) and the two extents. */
#define BACKEND_RESIZE_HALF_PIXEL           0 /* (x + 0.5) / scale - 0.5 */
#define BACKEND_RESIZE_HALF_PIXEL_SYMMETRIC 1
#define BACKEND_RESIZE_PYTORCH_HALF_PIXEL   2 /* output extent 1: 0; else as half_pixel */
#define BACKEND_RESIZE_ALIGN_CORNERS        3 /* x * (in - 1) / (out - 1); output extent 1: 0 */
#define BACKEND_RESIZE_ASYMMETRIC           4 /* x / scale */
#define BACKEND_RESIZE_TF_HALF_PIXEL_FOR_NN 5 /* (x + 0.5) / scale */

/* ONNX's nearest_mode: how a coordinate becomes an index for NEAREST. */
#define BACKEND_RESIZE_ROUND_PREFER_FLOOR 0
#define BACKEND_RESIZE_ROUND_PREFER_CEIL  1
#define BACKEND_RESIZE_FLOOR              2
#define BACKEND_RESIZE_CEIL               3

/* Resizes H and W of an NHWC tensor to the output's. */
typedef struct BackendResizeDescriptor {
    uint32_t struct_size;
    uint32_t mode;                        /* BACKEND_RESIZE_NEAREST, _LINEAR, _CUBIC */
    uint32_t coordinate_transformation;   /* BACKEND_RESIZE_HALF_PIXEL, ... */
    uint32_t nearest_mode;                /* BACKEND_RESIZE_ROUND_PREFER_FLOOR, ... */
    /* The scales the coordinate transform uses, > 0: output / input extent
       unless the model gave others (ONNX's `scales`). */
    float scale_y, scale_x;
    float cubic_coeff_a;                  /* CUBIC: -0.75 unless given */
    uint32_t exclude_outside;             /* CUBIC: 1 drops weights outside the input */
    /* Append new members at the end only. */
} BackendResizeDescriptor;

#define BACKEND_REDUCE_MEAN        0
#define BACKEND_REDUCE_SUM         1
#define BACKEND_REDUCE_MAX         2
#define BACKEND_REDUCE_MIN         3
#define BACKEND_REDUCE_PROD        4
#define BACKEND_REDUCE_L1          5      /* sum of |x| */
#define BACKEND_REDUCE_L2          6      /* sqrt of the sum of x^2 */
#define BACKEND_REDUCE_SUM_SQUARE  7
#define BACKEND_REDUCE_LOG_SUM_EXP 8

typedef struct BackendReduceDescriptor {
    uint32_t struct_size;
    uint32_t function;                    /* BACKEND_REDUCE_* */
    uint32_t axes;                        /* bit d set: axis d is reduced; at least one bit */
    uint32_t keep_dims;                   /* 1: reduced axes stay, of extent 1 */
    /* Append new members at the end only. */
} BackendReduceDescriptor;

/* Inference: (x - mean) / sqrt(variance + epsilon) * scale + bias, the
   four of shape [C] applied along the last axis. */
typedef struct BackendBatchNormalizationDescriptor {
    uint32_t struct_size;
    float epsilon;                        /* > 0 */
    /* Append new members at the end only. */
} BackendBatchNormalizationDescriptor;

/* Normalizes over the axes from `axis` to the last (mean and biased
   variance), then scale (and bias) of those axes' shape. */
typedef struct BackendLayerNormalizationDescriptor {
    uint32_t struct_size;
    uint32_t axis;                        /* < rank */
    float epsilon;                        /* > 0 */
    uint32_t bias_enabled;                /* 1: a third input, bias */
    /* Append new members at the end only. */
} BackendLayerNormalizationDescriptor;

/* x [N, H, W, C], w [C, kH, kW, O / groups], bias [O]. The output extent is
   stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1
   - pad_begin - pad_end, as ONNX's ConvTranspose. */
typedef struct BackendTransposeConvolution2dDescriptor {
    uint32_t struct_size;
    uint32_t stride_y, stride_x;          /* >= 1 */
    uint32_t pad_top, pad_bottom, pad_left, pad_right;
    uint32_t output_padding_y, output_padding_x; /* < stride or dilation */
    uint32_t dilation_y, dilation_x;      /* >= 1 */
    uint32_t groups;                      /* >= 1, divides C and O */
    uint32_t bias_enabled;                /* 1: a third input, bias [O] */
    /* Append new members at the end only. */
} BackendTransposeConvolution2dDescriptor;

#define BACKEND_ELEMENTWISE_UNARY_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendElementwiseUnaryDescriptor, function)
#define BACKEND_CONCATENATION_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendConcatenationDescriptor, axis)
#define BACKEND_SLICE_DESCRIPTOR_SIZE_1_3 BACKEND_STRUCT_SIZE_THROUGH(BackendSliceDescriptor, step)
#define BACKEND_TRANSPOSE_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendTransposeDescriptor, perm)
#define BACKEND_PAD_DESCRIPTOR_SIZE_1_3 BACKEND_STRUCT_SIZE_THROUGH(BackendPadDescriptor, pad_end)
#define BACKEND_RESIZE_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendResizeDescriptor, exclude_outside)
#define BACKEND_REDUCE_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendReduceDescriptor, keep_dims)
#define BACKEND_BATCH_NORMALIZATION_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendBatchNormalizationDescriptor, epsilon)
#define BACKEND_LAYER_NORMALIZATION_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendLayerNormalizationDescriptor, bias_enabled)
#define BACKEND_TRANSPOSE_CONVOLUTION2D_DESCRIPTOR_SIZE_1_3 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendTransposeConvolution2dDescriptor, bias_enabled)

/* Everything a backend is told about one layer. Borrowed: every pointer is
   valid only for the duration of the call it is passed to; a backend that
   needs the information later copies it. */
typedef struct BackendLayerDescription {
    uint32_t struct_size;
    BackendLayerType layer_type;          /* BACKEND_LAYER_* */
    uint32_t num_inputs;
    uint32_t num_outputs;
    const BackendTensorInfo *inputs;      /* borrowed, num_inputs entries */
    const BackendTensorInfo *outputs;     /* borrowed, num_outputs entries */
    const void *descriptor;               /* borrowed; the layer's descriptor or NULL */
    /* Append new members at the end only. */
} BackendLayerDescription;

#define BACKEND_LAYER_DESCRIPTION_SIZE_1_1 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendLayerDescription, descriptor)

/* ========================================================================
 * Capabilities
 *
 * A constant list of name/value pairs (e.g. {"NonConstWeights", 1}). The
 * array and its strings are owned by the backend and live as long as the
 * library is loaded. Runtimes step through the array by struct_size.
 * ======================================================================== */
typedef struct BackendCapability {
    uint32_t struct_size;
    uint32_t value;                       /* 0 or 1 */
    const char *name;                     /* printable ASCII, no spaces */
    /* Append new members at the end only. */
} BackendCapability;

#define BACKEND_CAPABILITY_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendCapability, name)

/* ========================================================================
 * Custom memory allocator
 *
 * Offered by the runtime through use_custom_allocator(). Owned by the
 * runtime, which keeps it valid until every object of the backend's that
 * may allocate with it is destroyed.
 * ======================================================================== */
typedef struct BackendAllocator {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    void *user_data;                      /* passed back to every call */
    /* Returns `size` bytes aligned to `alignment` (a power of two), or NULL. */
    void *(*allocate)(void *user_data, size_t size, size_t alignment);
    /* Releases what allocate() returned. */
    void (*deallocate)(void *user_data, void *pointer);
    /* Append new members at the end only. */
} BackendAllocator;

#define BACKEND_ALLOCATOR_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendAllocator, deallocate)

/* ========================================================================
 * Memory manager
 *
 * Optional. Created by the instance, handed to create_workload_factory().
 * The runtime calls acquire() before it executes workloads and release()
 * when it is done; calls are balanced. Owned by the runtime, released with
 * destroy() after every workload factory created with it is destroyed. It
 * stays valid after the instance that created it is destroyed.
 * ======================================================================== */
typedef struct BackendMemoryManager BackendMemoryManager;

struct BackendMemoryManager {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    BackendStatus (*acquire)(BackendMemoryManager *self, char *message, size_t message_size);
    BackendStatus (*release)(BackendMemoryManager *self, char *message, size_t message_size);
    /* Called exactly once; must not fail. */
    void (*destroy)(BackendMemoryManager *self);
    /* Append new members at the end only. */
};

#define BACKEND_MEMORY_MANAGER_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendMemoryManager, destroy)

/* ========================================================================
 * Workload
 *
 * One layer, ready to run on buffers of the shapes it was created with.
 * Owned by the runtime, released with destroy(). Stays valid after the
 * factory and the instance that created it are destroyed. execute() may be
 * called any number of times, but not concurrently on one workload.
 * ======================================================================== */
typedef struct BackendWorkload BackendWorkload;

struct BackendWorkload {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    /* Reads the inputs and writes every output. Buffers are borrowed for the
       call; their sizes are checked against the shapes the workload was
       created with. */
    BackendStatus (*execute)(BackendWorkload *self,
                             const BackendBuffer *inputs, uint32_t num_inputs,
                             const BackendBuffer *outputs, uint32_t num_outputs,
                             char *message, size_t message_size);
    /* Called exactly once; must not fail. */
    void (*destroy)(BackendWorkload *self);
    /* Append new members at the end only. */
};

#define BACKEND_WORKLOAD_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendWorkload, destroy)

/* ========================================================================
 * Workload factory
 *
 * Creates workloads. Owned by the runtime, released with destroy(); stays
 * valid after the instance that created it is destroyed. Workloads it
 * created stay valid after it is destroyed.
 * ======================================================================== */
typedef struct BackendWorkloadFactory BackendWorkloadFactory;

struct BackendWorkloadFactory {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    /* A workload for `layer`, in *workload (out, owned by the caller). A
       layer that is_layer_supported() accepts must be creatable. */
    BackendStatus (*create_workload)(BackendWorkloadFactory *self,
                                     const BackendLayerDescription *layer,
                                     BackendWorkload **workload /* out */,
                                     char *message, size_t message_size);
    /* Called exactly once; must not fail. */
    void (*destroy)(BackendWorkloadFactory *self);
    /* Append new members at the end only. */
};

#define BACKEND_WORKLOAD_FACTORY_SIZE_1_1 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendWorkloadFactory, destroy)

/* ========================================================================
 * Backend context
 *
 * Optional. Created once per runtime, which holds it for its whole life and
 * notifies it around loading and unloading each network. Owned by the
 * runtime, released with destroy(); stays valid after the instance that
 * created it is destroyed.
 * ======================================================================== */
typedef struct BackendContext BackendContext;

struct BackendContext {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    BackendStatus (*before_load_network)(BackendContext *self, uint64_t network_id,
                                         char *message, size_t message_size);
    BackendStatus (*after_load_network)(BackendContext *self, uint64_t network_id,
                                        char *message, size_t message_size);
    BackendStatus (*before_unload_network)(BackendContext *self, uint64_t network_id,
                                           char *message, size_t message_size);
    BackendStatus (*after_unload_network)(BackendContext *self, uint64_t network_id,
                                          char *message, size_t message_size);
    /* Called exactly once; must not fail. */
    void (*destroy)(BackendContext *self);
    /* Append new members at the end only. */
};

#define BACKEND_CONTEXT_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendContext, destroy)

/* ========================================================================
 * Sub-graphs (Backend API 1.2)
 *
 * A runtime that runs networks hands each backend the connected parts of
 * the network assigned to it as a BackendSubgraph, through the instance's
 * optional optimize_subgraph(). The backend answers by recording views:
 *
 *   substitution  layers it replaced with one BackendCompiledSubgraph, with
 *                 the tensors crossing the boundary of those layers;
 *   failed        a layer it cannot take after all, with a reason; the
 *                 runtime offers it to the next backend in its preference
 *                 order;
 *   untouched     a layer it leaves alone; the runtime runs it as one
 *                 workload from create_workload_factory().
 *
 * Every layer offered must land in exactly one view. The runtime checks the
 * answer as a whole and refuses the network if it is not an exact cover, or
 * if a substitution's boundary is not the set of tensors that cross it.
 *
 * Arrays of structs in this section are arrays of pointers, so that every
 * element may grow in a later minor version without changing the stride.
 * ======================================================================== */

#define BACKEND_SUBGRAPH_TENSOR_BOUNDARY_INPUT 0 /* produced outside the sub-graph */
#define BACKEND_SUBGRAPH_TENSOR_CONSTANT       1 /* constant data, given in `data` */
#define BACKEND_SUBGRAPH_TENSOR_INTERNAL       2 /* produced by a layer of the sub-graph */

/* One tensor of a sub-graph. */
typedef struct BackendSubgraphTensor {
    uint32_t struct_size;
    uint32_t kind;                        /* BACKEND_SUBGRAPH_TENSOR_* */
    BackendTensorInfo info;               /* data type and shape */
    /* CONSTANT only (NULL otherwise): borrowed, size_bytes of dense data.
       The runtime keeps it valid and unchanged until every compiled
       sub-graph created from this sub-graph is destroyed, so a compiled
       sub-graph may keep the pointer instead of copying. */
    const void *data;
    uint64_t size_bytes;                  /* CONSTANT: bytes at `data`; otherwise 0 */
    /* Append new members at the end only. */
} BackendSubgraphTensor;

#define BACKEND_SUBGRAPH_TENSOR_SIZE_1_2 BACKEND_STRUCT_SIZE_THROUGH(BackendSubgraphTensor, size_bytes)

/* One layer of a sub-graph. */
typedef struct BackendSubgraphLayer {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    /* The layer's id, unique within the network and the same every time the
       network is loaded: the debug handle through which a backend names the
       layer in its views (and, later, in its events). */
    uint64_t id;
    /* Borrowed: the layer as is_layer_supported() sees it (type, tensor
       infos, descriptor). */
    const BackendLayerDescription *description;
    /* Borrowed: description->num_inputs indices into the sub-graph's
       tensors, in the layer's input order. */
    const uint32_t *input_tensors;
    /* Borrowed: description->num_outputs indices into the sub-graph's
       tensors. */
    const uint32_t *output_tensors;
    /* Append new members at the end only. */
} BackendSubgraphLayer;

#define BACKEND_SUBGRAPH_LAYER_SIZE_1_2 BACKEND_STRUCT_SIZE_THROUGH(BackendSubgraphLayer, output_tensors)

/* A connected part of a network, assigned to one backend. Borrowed: every
   pointer is valid only for the duration of optimize_subgraph(), except the
   constant data described above. */
typedef struct BackendSubgraph {
    uint32_t struct_size;
    uint32_t num_tensors;
    const BackendSubgraphTensor *const *tensors; /* borrowed, num_tensors entries */
    uint32_t num_layers;                  /* >= 1 */
    uint32_t num_inputs;
    /* Borrowed, num_layers entries, in an order in which each layer's inputs
       are produced before it. */
    const BackendSubgraphLayer *const *layers;
    /* Borrowed, num_inputs entries: indices of the BOUNDARY_INPUT tensors,
       each once. */
    const uint32_t *inputs;
    uint32_t num_outputs;
    uint32_t reserved;                    /* zero */
    /* Borrowed, num_outputs entries: indices of the INTERNAL tensors read
       outside the sub-graph (by other layers of the network or as network
       outputs), each once. */
    const uint32_t *outputs;
    /* Append new members at the end only. */
} BackendSubgraph;

#define BACKEND_SUBGRAPH_SIZE_1_2 BACKEND_STRUCT_SIZE_THROUGH(BackendSubgraph, outputs)

/* ========================================================================
 * Profiling (Backend API 1.2)
 *
 * A backend that reports its own timings offers create_profiling_context().
 * The runtime creates one context per loaded network and backend, hands it
 * to that network's compiled sub-graphs of the backend
 * (set_profiling_context), enables it around a profiled execution and then
 * collects what was recorded into a sink it provides.
 *
 * Events name the layers they cover by their BackendSubgraphLayer.id (debug
 * handles) and are timed on CLOCK_MONOTONIC in nanoseconds, the clock of
 * Python's time.monotonic_ns(). The runtime checks every event: an unknown
 * id, an end before its start or a span outside the execution is dropped
 * with a warning.
 * ======================================================================== */

/* Provided by the runtime to collect(), valid only during that call.
   Strings and arrays are borrowed for the call. */
typedef struct BackendProfilingSink BackendProfilingSink;

struct BackendProfilingSink {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    /* One timed span covering the layers `layer_ids`. `name` is
       NUL-terminated (the runtime reads at most 256 bytes). */
    void (*event)(BackendProfilingSink *self, const char *name,
                  const uint64_t *layer_ids, uint32_t num_layer_ids,
                  int64_t start_ns, int64_t end_ns);
    /* A named counter (bytes moved, MACs, ...), summed by name. */
    void (*counter)(BackendProfilingSink *self, const char *name, double value);
    /* Append new members at the end only. */
};

#define BACKEND_PROFILING_SINK_SIZE_1_2 BACKEND_STRUCT_SIZE_THROUGH(BackendProfilingSink, counter)

/* Owned by the runtime from create_profiling_context() on, released with
   destroy() after every compiled sub-graph it was handed to is destroyed. */
typedef struct BackendProfilingContext BackendProfilingContext;

struct BackendProfilingContext {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    /* Starts (non-zero) or stops (zero) recording. Disabled when created.
       Never called during an execute() of a compiled sub-graph holding it. */
    void (*enable)(BackendProfilingContext *self, int enabled);
    /* Reports every event and counter recorded since the last collect()
       to `sink` (borrowed, valid during the call), then forgets them. */
    void (*collect)(BackendProfilingContext *self, BackendProfilingSink *sink);
    /* Called exactly once; must not fail. */
    void (*destroy)(BackendProfilingContext *self);
    /* Append new members at the end only. */
};

#define BACKEND_PROFILING_CONTEXT_SIZE_1_2 BACKEND_STRUCT_SIZE_THROUGH(BackendProfilingContext, destroy)

/* ========================================================================
 * Compiled sub-graph (Backend API 1.2)
 *
 * What a backend makes of one or more layers of a sub-graph: opaque to the
 * runtime, run on the buffers of its boundary. Owned by the runtime from the
 * moment it is handed to add_substitution(), released with destroy(). Stays
 * valid after the instance that created it is destroyed. execute() may be
 * called any number of times, but not concurrently on one compiled
 * sub-graph.
 * ======================================================================== */
typedef struct BackendCompiledSubgraph BackendCompiledSubgraph;

struct BackendCompiledSubgraph {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    /* Reads `inputs` and writes every one of `outputs`, in the order of the
       boundary given to add_substitution(). Buffers are borrowed for the
       call and never alias one another. */
    BackendStatus (*execute)(BackendCompiledSubgraph *self,
                             const BackendBuffer *inputs, uint32_t num_inputs,
                             const BackendBuffer *outputs, uint32_t num_outputs,
                             char *message, size_t message_size);
    /* Called exactly once; must not fail. */
    void (*destroy)(BackendCompiledSubgraph *self);
    /* Optional (NULL: no profiling). The runtime hands over a profiling
       context this backend's create_profiling_context() made (borrowed: the
       runtime keeps it alive until this compiled sub-graph is destroyed or
       the call is repeated), or NULL to stop reporting. While the context is
       enabled, execute() records its events in it. Never called during
       execute(). */
    void (*set_profiling_context)(BackendCompiledSubgraph *self,
                                  BackendProfilingContext *context);
    /* Optional (NULL: cannot be serialized). Writes the compiled sub-graph as
       bytes that load_compiled_subgraph() of the same backend turns into an
       equivalent compiled sub-graph (identical results), independent of the
       sub-graph's constant data (the bytes carry what they need). Always sets
       *size (out) to the number of bytes needed; writes them to `buffer` only
       when `capacity` is at least that, otherwise returns
       BACKEND_STATUS_OUT_OF_MEMORY having written nothing. `buffer` may be
       NULL with `capacity` 0 to ask for the size. */
    BackendStatus (*serialize)(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                               uint64_t *size /* out */, char *message, size_t message_size);
    /* Append new members at the end only. */
};

#define BACKEND_COMPILED_SUBGRAPH_SIZE_1_2 BACKEND_STRUCT_SIZE_THROUGH(BackendCompiledSubgraph, serialize)

/* ========================================================================
 * Optimization views (Backend API 1.2)
 *
 * Provided by the runtime to optimize_subgraph() and valid only during that
 * call: the backend records its answer through these functions. Each
 * returns BACKEND_STATUS_OK, or INVALID_ARGUMENT when the arguments
 * themselves are unusable (NULL arrays, counts larger than the sub-graph);
 * the runtime then refuses the whole answer. Layer ids are
 * BackendSubgraphLayer.id values; tensors are indices into the sub-graph's
 * tensors.
 * ======================================================================== */
typedef struct BackendOptimizationViews BackendOptimizationViews;

struct BackendOptimizationViews {
    uint32_t struct_size;
    uint32_t reserved;                    /* zero */
    /* The layers `layer_ids` are replaced by `compiled`, which reads the
       tensors `inputs` (the non-constant tensors those layers read and do
       not produce) and writes `outputs` (the tensors those layers produce
       that are read by any other layer or are sub-graph outputs). Ownership
       of `compiled` passes to the runtime with this call, whatever it
       returns. The arrays are borrowed for the call. */
    BackendStatus (*add_substitution)(BackendOptimizationViews *self,
                                      const uint64_t *layer_ids, uint32_t num_layer_ids,
                                      const uint32_t *inputs, uint32_t num_inputs,
                                      const uint32_t *outputs, uint32_t num_outputs,
                                      BackendCompiledSubgraph *compiled);
    /* The backend cannot take the layer; `reason` (borrowed, NUL-terminated)
       says why. */
    BackendStatus (*add_failed)(BackendOptimizationViews *self, uint64_t layer_id,
                                const char *reason);
    /* The layer runs unchanged, as a workload. */
    BackendStatus (*add_untouched)(BackendOptimizationViews *self, uint64_t layer_id);
    /* Append new members at the end only. */
};

#define BACKEND_OPTIMIZATION_VIEWS_SIZE_1_2 \
    BACKEND_STRUCT_SIZE_THROUGH(BackendOptimizationViews, add_untouched)

/* ========================================================================
 * Backend instance
 *
 * What BackendFactory() returns. An instance is a light, stateless entry
 * point: the runtime may create and destroy instances at any time and
 * assumes nothing about how long one lives compared with the objects it
 * creates. Memory managers, workload factories, workloads and contexts must
 * stay valid after the instance that created them is destroyed.
 *
 * Ownership: the backend allocates the instance; the runtime owns it from the
 * moment BackendFactory() returns and releases it exactly once through
 * destroy(). The library stays loaded until every object is destroyed.
 *
 * Members after `destroy` are function pointers a runtime reads only when
 * struct_size covers them (BACKEND_STRUCT_HAS). A NULL optional member means
 * the feature is not implemented. A backend built against 1.0 or 1.1 has no
 * optimize_subgraph and never receives a sub-graph.
 * ======================================================================== */
typedef struct BackendInstance BackendInstance;

struct BackendInstance {
    /* sizeof(BackendInstance) as the backend was compiled. At least
       BACKEND_INSTANCE_SIZE_<major>_<minor> for the version in api_major and
       api_minor. */
    uint32_t struct_size;

    /* The Backend API version this instance implements; equal to what the
       library's GetVersion() reports. */
    uint32_t api_major;
    uint32_t api_minor;

    /* Returns the backend id, identical to GetBackendId(). The string is
       owned by the backend and lives as long as the library is loaded.
       Required (non-NULL). */
    const char *(*get_id)(const BackendInstance *self);

    /* Releases the instance. Called exactly once; `self` is invalid
       afterwards. Must not fail. Required (non-NULL). */
    void (*destroy)(BackendInstance *self);

    /* ---- Backend API 1.1 ---- */

    /* The backend's capabilities (out: a borrowed array of *count entries,
       owned by the backend, constant while the library is loaded).
       Required. */
    BackendStatus (*get_capabilities)(const BackendInstance *self,
                                      const BackendCapability **capabilities /* out */,
                                      uint32_t *count /* out */);

    /* Whether `layer` can run on this backend: BACKEND_STATUS_OK when it can;
       BACKEND_STATUS_UNSUPPORTED (or INVALID_ARGUMENT) with the reason in
       `message` when it cannot. Deterministic. Required. */
    BackendStatus (*is_layer_supported)(const BackendInstance *self,
                                        const BackendLayerDescription *layer,
                                        char *message, size_t message_size);

    /* A memory manager in *manager (out, owned by the caller). Optional: NULL
       when the backend manages its own memory. */
    BackendStatus (*create_memory_manager)(const BackendInstance *self,
                                           BackendMemoryManager **manager /* out */,
                                           char *message, size_t message_size);

    /* A workload factory in *factory (out, owned by the caller).
       `memory_manager` is NULL or one this backend created; borrowed, the
       runtime keeps it alive until the factory and its workloads are
       destroyed. Required. */
    BackendStatus (*create_workload_factory)(const BackendInstance *self,
                                             BackendMemoryManager *memory_manager,
                                             BackendWorkloadFactory **factory /* out */,
                                             char *message, size_t message_size);

    /* A backend context in *context (out, owned by the caller; *context may
       be set to NULL when the backend wants no notifications). Optional. */
    BackendStatus (*create_backend_context)(const BackendInstance *self,
                                            BackendContext **context /* out */,
                                            char *message, size_t message_size);

    /* Whether the backend will allocate its memory with `allocator` (OK) or
       not (UNSUPPORTED). Optional: NULL means never. */
    BackendStatus (*use_custom_allocator)(const BackendInstance *self,
                                          const BackendAllocator *allocator,
                                          char *message, size_t message_size);

    /* ---- Backend API 1.2 ---- */

    /* Optimizes `subgraph` (borrowed, see BackendSubgraph) by recording, for
       every one of its layers, exactly one view in `views` (borrowed, valid
       only during the call). OK when the answer is complete; any other
       status fails the network load with `message`. Optional: NULL means
       every layer the backend accepts runs untouched. */
    BackendStatus (*optimize_subgraph)(const BackendInstance *self,
                                       const BackendSubgraph *subgraph,
                                       BackendOptimizationViews *views,
                                       char *message, size_t message_size);

    /* Whether the backend can run on this machine (its device is present,
       its driver answers): OK when it can; UNSUPPORTED with the reason in
       `message` when it cannot, and the runtime then skips the backend at
       load with the reason code backend-unavailable. Called once per load,
       after the factory probe. Optional: NULL means always available. */
    BackendStatus (*is_available)(const BackendInstance *self,
                                  char *message, size_t message_size);

    /* A profiling context in *context (out, owned by the caller; see
       "Profiling"). Optional: NULL when the backend reports no events. */
    BackendStatus (*create_profiling_context)(const BackendInstance *self,
                                              BackendProfilingContext **context /* out */,
                                              char *message, size_t message_size);

    /* A compiled sub-graph in *compiled (out, owned by the caller) from
       `size` bytes at `data` (borrowed for the call) that serialize() of this
       backend wrote. The bytes are untrusted: the backend checks every
       length and count before use and answers INVALID_ARGUMENT with a
       message for bytes it cannot use. Optional: NULL when the backend's
       compiled sub-graphs cannot be serialized. */
    BackendStatus (*load_compiled_subgraph)(const BackendInstance *self,
                                            const void *data, uint64_t size,
                                            BackendCompiledSubgraph **compiled /* out */,
                                            char *message, size_t message_size);

    /* Append new members at the end only. */
};

#define BACKEND_INSTANCE_SIZE_1_0 BACKEND_STRUCT_SIZE_THROUGH(BackendInstance, destroy)
#define BACKEND_INSTANCE_SIZE_1_1 BACKEND_STRUCT_SIZE_THROUGH(BackendInstance, use_custom_allocator)
#define BACKEND_INSTANCE_SIZE_1_2 BACKEND_STRUCT_SIZE_THROUGH(BackendInstance, load_compiled_subgraph)
/* 1.3 added layer types and descriptor members, no member of the instance. */
#define BACKEND_INSTANCE_SIZE_1_3 BACKEND_INSTANCE_SIZE_1_2

/* ========================================================================
 * Entry points
 *
 * Every backend shared object exports these three functions with C linkage.
 * Define BACKEND_API_NO_ENTRY_POINT_PROTOTYPES before including this header
 * to leave them undeclared (only test doubles have a reason to).
 * ======================================================================== */
/* Types of the entry points, for a runtime that looks them up with dlsym(). */
typedef const char *(*GetBackendIdFunction)(void);
typedef void (*GetVersionFunction)(uint32_t *major /* out */, uint32_t *minor /* out */);
typedef void *(*BackendFactoryFunction)(void);

#ifndef BACKEND_API_NO_ENTRY_POINT_PROTOTYPES

/* The backend's unique id: non-empty, printable ASCII without spaces, at most
   BACKEND_ID_MAX_LENGTH bytes, never "Unknown". Owned by the backend; lives
   as long as the library is loaded; the same string on every call. */
BACKEND_EXPORT const char *GetBackendId(void);

/* The Backend API version the backend was built against. */
BACKEND_EXPORT void GetVersion(uint32_t *major /* out */, uint32_t *minor /* out */);

/* A new backend instance (a BackendInstance *), or NULL on failure. The
   caller owns it and releases it with instance->destroy(instance). */
BACKEND_EXPORT void *BackendFactory(void);

#endif /* BACKEND_API_NO_ENTRY_POINT_PROTOTYPES */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DYNAMIC_BACKENDS_BACKEND_API_H */
