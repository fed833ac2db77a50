/*
 * fault.h - a valid backend with a fault in the call a test chooses, for the backend host's
 * tests (loader.host): each faults/<fault>.c defines MOCK_FAULT(), what goes wrong, and
 * includes this header.
 *
 * The backend runs Activation relu as a workload and, through optimize_subgraph, as a compiled
 * sub-graph; it has a memory manager and a backend context. The fault strikes in the call
 * named by the environment variable MOCK_FAULT_IN, every MOCK_FAULT_EVERY-th time it is
 * called in this process (default 1: every time); unset, the backend is correct. Call names:
 *
 *   BackendFactory, get_capabilities, is_layer_supported, create_memory_manager, acquire,
 *   create_workload_factory, create_workload, execute, create_backend_context,
 *   before_load_network, optimize_subgraph, compiled_execute, destroy_workload
 *
 * MOCK_FAULT_ID (optional) is the backend id, default "Fault" MOCK_FAULT_NAME.
 */
#ifndef MOCK_BACKENDS_FAULT_H
#define MOCK_BACKENDS_FAULT_H

#include <stdlib.h>
#include <string.h>

static void mock_fault_in(const char *call);

#define MOCK_BACKEND_ID "Fault" MOCK_FAULT_NAME
#define MOCK_NO_BACKEND_FACTORY
#define MOCK_BEFORE_EXECUTE() mock_fault_in("execute")
#define MOCK_COMPILED_BEFORE_EXECUTE(self) mock_fault_in("compiled_execute")
#include "../subgraph_skeleton.h"

static void mock_fault_in(const char *call)
{
    static unsigned long counts[16];
    static const char *const calls[16] = {
        "BackendFactory", "get_capabilities", "is_layer_supported", "create_memory_manager",
        "acquire", "create_workload_factory", "create_workload", "execute",
        "create_backend_context", "before_load_network", "optimize_subgraph",
        "compiled_execute", "destroy_workload"};
    const char *chosen = getenv("MOCK_FAULT_IN");
    const char *every = getenv("MOCK_FAULT_EVERY");
    unsigned long period = every != NULL && atol(every) > 0 ? (unsigned long)atol(every) : 1;
    if (chosen == NULL || strcmp(chosen, call) != 0)
        return;
    for (int i = 0; i < 16 && calls[i] != NULL; i++)
        if (strcmp(calls[i], call) == 0 && ++counts[i] % period == 0)
            MOCK_FAULT();
}

/* ---- the calls, each passing through mock_fault_in ---------------------------------------- */

static BackendStatus fault_capabilities(const BackendInstance *self,
                                        const BackendCapability **capabilities, uint32_t *count)
{
    mock_fault_in("get_capabilities");
    return mock_get_capabilities(self, capabilities, count);
}

static BackendStatus fault_is_layer_supported(const BackendInstance *self,
                                              const BackendLayerDescription *layer,
                                              char *message, size_t message_size)
{
    mock_fault_in("is_layer_supported");
    return mock_is_layer_supported(self, layer, message, message_size);
}

static BackendStatus fault_acquire(BackendMemoryManager *self, char *message, size_t size)
{
    (void)self, (void)message, (void)size;
    mock_fault_in("acquire");
    return BACKEND_STATUS_OK;
}

static BackendStatus fault_release(BackendMemoryManager *self, char *message, size_t size)
{
    (void)self, (void)message, (void)size;
    return BACKEND_STATUS_OK;
}

static void fault_free_manager(BackendMemoryManager *self)
{
    free(self);
}

static BackendStatus fault_create_memory_manager(const BackendInstance *self,
                                                 BackendMemoryManager **manager, char *message,
                                                 size_t message_size)
{
    BackendMemoryManager *created = calloc(1, sizeof *created);
    (void)self, (void)message, (void)message_size;
    mock_fault_in("create_memory_manager");
    if (created == NULL)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    created->struct_size = (uint32_t)sizeof *created;
    created->acquire = fault_acquire;
    created->release = fault_release;
    created->destroy = fault_free_manager;
    *manager = created;
    return BACKEND_STATUS_OK;
}

