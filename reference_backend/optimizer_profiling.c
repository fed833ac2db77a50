/*
 * The reference backend's profiling context (Backend API 1.2): the events the steps of its
 * compiled sub-graphs record while profiling is enabled, handed to the runtime's sink on collect.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimizer_internal.h"

#define MAX_PROFILED_EVENTS 65536

int64_t ref_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void profiling_enable(BackendProfilingContext *self, int enabled)
{
    ((RefProfiling *)self)->enabled = enabled != 0;
}

static void profiling_collect(BackendProfilingContext *self, BackendProfilingSink *sink)
{
    RefProfiling *p = (RefProfiling *)self;
    if (sink != NULL && sink->struct_size >= BACKEND_PROFILING_SINK_SIZE_1_2) {
        for (size_t i = 0; i < p->count; i++)
            sink->event(sink, p->events[i].name, p->events[i].layer_ids, p->events[i].num_layer_ids,
                        p->events[i].start_ns, p->events[i].end_ns);
        if (p->macs > 0)
            sink->counter(sink, "macs", p->macs);
    }
    p->count = 0;
    p->macs = 0;
}

static void profiling_destroy(BackendProfilingContext *self)
{
    free(((RefProfiling *)self)->events);
    free(self);
}

BackendStatus ref_create_profiling_context(const BackendInstance *self,
                                           BackendProfilingContext **context, char *message,
                                           size_t message_size)
{
    RefProfiling *p;
    (void)self;
    if (context == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, "NULL context");
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    p->base.struct_size = (uint32_t)sizeof p->base;
    p->base.enable = profiling_enable;
    p->base.collect = profiling_collect;
    p->base.destroy = profiling_destroy;
    *context = &p->base;
    return BACKEND_STATUS_OK;
}

void ref_record_event(RefProfiling *p, const char *name, const uint64_t *ids, uint32_t n,
                      int64_t start, int64_t end, double macs)
{
    if (p->count == p->capacity) {
        size_t capacity = p->capacity ? 2 * p->capacity : 64;
        RefEvent *grown;
        if (capacity > MAX_PROFILED_EVENTS)
            return;                      /* the rest of a long unprofiled stretch is dropped */
        grown = realloc(p->events, capacity * sizeof *grown);
        if (grown == NULL)
            return;
        p->events = grown;
        p->capacity = capacity;
    }
    p->events[p->count].name = name;
    memcpy(p->events[p->count].layer_ids, ids, n * sizeof *ids);
    p->events[p->count].num_layer_ids = n;
    p->events[p->count].start_ns = start;
    p->events[p->count].end_ns = end;
    p->count++;
    p->macs += macs;
}
