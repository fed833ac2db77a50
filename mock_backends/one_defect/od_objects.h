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

typedef struct OdWorkload {
    BackendWorkload base;
    const BackendAllocator *allocator;
    BackendLayerType type;
    uint32_t num_inputs;
    BackendTensorInfo in[3];
    BackendTensorInfo out;
    BackendActivationDescriptor activation;
    BackendFullyConnectedDescriptor fc;
    BackendConvolution2dDescriptor conv;
    BackendPooling2dDescriptor pool;
    BackendSoftmaxDescriptor softmax;
    OD_WORKLOAD_STATE
} OdWorkload;

static int64_t od_count(const BackendTensorInfo *t)
{
    int64_t n = 1;
    for (uint32_t d = 0; d < t->num_dimensions; d++)
        n *= t->dimensions[d];
    return n;
}

#endif /* ONE_DEFECT_OBJECTS_H */
