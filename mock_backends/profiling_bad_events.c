/* Defect: its profiling context reports, besides one good event per execution, an event naming a
   layer id that is not in the network, one that ends before it starts and one that lies outside
   the execution. The runtime drops those three with a warning; the conformance kit's profiling
   case (events well-formed and inside the execute window) catches them. The compiled sub-graph
   is the skeleton's relu chain. */
#define MOCK_BACKEND_ID "MockProfilingBadEvents"
#define MOCK_NO_BACKEND_FACTORY
#include <time.h>

#include "subgraph_skeleton.h"

typedef struct Profiling {
    BackendProfilingContext base;
    int enabled;
    int64_t start, end;                 /* of the last profiled execution */
    uint64_t id;                        /* a layer the compiled chain covers */
} Profiling;

typedef struct Chain {
    BackendCompiledSubgraph base;
    Profiling *profiling;
    uint64_t id;
} Chain;

static int64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static BackendStatus chain_execute(BackendCompiledSubgraph *self, const BackendBuffer *inputs,
                                   uint32_t num_inputs, const BackendBuffer *outputs,
                                   uint32_t num_outputs, char *message, size_t message_size)
{
    Chain *c = (Chain *)self;
    int64_t start = now();
    BackendStatus status = mock_compiled_relu_execute(self, inputs, num_inputs, outputs,
                                                      num_outputs, message, message_size);
    if (c->profiling != NULL && c->profiling->enabled) {
        c->profiling->start = start;
        c->profiling->end = now();
        c->profiling->id = c->id;
    }
    return status;
}

static void chain_set_profiling(BackendCompiledSubgraph *self, BackendProfilingContext *context)
{
    ((Chain *)self)->profiling = (Profiling *)context;
}

static void profiling_enable(BackendProfilingContext *self, int enabled)
{
    ((Profiling *)self)->enabled = enabled;
}

static void profiling_collect(BackendProfilingContext *self, BackendProfilingSink *sink)
{
    Profiling *p = (Profiling *)self;
    uint64_t unknown = 999999;
    if (p->end == 0)
        return;
    sink->event(sink, "good", &p->id, 1, p->start, p->end);
    sink->event(sink, "unknown layer", &unknown, 1, p->start, p->end);
    sink->event(sink, "backwards", &p->id, 1, p->end, p->start - 1);
    sink->event(sink, "before the run", &p->id, 1, p->start - 1000000000, p->start - 999999000);
    sink->counter(sink, "events", 4);
    p->end = 0;
}

static void profiling_destroy(BackendProfilingContext *self)
{
    free(self);
}

static BackendStatus create_profiling(const BackendInstance *self, BackendProfilingContext **out,
                                      char *message, size_t message_size)
{
    Profiling *p = calloc(1, sizeof *p);
    (void)self, (void)message, (void)message_size;
    if (p == NULL)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    p->base.struct_size = sizeof p->base;
    p->base.enable = profiling_enable;
    p->base.collect = profiling_collect;
    p->base.destroy = profiling_destroy;
    *out = &p->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    uint64_t ids[64];
    uint32_t n = subgraph->num_layers < 64 ? subgraph->num_layers : 64;
    Chain *c = calloc(1, sizeof *c);
    (void)self, (void)message, (void)message_size;
    if (c != NULL) {
        c->base.struct_size = sizeof c->base;
        c->base.execute = chain_execute;
        c->base.destroy = mock_compiled_destroy;
        c->base.set_profiling_context = chain_set_profiling;
        c->id = subgraph->layers[0]->id;
    }
    for (uint32_t i = 0; i < n; i++)
        ids[i] = subgraph->layers[i]->id;
    views->add_substitution(views, ids, n, subgraph->inputs, subgraph->num_inputs,
                            subgraph->outputs, subgraph->num_outputs, c ? &c->base : NULL);
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_optimizing_instance(optimize);
    if (instance != NULL)
        instance->create_profiling_context = create_profiling;
    return instance;
}
