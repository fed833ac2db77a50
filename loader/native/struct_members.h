/* Whether a struct a backend filled holds a member, and whether that member is set: the test a
 * runtime makes before it reads an appended member (backend_api.h, BACKEND_STRUCT_HAS), spelled
 * out once per member the loader reads. */
#ifndef DBK_STRUCT_MEMBERS_H
#define DBK_STRUCT_MEMBERS_H

#include "backend_api.h"

#define DBK_INSTANCE_MEMBER(member)                                             \
    static inline int dbk_covers_##member(const BackendInstance *p)             \
    { return BACKEND_STRUCT_HAS(BackendInstance, p, member); }                  \
    static inline int dbk_has_##member(const BackendInstance *p)                \
    { return BACKEND_STRUCT_HAS(BackendInstance, p, member) && p->member != NULL; }

DBK_INSTANCE_MEMBER(get_capabilities)
DBK_INSTANCE_MEMBER(is_layer_supported)
DBK_INSTANCE_MEMBER(create_memory_manager)
DBK_INSTANCE_MEMBER(create_workload_factory)
DBK_INSTANCE_MEMBER(create_backend_context)
DBK_INSTANCE_MEMBER(use_custom_allocator)
DBK_INSTANCE_MEMBER(optimize_subgraph)
DBK_INSTANCE_MEMBER(is_available)
DBK_INSTANCE_MEMBER(create_profiling_context)
DBK_INSTANCE_MEMBER(load_compiled_subgraph)

static inline int dbk_compiled_has_serialize(const BackendCompiledSubgraph *p)
{ return BACKEND_STRUCT_HAS(BackendCompiledSubgraph, p, serialize) && p->serialize != NULL; }

static inline int dbk_compiled_has_set_profiling_context(const BackendCompiledSubgraph *p)
{
    return BACKEND_STRUCT_HAS(BackendCompiledSubgraph, p, set_profiling_context)
           && p->set_profiling_context != NULL;
}

#endif
