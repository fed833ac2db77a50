/*
 * skeleton.h - a valid backend that every mock backend starts from.
 *
 * A mock states its one defect in its own file, then includes this skeleton for the rest.
 * Knobs, defined before the #include:
 *
 *   MOCK_BACKEND_ID          the id string GetBackendId() and get_id() return ("MockValid")
 *   MOCK_VERSION_MAJOR       what GetVersion() and the instance report (the header's version)
 *   MOCK_VERSION_MINOR
 *   MOCK_NO_GET_BACKEND_ID   the skeleton does not define that entry point: the mock's own
 *   MOCK_NO_GET_VERSION      file defines it differently, or leaves it out
 *   MOCK_NO_BACKEND_FACTORY
 *   MOCK_RUNS_RELU           the instance supports one layer, Activation with relu, and runs it;
 *                            MOCK_BEFORE_EXECUTE() (empty by default) runs first in execute()
 *
 * mock_new_instance() returns a well-formed instance of the header's version (no capabilities, every
 * layer refused) that a mock may alter before returning it.
 */
#ifndef MOCK_BACKENDS_SKELETON_H
#define MOCK_BACKENDS_SKELETON_H

#include <stdio.h>
#include <stdlib.h>

#include "backend_api.h"

#ifndef MOCK_BACKEND_ID
#define MOCK_BACKEND_ID "MockValid"
#endif
#ifndef MOCK_VERSION_MAJOR
#define MOCK_VERSION_MAJOR BACKEND_API_VERSION_MAJOR
#endif
#ifndef MOCK_VERSION_MINOR
#define MOCK_VERSION_MINOR BACKEND_API_VERSION_MINOR
#endif

/* The Backend API 1.1 members every backend must provide, as small as they can be: no
   capabilities, no layers. */
static BackendStatus mock_get_capabilities(const BackendInstance *self,
                                           const BackendCapability **capabilities, uint32_t *count)
{
    (void)self;
    *capabilities = NULL;
    *count = 0;
    return BACKEND_STATUS_OK;
}

static BackendStatus mock_refuse(char *message, size_t message_size)
{
    if (message != NULL && message_size > 0)
#ifdef MOCK_RUNS_RELU
        snprintf(message, message_size, "this mock runs only Activation relu");
#else
        snprintf(message, message_size, "mock backends run no layers");
#endif
    return BACKEND_STATUS_UNSUPPORTED;
}

#ifdef MOCK_RUNS_RELU
#ifndef MOCK_BEFORE_EXECUTE
#define MOCK_BEFORE_EXECUTE()
#endif

static int mock_is_relu(const BackendLayerDescription *layer)
{
    const BackendActivationDescriptor *d = (const BackendActivationDescriptor *)layer->descriptor;
    if (layer->layer_type != BACKEND_LAYER_ACTIVATION || layer->num_inputs != 1 ||
        layer->num_outputs != 1 || d == NULL || d->function != BACKEND_ACTIVATION_RELU ||
        layer->inputs[0].data_type != BACKEND_DATA_TYPE_FLOAT32 ||
        layer->inputs[0].num_dimensions != layer->outputs[0].num_dimensions)
        return 0;
    for (uint32_t i = 0; i < layer->inputs[0].num_dimensions; i++)
        if (layer->inputs[0].dimensions[i] != layer->outputs[0].dimensions[i])
            return 0;
    return 1;
}

static BackendStatus mock_relu_execute(BackendWorkload *self, const BackendBuffer *inputs,
                                       uint32_t num_inputs, const BackendBuffer *outputs,
                                       uint32_t num_outputs, char *message, size_t message_size)
{
    const float *x;
    float *y;
    (void)self;
    MOCK_BEFORE_EXECUTE();
    if (num_inputs != 1 || num_outputs != 1 || inputs[0].size_bytes != outputs[0].size_bytes) {
        if (message != NULL && message_size > 0)
            snprintf(message, message_size, "relu takes one input and one output of one size");
        return BACKEND_STATUS_INVALID_ARGUMENT;
    }
    x = (const float *)inputs[0].data;
    y = (float *)outputs[0].data;
    for (uint64_t i = 0; i < inputs[0].size_bytes / sizeof(float); i++)
        y[i] = x[i] > 0 ? x[i] : 0;
    return BACKEND_STATUS_OK;
}

