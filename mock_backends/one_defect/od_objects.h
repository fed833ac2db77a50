/*
 * od_objects.h - allocation, messages and the backend's objects. Part of base.h: a one-defect backend includes base.h, which sets the
 * knobs' defaults before it includes this.
 */
#ifndef ONE_DEFECT_OBJECTS_H
#define ONE_DEFECT_OBJECTS_H

/* ---- allocation: the runtime's allocator when it offered one, else malloc ------------------ */

static void *od_alloc(const BackendAllocator *allocator, size_t size)
{
    void *p;
    if (allocator == NULL)
        return calloc(1, size);
    p = allocator->allocate(allocator->user_data, size, 16);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

static void od_free(const BackendAllocator *allocator, void *pointer);
#ifndef OD_OWN_FREE
static void od_free(const BackendAllocator *allocator, void *pointer)
{
    if (allocator == NULL)
        free(pointer);
    else if (pointer != NULL)
        allocator->deallocate(allocator->user_data, pointer);
}
#endif

/* ---- messages ----------------------------------------------------------------------------- */

static BackendStatus od_fail(char *message, size_t size, BackendStatus status, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
#ifndef OD_OWN_FAIL
static BackendStatus od_fail(char *message, size_t size, BackendStatus status, const char *format, ...)
{
    va_list args;
    if (message == NULL || size == 0)
        return status;
    va_start(args, format);
    vsnprintf(message, size, format, args);
    va_end(args);
    return status;
}
#endif

#define OD_INVALID(...) od_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define OD_UNSUPPORTED(...) od_fail(message, message_size, BACKEND_STATUS_UNSUPPORTED, __VA_ARGS__)
#define OD_TRY(e) do { BackendStatus s_ = (e); if (s_ != BACKEND_STATUS_OK) return s_; } while (0)

/* ---- the objects -------------------------------------------------------------------------- */

typedef struct OdInstance {
    BackendInstance base;
    const BackendAllocator *allocator;
} OdInstance;

typedef struct OdFactory {
    BackendWorkloadFactory base;
    const BackendAllocator *allocator;
} OdFactory;

typedef struct OdManager {
    BackendMemoryManager base;
    const BackendAllocator *allocator;
    int acquired;
} OdManager;

typedef struct OdContext {
    BackendContext base;
    const BackendAllocator *allocator;
} OdContext;

/* Most inputs a layer of this backend takes (Concatenation's are refused past it). */
#define OD_MAX_INPUTS 8

typedef struct OdWorkload OdWorkload;
typedef void OdKernel(OdWorkload *w, const float *const *in, float *out);

struct OdWorkload {
    BackendWorkload base;
    const BackendAllocator *allocator;
    BackendLayerType type;
    uint32_t num_inputs;
    BackendTensorInfo in[OD_MAX_INPUTS];
    BackendTensorInfo out;
    OdKernel *kernel;                     /* chosen at creation from the type and descriptor */
    /* the descriptors, each read as far as its struct_size reaches and defaulted beyond */
    BackendActivationDescriptor activation;
    BackendFullyConnectedDescriptor fc;
    BackendConvolution2dDescriptor conv;
    BackendPooling2dDescriptor pool;
    BackendSoftmaxDescriptor softmax;
    BackendElementwiseUnaryDescriptor unary;
    BackendConcatenationDescriptor concat;
    BackendSliceDescriptor slice;
    BackendTransposeDescriptor transpose;
    BackendPadDescriptor pad;
    BackendResizeDescriptor resize;
    BackendReduceDescriptor reduce;
    BackendBatchNormalizationDescriptor batch_norm;
    BackendLayerNormalizationDescriptor layer_norm;
    BackendTransposeConvolution2dDescriptor tconv;
    OD_WORKLOAD_STATE
};

static int64_t od_count(const BackendTensorInfo *t)
{
    int64_t n = 1;
    for (uint32_t d = 0; d < t->num_dimensions; d++)
        n *= t->dimensions[d];
    return n;
}

/* The layer's descriptor as this backend reads it: `into` holds the defaults (what a member is
   when the caller's struct_size does not reach it, as for a runtime built against an older
   minor version), overwritten by as much of the caller's struct as its struct_size covers,
   never more than this backend's struct. The caller has checked struct_size's minimum. */
static void od_read_descriptor(void *into, size_t size, const void *descriptor);
#ifndef OD_OWN_READ_DESCRIPTOR
static void od_read_descriptor(void *into, size_t size, const void *descriptor)
{
    uint32_t given = *(const uint32_t *)descriptor;
    memcpy(into, descriptor, given < size ? given : size);
    *(uint32_t *)into = (uint32_t)size;
}
#endif

#endif /* ONE_DEFECT_OBJECTS_H */

