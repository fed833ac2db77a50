/*
 * The reference CPU backend, id "CpuRef": every layer of the Backend API in float32 NHWC, and a
 * sub-graph optimizer that fuses activations and residual additions into the layer before them.
 *
 * Instances are stateless: each holds only its function table, so any number may exist and
 * each may be destroyed at any time. Memory managers, workload factories, workloads and contexts
 * are independent allocations that outlive the instance that created them.
 */
#include <stdlib.h>

#include "backend_api.h"
#include "layers.h"

static const char BACKEND_ID[] = "CpuRef";

#define CAPABILITY(name, value) { BACKEND_CAPABILITY_SIZE_1_1, (value), (name) }

static const BackendCapability CAPABILITIES[] = {
    CAPABILITY("NonConstWeights", 1),        /* weights are ordinary inputs */
    CAPABILITY("ProtectedContentAllocation", 0),
    CAPABILITY("AsyncExecution", 0),
    CAPABILITY("ConcurrentWorkloads", 1),    /* distinct workloads may run in parallel */
};

/* ---- memory manager: the reference backend allocates per call, so it only checks balance -- */

typedef struct RefMemoryManager {
    BackendMemoryManager base;
    int acquired;
} RefMemoryManager;

static BackendStatus memory_acquire(BackendMemoryManager *self, char *message, size_t message_size)
{
    RefMemoryManager *manager = (RefMemoryManager *)self;
    if (manager->acquired)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_STATE, "memory already acquired");
    manager->acquired = 1;
    return BACKEND_STATUS_OK;
}

static BackendStatus memory_release(BackendMemoryManager *self, char *message, size_t message_size)
{
    RefMemoryManager *manager = (RefMemoryManager *)self;
    if (!manager->acquired)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_STATE,
                        "memory released without being acquired");
    manager->acquired = 0;
    return BACKEND_STATUS_OK;
}

static void memory_destroy(BackendMemoryManager *self)
{
    free(self);
}

/* ---- workload factory -------------------------------------------------------------------- */

static BackendStatus factory_create_workload(BackendWorkloadFactory *self, const BackendLayerDescription *layer,
                                             BackendWorkload **workload, char *message, size_t message_size)
{
    (void)self;
    return ref_create_workload(layer, workload, message, message_size);
}

static void factory_destroy(BackendWorkloadFactory *self)
{
    free(self);
}

/* ---- backend context: checks that notifications come in a sensible order ----------------- */

typedef struct RefContext {
    BackendContext base;
    uint64_t loading;                   /* network between before_load and after_load, or 0 */
    uint64_t loaded;                    /* networks loaded and not yet unloaded */
} RefContext;

static BackendStatus context_before_load(BackendContext *self, uint64_t network, char *message, size_t size)
{
    RefContext *context = (RefContext *)self;
    if (context->loading != 0)
        return ref_fail(message, size, BACKEND_STATUS_INVALID_STATE, "network %llu is still loading",
                        (unsigned long long)context->loading);
    context->loading = network;
    return BACKEND_STATUS_OK;
}

static BackendStatus context_after_load(BackendContext *self, uint64_t network, char *message, size_t size)
{
    RefContext *context = (RefContext *)self;
    if (context->loading != network)
        return ref_fail(message, size, BACKEND_STATUS_INVALID_STATE,
                        "after_load_network(%llu) without before_load_network", (unsigned long long)network);
    context->loading = 0;
    context->loaded++;
    return BACKEND_STATUS_OK;
}

static BackendStatus context_before_unload(BackendContext *self, uint64_t network, char *message, size_t size)
{
    RefContext *context = (RefContext *)self;
    if (context->loaded == 0)
        return ref_fail(message, size, BACKEND_STATUS_INVALID_STATE,
                        "before_unload_network(%llu) with no network loaded", (unsigned long long)network);
    return BACKEND_STATUS_OK;
}

static BackendStatus context_after_unload(BackendContext *self, uint64_t network, char *message, size_t size)
{
    RefContext *context = (RefContext *)self;
    if (context->loaded == 0)
        return ref_fail(message, size, BACKEND_STATUS_INVALID_STATE,
                        "after_unload_network(%llu) with no network loaded", (unsigned long long)network);
    context->loaded--;
    return BACKEND_STATUS_OK;
}