static void mock_relu_destroy(BackendWorkload *self)
{
    free(self);
}
#endif

static BackendStatus mock_is_layer_supported(const BackendInstance *self,
                                             const BackendLayerDescription *layer,
                                             char *message, size_t message_size)
{
    (void)self;
#ifdef MOCK_RUNS_RELU
    if (mock_is_relu(layer))
        return BACKEND_STATUS_OK;
#else
    (void)layer;
#endif
    return mock_refuse(message, message_size);
}

static BackendStatus mock_create_workload(BackendWorkloadFactory *self,
                                          const BackendLayerDescription *layer,
                                          BackendWorkload **workload, char *message,
                                          size_t message_size)
{
    (void)self;
    *workload = NULL;
#ifdef MOCK_RUNS_RELU
    if (mock_is_relu(layer)) {
        BackendWorkload *created = calloc(1, sizeof *created);
        if (created == NULL)
            return BACKEND_STATUS_OUT_OF_MEMORY;
        created->struct_size = (uint32_t)sizeof *created;
        created->execute = mock_relu_execute;
        created->destroy = mock_relu_destroy;
        *workload = created;
        return BACKEND_STATUS_OK;
    }
#else
    (void)layer;
#endif
    return mock_refuse(message, message_size);
}

static void mock_factory_destroy(BackendWorkloadFactory *self)
{
    free(self);
}

static BackendStatus mock_create_workload_factory(const BackendInstance *self,
                                                  BackendMemoryManager *memory_manager,
                                                  BackendWorkloadFactory **factory,
                                                  char *message, size_t message_size)
{
    BackendWorkloadFactory *created = calloc(1, sizeof *created);
    (void)self;
    (void)memory_manager;
    if (created == NULL) {
        if (message != NULL && message_size > 0)
            snprintf(message, message_size, "out of memory");
        return BACKEND_STATUS_OUT_OF_MEMORY;
    }
    created->struct_size = (uint32_t)sizeof *created;
    created->create_workload = mock_create_workload;
    created->destroy = mock_factory_destroy;
    *factory = created;
    return BACKEND_STATUS_OK;
}

static const char *mock_instance_get_id(const BackendInstance *self)
{
    (void)self;
    return MOCK_BACKEND_ID;
}

static void mock_instance_destroy(BackendInstance *self)
{
    free(self);
}

static BackendInstance *mock_new_instance(void)
{
    BackendInstance *instance = calloc(1, sizeof *instance);
    if (instance == NULL)
        return NULL;
    instance->struct_size = (uint32_t)sizeof *instance;
    instance->api_major = MOCK_VERSION_MAJOR;
    instance->api_minor = MOCK_VERSION_MINOR;
    instance->get_id = mock_instance_get_id;
    instance->destroy = mock_instance_destroy;
    instance->get_capabilities = mock_get_capabilities;
    instance->is_layer_supported = mock_is_layer_supported;
    instance->create_workload_factory = mock_create_workload_factory;
    return instance;
}

#ifndef MOCK_NO_GET_BACKEND_ID
BACKEND_EXPORT const char *GetBackendId(void)
{
    return MOCK_BACKEND_ID;
}
#endif

#ifndef MOCK_NO_GET_VERSION
BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{
    *major = MOCK_VERSION_MAJOR;
    *minor = MOCK_VERSION_MINOR;
}
#endif

#ifndef MOCK_NO_BACKEND_FACTORY
BACKEND_EXPORT void *BackendFactory(void)
{
    return mock_new_instance();
}
#endif

#endif /* MOCK_BACKENDS_SKELETON_H */
