/*
 * base.h - a complete, correct and deliberately plain backend that every one-defect backend
 * starts from (mock_backends/one_defect/correct/plain.c is this file and nothing else).
 *
 * It is written independently of reference_backend/: straightforward loops, float accumulation,
 * every object allocated through the custom allocator when the runtime offers one.
 *
 * A one-defect backend replaces exactly one piece and says so in its own file. Each replaceable
 * piece is a static function declared and defined in the part of base.h that holds it unless its
 * knob is set; a backend that sets the knob defines the function itself after including this
 * file. The parts, included below in this order: od_objects.h (allocation, messages, objects),
 * od_checks.h and od_checks13.h (layer checks), od_kernels.h (kernels of 1.1), od_kernels13.h and
 * od_spatial13.h (kernels of what Backend API 1.3 added), od_workloads.h (workloads, factory,
 * memory manager), od_subgraph.h and od_blob.h (the sub-graph optimizer, its compiled programs,
 * their profiling and serialized form); the instance and the entry points are here. It is built against the header's
 * Backend API version (1.3) and implements all of it.
 *
 *   OD_OWN_FAIL                 od_fail(): writes the message of a non-OK status
 *   OD_OWN_IS_LAYER_SUPPORTED   od_is_layer_supported(): the instance's support answer
 *   OD_OWN_CHECK_BUFFERS        od_check_buffers(): execute's check of the buffers it is given
 *   OD_OWN_ACQUIRE, OD_OWN_RELEASE           the memory manager's acquire() and release()
 *   OD_OWN_USE_CUSTOM_ALLOCATOR od_use_custom_allocator()
 *   OD_OWN_FREE                 od_free(): returns memory od_alloc() gave
 *   OD_OWN_READ_DESCRIPTOR      od_read_descriptor(): a descriptor read as far as struct_size
 *   OD_OWN_ACTIVATION, OD_OWN_BINARY, OD_OWN_FULLY_CONNECTED, OD_OWN_CONVOLUTION,
 *   OD_OWN_DEPTHWISE, OD_OWN_POOLING, OD_OWN_SOFTMAX, OD_OWN_RESHAPE      the kernels of 1.1
 *   OD_OWN_ACTIVATION13 (elu .. mish), OD_OWN_BINARY13 (Subtraction .. Power), OD_OWN_UNARY,
 *   OD_OWN_PRELU, OD_OWN_CONCATENATION, OD_OWN_SLICE, OD_OWN_TRANSPOSE, OD_OWN_PAD,
 *   OD_OWN_REDUCE, OD_OWN_BATCH_NORMALIZATION, OD_OWN_LAYER_NORMALIZATION, OD_OWN_MAT_MUL,
 *   OD_OWN_SOFTMAX13 (an axis other than the last, or log), OD_OWN_GROUPED_CONVOLUTION (groups
 *   other than 1), OD_OWN_TRANSPOSE_CONVOLUTION, OD_OWN_POOLING13 (L2, ceil_mode,
 *   count_include_pad or dilation), OD_OWN_RESIZE               the kernels of 1.3
 *
 * Other knobs (macros with a correct default):
 *   OD_BACKEND_ID               the id ("OneDefect")
 *   OD_INSTANCE_ID              what an instance's get_id() returns (OD_BACKEND_ID)
 *   OD_LAYER_TYPE_KNOWN(t)      whether layer type t exists
 *   OD_RANK_KNOWN(r)            whether a tensor of a 1.3 layer type may have rank r (1 to 6)
 *   OD_ROUND(v)                 ElementwiseUnary's round (half to even)
 *   OD_REDUCE_KEEPS_DIMS(d)     whether a Reduce descriptor keeps the reduced axes (keep_dims)
 *   OD_DATA_TYPE_KNOWN(t)       whether data type t is one the backend runs
 *   OD_WORKLOAD_STRUCT_SIZE     the struct_size a workload declares
 *   OD_AFTER_EXECUTE(w)         runs after a successful execute (nothing)
 *   OD_SIGMOID(v), OD_TANH(v)   the activation functions of one float (overflow-free forms)
 *   OD_WORKLOAD_STATE           extra members of OdWorkload (none); OD_FREE_STATE(w) frees them
 *   OD_AFTER_CREATE_INSTANCE(i), OD_AFTER_CREATE_FACTORY(f), OD_AFTER_CREATE_MANAGER(m),
 *   OD_AFTER_CREATE_CONTEXT(c)  run after an instance, a workload factory, a memory manager or a
 *                               backend context is created (nothing)
 *
 * The sub-graph optimizer (od_subgraph.h, od_blob.h) has pieces of its own:
 *   OD_OWN_SLOT_IS_OUTPUT       od_slot_is_output(): whether a tensor made in a sub-graph is one
 *                               of its outputs
 *   OD_OWN_BIND_INPUT           od_bind_input(): the data a boundary input gives a program
 *   OD_OWN_OPERAND_INFO         od_operand_info(): the shape a step gives a broadcast operand
 *   OD_OWN_READ_BLOB            od_read_blob(): takes bytes from a serialized program
 *   OD_PROGRAM_STEP_COUNT       the type that counts a program's steps (uint32_t)
 *   OD_PROGRAM_BINDINGS(p)      where a program keeps its tensors' addresses during an execute
 *                               (its own table)
 *   OD_EVENT_LAYERS(n)          how many of the n layers of a step its profiling event names (n)
 *   OD_PROGRAM_STATE            extra members of OdProgram (none); OD_FREE_PROGRAM_STATE(p)
 *                               frees them
 */
