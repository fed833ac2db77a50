/*
 * The layer registry shared by layers.c (dispatch) and the family files layers_*.c: one
 * RefLayerEntry per layer type, the workload every entry runs in, and the shape helpers every
 * check uses.
 *
 * The dispatch (layers.c) does everything that is the same for every layer type, once: the
 * description's own struct, the input and output counts against the entry's range, every tensor
 * info (size, data type, dimensions, the 2^40 element cap, rank 1 to BACKEND_MAX_LAYER_RANK for
 * the types of Backend API 1.3), and the descriptor: present, at least the entry's minimum size,
 * copied (never more than the caller's struct_size says it holds) with the members it lacks set
 * to their defaults. The entry then checks what is its own, from that copy.
 */
#ifndef REFERENCE_BACKEND_LAYERS_INTERNAL_H
#define REFERENCE_BACKEND_LAYERS_INTERNAL_H

#include <stdint.h>

#include "kernels.h"
#include "layers.h"

/* Largest element count accepted, so that byte sizes and index arithmetic never overflow. */
#define REF_MAX_ELEMENTS ((int64_t)1 << 40)

/* Most inputs one layer may have (Concatenation's are otherwise unbounded); the runtime's
   packing refuses more than this too. */
#define REF_MAX_INPUTS 65535u

/* A copy of any layer's descriptor. */
typedef union RefDescriptor {
    uint32_t struct_size;
    BackendActivationDescriptor activation;
    BackendFullyConnectedDescriptor fully_connected;
    BackendConvolution2dDescriptor convolution;
    BackendPooling2dDescriptor pooling;
    BackendSoftmaxDescriptor softmax;
    BackendElementwiseUnaryDescriptor unary;
    BackendConcatenationDescriptor concatenation;
    BackendSliceDescriptor slice;
    BackendTransposeDescriptor transpose;
    BackendPadDescriptor pad;
    BackendResizeDescriptor resize;
    BackendReduceDescriptor reduce;
    BackendBatchNormalizationDescriptor batch_normalization;
    BackendLayerNormalizationDescriptor layer_normalization;
    BackendTransposeConvolution2dDescriptor transpose_convolution;
} RefDescriptor;

/* What a layer's prepare() computes once from its tensor infos and descriptor, so that run()
   only walks memory. */
typedef union RefGeometry {
    rk_conv_params window;              /* convolutions and pooling */
    rk_broadcast binary;                /* the two-input element-wise layers, Prelu */
    rk_axis_split axis;                 /* Softmax, Concatenation, the normalizations */
    rk_strided_copy copy;               /* Slice, Transpose */
    rk_pad_plan pad;
    rk_reduce_plan reduce;
    rk_matmul_plan matmul;
    rk_resize_plan resize;              /* its tables in the workload's extra bytes */
} RefGeometry;

typedef struct RefWorkload RefWorkload;

/* One layer type. A check never reads a tensor info or the descriptor beyond what the dispatch
   has vouched for, and prepare() and run() are only called on what check() accepted. */
typedef struct RefLayerEntry {
    const char *name;
    uint32_t min_inputs, max_inputs;
    uint32_t descriptor_min_size;       /* 0: the layer has no descriptor (any pointer ignored) */
    uint32_t descriptor_size;           /* sizeof the descriptor struct: what the copy keeps */
    int since_1_3;                      /* its tensors have rank 1 .. BACKEND_MAX_LAYER_RANK */
    /* Sets the members a descriptor of d->struct_size bytes does not hold to their defaults
       (NULL: every member is in the minimum size). */
    void (*defaults)(RefDescriptor *d, const BackendLayerDescription *layer);
    BackendStatus (*check)(const BackendLayerDescription *layer, const RefDescriptor *d,
                           char *message, size_t message_size);
    /* Bytes of tables prepare() computes past the workload, for a description check()
       accepted (NULL: none); allocated with the workload, at w->extra. */
    size_t (*extra_bytes)(const BackendLayerDescription *layer, const RefDescriptor *d);
    /* Fills w->g (NULL: nothing to compute). */
    void (*prepare)(RefWorkload *w);
    /* 0, or non-zero when scratch memory could not be allocated. */
    int (*run)(const RefWorkload *w, const float *const *in, float *out);
} RefLayerEntry;