static void context_destroy(BackendContext *self)
{
    free(self);
}

/* ---- instance ---------------------------------------------------------------------------- */

static const char *instance_get_id(const BackendInstance *self)
{
    (void)self;
    return BACKEND_ID;
}

static void instance_destroy(BackendInstance *self)
{
    free(self);
}

static BackendStatus instance_get_capabilities(const BackendInstance *self, const BackendCapability **capabilities,
                                               uint32_t *count)
{
    (void)self;
    *capabilities = CAPABILITIES;
    *count = sizeof CAPABILITIES / sizeof CAPABILITIES[0];
    return BACKEND_STATUS_OK;
}

static BackendStatus instance_is_layer_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                                 char *message, size_t message_size)
{
    (void)self;
    return ref_check_layer(layer, message, message_size);
}

static BackendStatus instance_create_memory_manager(const BackendInstance *self, BackendMemoryManager **manager,
                                                    char *message, size_t message_size)
{
    RefMemoryManager *created;
    (void)self;
    created = calloc(1, sizeof *created);
    if (created == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    created->base.struct_size = sizeof created->base;
    created->base.acquire = memory_acquire;
    created->base.release = memory_release;
    created->base.destroy = memory_destroy;
    *manager = &created->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus instance_create_workload_factory(const BackendInstance *self, BackendMemoryManager *memory_manager,
                                                      BackendWorkloadFactory **factory, char *message,
                                                      size_t message_size)
{
    BackendWorkloadFactory *created;
    (void)self;
    (void)memory_manager; /* workloads allocate their scratch space per call */
    created = calloc(1, sizeof *created);
    if (created == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    created->struct_size = sizeof *created;
    created->create_workload = factory_create_workload;
    created->destroy = factory_destroy;
    *factory = created;
    return BACKEND_STATUS_OK;
}

static BackendStatus instance_create_backend_context(const BackendInstance *self, BackendContext **context,
                                                     char *message, size_t message_size)
{
    RefContext *created;
    (void)self;
    created = calloc(1, sizeof *created);
    if (created == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    created->base.struct_size = sizeof created->base;
    created->base.before_load_network = context_before_load;
    created->base.after_load_network = context_after_load;
    created->base.before_unload_network = context_before_unload;
    created->base.after_unload_network = context_after_unload;
    created->base.destroy = context_destroy;
    *context = &created->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus instance_use_custom_allocator(const BackendInstance *self, const BackendAllocator *allocator,
                                                   char *message, size_t message_size)
{
    (void)self;
    (void)allocator;
    return ref_fail(message, message_size, BACKEND_STATUS_UNSUPPORTED,
                    "the reference backend allocates its scratch space with malloc");
}

/* The reference backend needs only a C library and a CPU: it runs wherever it loads. */
static BackendStatus instance_is_available(const BackendInstance *self, char *message,
                                           size_t message_size)
{
    (void)self, (void)message, (void)message_size;
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT const char *GetBackendId(void)
{
    return BACKEND_ID;
}

BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{
    *major = BACKEND_API_VERSION_MAJOR;
    *minor = BACKEND_API_VERSION_MINOR;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = calloc(1, sizeof *instance);
    if (instance == NULL)
        return NULL;
    instance->struct_size = (uint32_t)sizeof *instance;
    instance->api_major = BACKEND_API_VERSION_MAJOR;
    instance->api_minor = BACKEND_API_VERSION_MINOR;
    instance->get_id = instance_get_id;
    instance->destroy = instance_destroy;
    instance->get_capabilities = instance_get_capabilities;
    instance->is_layer_supported = instance_is_layer_supported;
    instance->create_memory_manager = instance_create_memory_manager;
    instance->create_workload_factory = instance_create_workload_factory;
    instance->create_backend_context = instance_create_backend_context;
    instance->use_custom_allocator = instance_use_custom_allocator;
    instance->optimize_subgraph = ref_optimize_subgraph;
    instance->is_available = instance_is_available;
    instance->create_profiling_context = ref_create_profiling_context;
    instance->load_compiled_subgraph = ref_load_compiled_subgraph;
    return instance;
}