#ifndef ONE_DEFECT_BASE_H
#define ONE_DEFECT_BASE_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_api.h"

#ifndef OD_BACKEND_ID
#define OD_BACKEND_ID "OneDefect"
#endif
#ifndef OD_INSTANCE_ID
#define OD_INSTANCE_ID OD_BACKEND_ID
#endif
#ifndef OD_LAYER_TYPE_KNOWN
#define OD_LAYER_TYPE_KNOWN(t) ((t) < BACKEND_LAYER_TYPE_COUNT_1_3)
#endif
#ifndef OD_DATA_TYPE_KNOWN
#define OD_DATA_TYPE_KNOWN(t) ((t) == BACKEND_DATA_TYPE_FLOAT32)
#endif
#ifndef OD_WORKLOAD_STRUCT_SIZE
#define OD_WORKLOAD_STRUCT_SIZE ((uint32_t)sizeof(BackendWorkload))
#endif
#ifndef OD_AFTER_EXECUTE
#define OD_AFTER_EXECUTE(w) ((void)(w))
#endif
#ifndef OD_SIGMOID
#define OD_SIGMOID(v) od_sigmoid(v)
#endif
#ifndef OD_TANH
#define OD_TANH(v) tanhf(v)
#endif
#ifndef OD_WORKLOAD_STATE
#define OD_WORKLOAD_STATE
#endif
#ifndef OD_FREE_STATE
#define OD_FREE_STATE(w) ((void)(w))
#endif
#ifndef OD_AFTER_CREATE_INSTANCE
#define OD_AFTER_CREATE_INSTANCE(i) ((void)(i))
#endif
#ifndef OD_AFTER_CREATE_FACTORY
#define OD_AFTER_CREATE_FACTORY(f) ((void)(f))
#endif
#ifndef OD_AFTER_CREATE_MANAGER
#define OD_AFTER_CREATE_MANAGER(m) ((void)(m))
#endif
#ifndef OD_AFTER_CREATE_CONTEXT
#define OD_AFTER_CREATE_CONTEXT(c) ((void)(c))
#endif

#ifndef OD_ROUND
#define OD_ROUND(v) od_round_half_even(v)
#endif
#ifndef OD_REDUCE_KEEPS_DIMS
#define OD_REDUCE_KEEPS_DIMS(d) ((d)->keep_dims)
#endif
#ifndef OD_PROGRAM_STEP_COUNT
#define OD_PROGRAM_STEP_COUNT uint32_t
#endif
#ifndef OD_PROGRAM_BINDINGS
#define OD_PROGRAM_BINDINGS(p) ((p)->bound)
#endif
#ifndef OD_EVENT_LAYERS
#define OD_EVENT_LAYERS(n) (n)
#endif
#ifndef OD_PROGRAM_STATE
#define OD_PROGRAM_STATE
#endif
#ifndef OD_FREE_PROGRAM_STATE
#define OD_FREE_PROGRAM_STATE(p) ((void)(p))
#endif
#ifndef OD_RANK_KNOWN
#define OD_RANK_KNOWN(r) ((r) >= 1 && (r) <= BACKEND_MAX_LAYER_RANK)
#endif

#include "od_objects.h"
#include "od_checks.h"
#include "od_checks13.h"
#include "od_kernels.h"
#include "od_kernels13.h"
#include "od_spatial13.h"
#include "od_workloads.h"
#include "od_subgraph.h"

/* ---- instance ----------------------------------------------------------------------------- */

static const BackendCapability OD_CAPABILITIES[] = {
    {BACKEND_CAPABILITY_SIZE_1_1, 1, "NonConstWeights"},
};

static const char *od_get_id(const BackendInstance *self)
{
    (void)self;
    return OD_INSTANCE_ID;
}