struct RefWorkload {
    BackendWorkload base;               /* first: the runtime sees a BackendWorkload */
    const RefLayerEntry *entry;
    BackendLayerType layer_type;
    uint32_t num_inputs;
    BackendTensorInfo *inputs;          /* num_inputs, owned (the call's are borrowed) */
    BackendTensorInfo output;
    RefDescriptor d;                    /* the copy, defaults applied; struct_size is the full size */
    RefGeometry g;
    const float **in;                   /* num_inputs: per-call input pointers (no concurrent calls) */
    void *extra;                        /* the entry's extra_bytes, or NULL */
};

/* The description a workload was made from, its pointers into the workload (valid while it
   lives): what a compiled program serializes to make the workload again. */
void ref_workload_description(const BackendWorkload *workload, BackendLayerDescription *out);

/* The name of a layer type ("layer type N" beyond the known ones; static storage). */
const char *ref_layer_name(BackendLayerType type);

/* ---- the entries (one family per file) ------------------------------------------------------ */

extern const RefLayerEntry ref_layer_activation, ref_layer_addition, ref_layer_multiplication,
    ref_layer_subtraction, ref_layer_division, ref_layer_maximum, ref_layer_minimum,
    ref_layer_power, ref_layer_elementwise_unary, ref_layer_prelu;          /* layers_elementwise.c */
extern const RefLayerEntry ref_layer_fully_connected, ref_layer_mat_mul;   /* layers_linear.c */
extern const RefLayerEntry ref_layer_convolution2d, ref_layer_depthwise_convolution2d,
    ref_layer_pooling2d, ref_layer_transpose_convolution2d, ref_layer_resize; /* layers_spatial.c */
extern const RefLayerEntry ref_layer_reshape, ref_layer_concatenation, ref_layer_slice,
    ref_layer_transpose, ref_layer_pad;                                     /* layers_tensor.c */
extern const RefLayerEntry ref_layer_softmax, ref_layer_reduce, ref_layer_batch_normalization,
    ref_layer_layer_normalization;                                          /* layers_normalization.c */

/* ---- helpers (layers.c) --------------------------------------------------------------------- */

#define FAIL(status, ...) ref_fail(message, message_size, (status), __VA_ARGS__)
#define INVALID(...) FAIL(BACKEND_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define UNSUPPORTED(...) FAIL(BACKEND_STATUS_UNSUPPORTED, __VA_ARGS__)

#define TRY(expression)                           \
    do {                                          \
        BackendStatus try_status_ = (expression); \
        if (try_status_ != BACKEND_STATUS_OK)     \
            return try_status_;                   \
    } while (0)

/* Elements of a tensor the dispatch has checked (so the product is at most 2^40). */
int64_t ref_elements(const BackendTensorInfo *info);
int ref_same_shape(const BackendTensorInfo *a, const BackendTensorInfo *b);
/* "[2, 3, 4]", truncated to fit. */
void ref_format_shape(const BackendTensorInfo *info, char *out, size_t size);

BackendStatus ref_expect_rank(const BackendTensorInfo *info, uint32_t rank, const char *what,
                              char *message, size_t message_size);
/* The layer's only output has exactly `rank` dimensions `dims`, else INVALID naming both. */
BackendStatus ref_expect_output(const BackendLayerDescription *layer, const int64_t *dims,
                                uint32_t rank, char *message, size_t message_size);
/* The output has the shape of input `index`. */
BackendStatus ref_expect_output_like(const BackendLayerDescription *layer, uint32_t index,
                                     char *message, size_t message_size);
/* Exactly `count` inputs (for arities a descriptor decides). */
BackendStatus ref_expect_inputs(const BackendLayerDescription *layer, uint32_t count,
                                char *message, size_t message_size);
/* NumPy broadcasting of a and b into out (rank: the larger of theirs), else INVALID. */
BackendStatus ref_broadcast(const BackendTensorInfo *a, const BackendTensorInfo *b, int64_t *out,
                            uint32_t *rank, char *message, size_t message_size);
/* a, b and out right-aligned into one rank (the output's) with leading 1s. */
void ref_fill_broadcast(rk_broadcast *g, const BackendTensorInfo *a, const BackendTensorInfo *b,
                        const BackendTensorInfo *out);

/* A check for a layer type this build does not run (yet). */
BackendStatus ref_check_unsupported(const BackendLayerDescription *layer, const RefDescriptor *d,
                                    char *message, size_t message_size);

#endif /* REFERENCE_BACKEND_LAYERS_INTERNAL_H */