static void fault_destroy_workload(BackendWorkload *self)
{
    mock_fault_in("destroy_workload");
    free(self);
}

static BackendStatus fault_create_workload(BackendWorkloadFactory *self,
                                           const BackendLayerDescription *layer,
                                           BackendWorkload **workload, char *message,
                                           size_t message_size)
{
    BackendStatus status;
    mock_fault_in("create_workload");
    status = mock_create_workload(self, layer, workload, message, message_size);
    if (status == BACKEND_STATUS_OK)
        (*workload)->destroy = fault_destroy_workload;
    return status;
}

static BackendStatus fault_create_workload_factory(const BackendInstance *self,
                                                   BackendMemoryManager *memory_manager,
                                                   BackendWorkloadFactory **factory,
                                                   char *message, size_t message_size)
{
    BackendStatus status;
    mock_fault_in("create_workload_factory");
    status = mock_create_workload_factory(self, memory_manager, factory, message, message_size);
    if (status == BACKEND_STATUS_OK)
        (*factory)->create_workload = fault_create_workload;
    return status;
}

static BackendStatus fault_notified(BackendContext *self, uint64_t network_id, char *message,
                                    size_t message_size)
{
    (void)self, (void)network_id, (void)message, (void)message_size;
    return BACKEND_STATUS_OK;
}

static BackendStatus fault_before_load(BackendContext *self, uint64_t network_id,
                                       char *message, size_t message_size)
{
    mock_fault_in("before_load_network");
    return fault_notified(self, network_id, message, message_size);
}

static void fault_free_context(BackendContext *self)
{
    free(self);
}

static BackendStatus fault_create_context(const BackendInstance *self, BackendContext **context,
                                          char *message, size_t message_size)
{
    BackendContext *created = calloc(1, sizeof *created);
    (void)self, (void)message, (void)message_size;
    mock_fault_in("create_backend_context");
    if (created == NULL)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    created->struct_size = (uint32_t)sizeof *created;
    created->before_load_network = fault_before_load;
    created->after_load_network = fault_notified;
    created->before_unload_network = fault_notified;
    created->after_unload_network = fault_notified;
    created->destroy = fault_free_context;
    *context = created;
    return BACKEND_STATUS_OK;
}

/* A sub-graph of relu layers with one input becomes one compiled relu chain (relu is
   idempotent, so every output of such a sub-graph is relu of its input); anything else runs
   untouched. */
static BackendStatus fault_optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                                    BackendOptimizationViews *views, char *message,
                                    size_t message_size)
{
    uint64_t ids[64];
    int all_relu = subgraph->num_inputs == 1 && subgraph->num_layers <= 64;
    (void)self, (void)message, (void)message_size;
    mock_fault_in("optimize_subgraph");
    for (uint32_t i = 0; i < subgraph->num_layers; i++) {
        if (!mock_is_relu(subgraph->layers[i]->description))
            all_relu = 0;
        if (i < 64)
            ids[i] = subgraph->layers[i]->id;
    }
    if (!all_relu) {
        for (uint32_t i = 0; i < subgraph->num_layers; i++)
            views->add_untouched(views, subgraph->layers[i]->id);
        return BACKEND_STATUS_OK;
    }
    return views->add_substitution(views, ids, subgraph->num_layers, subgraph->inputs,
                                   subgraph->num_inputs, subgraph->outputs,
                                   subgraph->num_outputs, mock_compiled_relu_new());
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance;
    mock_fault_in("BackendFactory");
    instance = mock_new_optimizing_instance(fault_optimize);
    if (instance != NULL) {
        instance->get_capabilities = fault_capabilities;
        instance->is_layer_supported = fault_is_layer_supported;
        instance->create_memory_manager = fault_create_memory_manager;
        instance->create_workload_factory = fault_create_workload_factory;
        instance->create_backend_context = fault_create_context;
    }
    return instance;
}

#endif /* MOCK_BACKENDS_FAULT_H */