static void od_instance_destroy(BackendInstance *self)
{
    free(self);
}

static BackendStatus od_get_capabilities(const BackendInstance *self, const BackendCapability **capabilities,
                                         uint32_t *count)
{
    (void)self;
    *capabilities = OD_CAPABILITIES;
    *count = 1;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_is_layer_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                           char *message, size_t message_size);
#ifndef OD_OWN_IS_LAYER_SUPPORTED
static BackendStatus od_is_layer_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                           char *message, size_t message_size)
{
    (void)self;
    return od_check_layer(layer, message, message_size);
}
#endif

static BackendStatus od_create_memory_manager(const BackendInstance *self, BackendMemoryManager **manager,
                                              char *message, size_t message_size)
{
    const BackendAllocator *allocator = ((const OdInstance *)self)->allocator;
    OdManager *m = od_alloc(allocator, sizeof *m);
    if (m == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    m->base.struct_size = sizeof m->base;
    m->base.acquire = od_acquire;
    m->base.release = od_release;
    m->base.destroy = od_manager_destroy;
    m->allocator = allocator;
    OD_AFTER_CREATE_MANAGER(m);
    *manager = &m->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_create_workload_factory(const BackendInstance *self, BackendMemoryManager *manager,
                                                BackendWorkloadFactory **factory, char *message,
                                                size_t message_size)
{
    const BackendAllocator *allocator = ((const OdInstance *)self)->allocator;
    OdFactory *f = od_alloc(allocator, sizeof *f);
    (void)manager;
    if (f == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    f->base.struct_size = sizeof f->base;
    f->base.create_workload = od_create_workload;
    f->base.destroy = od_factory_destroy;
    f->allocator = allocator;
    OD_AFTER_CREATE_FACTORY(f);
    *factory = &f->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_create_backend_context(const BackendInstance *self, BackendContext **context,
                                               char *message, size_t message_size)
{
    const BackendAllocator *allocator = ((const OdInstance *)self)->allocator;
    OdContext *c = od_alloc(allocator, sizeof *c);
    if (c == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    c->base.struct_size = sizeof c->base;
    c->base.before_load_network = od_context_notified;
    c->base.after_load_network = od_context_notified;
    c->base.before_unload_network = od_context_notified;
    c->base.after_unload_network = od_context_notified;
    c->base.destroy = od_context_destroy;
    c->allocator = allocator;
    OD_AFTER_CREATE_CONTEXT(c);
    *context = &c->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_use_custom_allocator(const BackendInstance *self, const BackendAllocator *allocator,
                                             char *message, size_t message_size);
#ifndef OD_OWN_USE_CUSTOM_ALLOCATOR
static BackendStatus od_use_custom_allocator(const BackendInstance *self, const BackendAllocator *allocator,
                                             char *message, size_t message_size)
{
    if (allocator == NULL || allocator->struct_size < BACKEND_ALLOCATOR_SIZE_1_1 || allocator->allocate == NULL ||
        allocator->deallocate == NULL)
        return OD_INVALID("malformed allocator");
    /* The instance is the runtime's: later objects it creates allocate through `allocator`. */
    ((OdInstance *)self)->allocator = allocator;
    return BACKEND_STATUS_OK;
}
#endif

BACKEND_EXPORT const char *GetBackendId(void)
{
    return OD_BACKEND_ID;
}

BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{
    *major = BACKEND_API_VERSION_MAJOR;
    *minor = BACKEND_API_VERSION_MINOR;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    OdInstance *instance = calloc(1, sizeof *instance);
    if (instance == NULL)
        return NULL;
    instance->base.struct_size = sizeof instance->base;
    instance->base.api_major = BACKEND_API_VERSION_MAJOR;
    instance->base.api_minor = BACKEND_API_VERSION_MINOR;
    instance->base.get_id = od_get_id;
    instance->base.destroy = od_instance_destroy;
    instance->base.get_capabilities = od_get_capabilities;
    instance->base.is_layer_supported = od_is_layer_supported;
    instance->base.create_memory_manager = od_create_memory_manager;
    instance->base.create_workload_factory = od_create_workload_factory;
    instance->base.create_backend_context = od_create_backend_context;
    instance->base.use_custom_allocator = od_use_custom_allocator;
    instance->base.optimize_subgraph = od_optimize_subgraph;
    instance->base.create_profiling_context = od_create_profiling_context;
    instance->base.load_compiled_subgraph = od_load_compiled_subgraph;
    OD_AFTER_CREATE_INSTANCE(instance);
    return &instance->base;
}

#endif /* ONE_DEFECT_BASE_H */
