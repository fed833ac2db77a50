/*
 * od_subgraph.h - the sub-graph optimizer of Backend API 1.2: every sub-graph offered becomes one
 * substitution, a program that runs its layers in order through the workloads of
 * od_workloads.h. An Activation that alone reads the output of the layer before it is fused
 * into that layer's step: one profiling event covers both. Programs serialize to self-contained
 * bytes and load again with every count and size checked. Part of base.h: a one-defect backend
 * includes base.h, which sets the knobs' defaults before it includes this.
 */
#ifndef ONE_DEFECT_SUBGRAPH_H
#define ONE_DEFECT_SUBGRAPH_H

#include <time.h>

#define OD_SLOT_INPUT 0u           /* a boundary input: inputs[index] at execute */
#define OD_SLOT_OUTPUT 1u          /* a boundary output: outputs[index] at execute */
#define OD_SLOT_CONSTANT 2u        /* the program's own copy of a constant */
#define OD_SLOT_INTERNAL 3u        /* the program's own buffer */
#define OD_PROGRAM_LIMIT (1u << 20) /* most tensors or steps a program loaded from bytes declares */
#define OD_DESCRIPTOR_MAX 512u     /* bytes of a layer's descriptor a step keeps */
#define OD_BLOB_MAGIC 0x4750444fu  /* "ODPG" */
#define OD_BLOB_VERSION 1u

typedef struct OdSlot {            /* one tensor of a program; serialized as is, data excepted */
    uint32_t kind, index;
    uint64_t bytes;
    float *data;                   /* CONSTANT, INTERNAL: owned */
} OdSlot;

typedef struct OdStep {
    OdWorkload *workload;
    uint64_t id;                   /* the layer's debug handle */
    uint32_t type, num_inputs, output, fused; /* fused: in the event of the step before */
    uint32_t inputs[OD_MAX_INPUTS];
    BackendTensorInfo infos[OD_MAX_INPUTS + 1]; /* the inputs', then the output's */
    uint32_t descriptor_bytes;
    unsigned char descriptor[OD_DESCRIPTOR_MAX];
} OdStep;

typedef struct OdEvent {
    uint64_t ids[2];
    uint32_t num_ids, type;
    int64_t start, end;
} OdEvent;

typedef struct OdProfiling {
    BackendProfilingContext base;
    int enabled;
    OdEvent *events;
    uint32_t count, capacity;
} OdProfiling;

typedef struct OdProgram {
    BackendCompiledSubgraph base;
    uint32_t num_slots, num_inputs, num_outputs;
    OD_PROGRAM_STEP_COUNT num_steps;
    uint32_t steps_made;           /* steps with a workload, to destroy */
    OdSlot *slots;
    OdStep *steps;
    float **bound;                 /* each tensor's address during one execute */
    OdProfiling *profiling;        /* borrowed from the runtime, or NULL */
    OD_PROGRAM_STATE
} OdProgram;

static int64_t od_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int od_is_binary(uint32_t type)
{
    return type == BACKEND_LAYER_ADDITION || type == BACKEND_LAYER_MULTIPLICATION ||
           (type >= BACKEND_LAYER_SUBTRACTION && type <= BACKEND_LAYER_POWER);
}

/* ---- the replaceable pieces ---------------------------------------------------------------- */

/* Whether tensor `t`, produced in `g`, is one of its outputs (read outside it). */
static int od_slot_is_output(const BackendSubgraph *g, uint32_t t);
#ifndef OD_OWN_SLOT_IS_OUTPUT
static int od_slot_is_output(const BackendSubgraph *g, uint32_t t)
{
    for (uint32_t k = 0; k < g->num_outputs; k++)
        if (g->outputs[k] == t)
            return 1;
    return 0;
}
#endif

/* The data boundary input `index` gives the program's steps at this execute. */
static float *od_bind_input(OdProgram *p, uint32_t index, const BackendBuffer *buffer);
#ifndef OD_OWN_BIND_INPUT
static float *od_bind_input(OdProgram *p, uint32_t index, const BackendBuffer *buffer)
{
    (void)p, (void)index;
    return buffer->data;
}
#endif

/* The shape a step gives operand `t` of a broadcasting layer whose output is `out`. */
static BackendTensorInfo od_operand_info(const BackendTensorInfo *t, const BackendTensorInfo *out);
#ifndef OD_OWN_OPERAND_INFO
static BackendTensorInfo od_operand_info(const BackendTensorInfo *t, const BackendTensorInfo *out)
{
    (void)out;
    return *t;
}
#endif

/* Takes `n` bytes of serialized bytes at *at (*rest of them left) into `into`: 0 when there
   are fewer. */
static int od_read_blob(const unsigned char **at, uint64_t *rest, void *into, uint64_t n);
#ifndef OD_OWN_READ_BLOB
static int od_read_blob(const unsigned char **at, uint64_t *rest, void *into, uint64_t n)
{
    if (n > *rest)
        return 0;
    memcpy(into, *at, (size_t)n);
    *at += n;
    *rest -= n;
    return 1;
}
#endif

/* ---- profiling ----------------------------------------------------------------------------- */

static void od_profiling_enable(BackendProfilingContext *self, int enabled)
{
    ((OdProfiling *)self)->enabled = enabled;
}

static void od_profiling_collect(BackendProfilingContext *self, BackendProfilingSink *sink)
{
    OdProfiling *c = (OdProfiling *)self;
    static const char *const NAMES[] = {"one layer", "a fused step"};
    for (uint32_t i = 0; i < c->count; i++)
        sink->event(sink, NAMES[c->events[i].num_ids > 1], c->events[i].ids, c->events[i].num_ids,
                    c->events[i].start, c->events[i].end);
    c->count = 0;
}

static void od_profiling_destroy(BackendProfilingContext *self)
{
    free(((OdProfiling *)self)->events);
    free(self);
}

static BackendStatus od_create_profiling_context(const BackendInstance *self, BackendProfilingContext **context,
                                                 char *message, size_t message_size)
{
    OdProfiling *c = calloc(1, sizeof *c);
    (void)self;
    *context = NULL;
    if (c == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    c->base.struct_size = sizeof c->base;
    c->base.enable = od_profiling_enable;
    c->base.collect = od_profiling_collect;
    c->base.destroy = od_profiling_destroy;
    *context = &c->base;
    return BACKEND_STATUS_OK;
}

/* One event for steps [first, last] of `p`; dropped when out of memory. */
static void od_record(OdProgram *p, uint32_t first, uint32_t last, int64_t start)
{
    OdProfiling *c = p->profiling;
    OdEvent *e;
    if (c->count == c->capacity) {
        uint32_t capacity = c->capacity ? 2 * c->capacity : 64;
        OdEvent *grown = realloc(c->events, capacity * sizeof *grown);
        if (grown == NULL)
            return;
        c->events = grown;
        c->capacity = capacity;
    }
    e = &c->events[c->count++];
    e->num_ids = OD_EVENT_LAYERS(last - first + 1);
    for (uint32_t k = 0; k < e->num_ids && k < 2; k++)
        e->ids[k] = p->steps[first + k].id;
    e->type = p->steps[first].type;
    e->start = start;
    e->end = od_now_ns();
}

/* ---- the program --------------------------------------------------------------------------- */

static void od_program_destroy(BackendCompiledSubgraph *self)
{
    OdProgram *p = (OdProgram *)self;
    for (uint32_t i = 0; i < p->steps_made; i++)
        od_workload_destroy(&p->steps[i].workload->base);
    for (uint32_t s = 0; p->slots != NULL && s < p->num_slots; s++)
        free(p->slots[s].data);
    OD_FREE_PROGRAM_STATE(p);
    free(p->slots);
    free(p->steps);
    free(p->bound);
    free(p);
}

static void od_program_set_profiling(BackendCompiledSubgraph *self, BackendProfilingContext *context)
{
    ((OdProgram *)self)->profiling = (OdProfiling *)context;
}

static BackendStatus od_program_execute(BackendCompiledSubgraph *self, const BackendBuffer *inputs,
                                        uint32_t num_inputs, const BackendBuffer *outputs, uint32_t num_outputs,
                                        char *message, size_t message_size)
{
    OdProgram *p = (OdProgram *)self;
    float **bound = OD_PROGRAM_BINDINGS(p);
    int profiled = p->profiling != NULL && p->profiling->enabled;
    int64_t start = 0;
    uint32_t first = 0;
    if (num_inputs != p->num_inputs || num_outputs != p->num_outputs || (num_inputs && inputs == NULL) ||
        (num_outputs && outputs == NULL))
        return OD_INVALID("the program takes %u inputs and %u outputs", p->num_inputs, p->num_outputs);
    for (uint32_t s = 0; s < p->num_slots; s++) {
        const OdSlot *slot = &p->slots[s];
        const BackendBuffer *b = slot->kind == OD_SLOT_INPUT ? &inputs[slot->index]
                                 : slot->kind == OD_SLOT_OUTPUT ? &outputs[slot->index] : NULL;
        if (b == NULL) {
            bound[s] = slot->data;
            continue;
        }
        if (b->struct_size < BACKEND_BUFFER_SIZE_1_1 || b->data == NULL || b->size_bytes < slot->bytes)
            return OD_INVALID("the buffer of boundary %s %u is malformed or too small",
                              slot->kind == OD_SLOT_INPUT ? "input" : "output", slot->index);
        bound[s] = slot->kind == OD_SLOT_INPUT ? od_bind_input(p, slot->index, b) : b->data;
    }
    for (uint32_t i = 0; i < p->num_steps; i++) {
        const OdStep *step = &p->steps[i];
        const float *in[OD_MAX_INPUTS] = {NULL};
        if (!step->fused) {
            first = i;
            start = profiled ? od_now_ns() : 0;
        }
        for (uint32_t j = 0; j < step->num_inputs; j++)
            in[j] = bound[step->inputs[j]];
        step->workload->kernel(step->workload, in, bound[step->output]);
        if (profiled && (i + 1 == p->num_steps || !p->steps[i + 1].fused))
            od_record(p, first, i, start);
    }
    return BACKEND_STATUS_OK;
}

static BackendStatus od_program_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                          uint64_t *size, char *message, size_t message_size);

static OdProgram *od_program_new(uint32_t num_slots, uint32_t num_steps)
{
    OdProgram *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->base.struct_size = sizeof p->base;
    p->base.execute = od_program_execute;
    p->base.destroy = od_program_destroy;
    p->base.set_profiling_context = od_program_set_profiling;
    p->base.serialize = od_program_serialize;
    p->num_slots = num_slots;
    p->slots = calloc(num_slots ? num_slots : 1, sizeof *p->slots);
    p->steps = calloc(num_steps ? num_steps : 1, sizeof *p->steps);
    p->bound = calloc(num_slots ? num_slots : 1, sizeof *p->bound);
    if (p->slots == NULL || p->steps == NULL || p->bound == NULL) {
        od_program_destroy(&p->base);
        return NULL;
    }
    return p;
}

/* The step's workload, made from what the step holds (as a loaded program makes it too). */
static BackendStatus od_make_step(OdProgram *p, OdStep *step, char *message, size_t message_size)
{
    OdFactory factory = {{0}, NULL};
    BackendLayerDescription d;
    BackendWorkload *w = NULL;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.layer_type = step->type;
    d.num_inputs = step->num_inputs;
    d.num_outputs = 1;
    d.inputs = step->infos;
    d.outputs = &step->infos[step->num_inputs];
    d.descriptor = step->descriptor_bytes ? step->descriptor : NULL;
    OD_TRY(od_create_workload(&factory.base, &d, &w, message, message_size));
    step->workload = (OdWorkload *)w;
    p->steps_made++;
    return BACKEND_STATUS_OK;
}

static BackendStatus od_optimize_subgraph(const BackendInstance *self, const BackendSubgraph *g,
                                          BackendOptimizationViews *views, char *message, size_t message_size)
{
    OdProgram *p;
    uint64_t *ids;
    BackendStatus status = BACKEND_STATUS_OK;
    (void)self;
    if (g == NULL || g->struct_size < BACKEND_SUBGRAPH_SIZE_1_2 || g->num_layers == 0)
        return OD_INVALID("malformed sub-graph");
    p = od_program_new(g->num_tensors, g->num_layers);
    ids = malloc(g->num_layers * sizeof *ids);
    if (p == NULL || ids == NULL) {
        free(ids);
        if (p != NULL)
            od_program_destroy(&p->base);
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    p->num_inputs = g->num_inputs;
    p->num_outputs = g->num_outputs;
    for (uint32_t t = 0; t < g->num_tensors && status == BACKEND_STATUS_OK; t++) { /* slot t: tensor t */
        const BackendSubgraphTensor *tensor = g->tensors[t];
        OdSlot *slot = &p->slots[t];
        slot->bytes = (uint64_t)od_count(&tensor->info) * sizeof(float);
        if (tensor->kind == BACKEND_SUBGRAPH_TENSOR_BOUNDARY_INPUT) {
            slot->kind = OD_SLOT_INPUT;
            for (uint32_t k = 0; k < g->num_inputs; k++)
                if (g->inputs[k] == t)
                    slot->index = k;
        } else if (tensor->kind == BACKEND_SUBGRAPH_TENSOR_CONSTANT) {
            slot->kind = OD_SLOT_CONSTANT;
            slot->data = malloc(slot->bytes ? slot->bytes : 1);
            if (slot->data == NULL || tensor->size_bytes != slot->bytes)
                status = OD_INVALID("constant %u: %llu bytes for its shape", t, (unsigned long long)tensor->size_bytes);
            else
                memcpy(slot->data, tensor->data, slot->bytes);
        } else if (od_slot_is_output(g, t)) {
            slot->kind = OD_SLOT_OUTPUT;
            for (uint32_t k = 0; k < g->num_outputs; k++)
                if (g->outputs[k] == t)
                    slot->index = k;
        } else {
            slot->kind = OD_SLOT_INTERNAL;
            slot->data = calloc(slot->bytes ? slot->bytes / sizeof(float) : 1, sizeof(float));
            if (slot->data == NULL)
                status = od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
        }
    }
    for (uint32_t i = 0; i < g->num_layers && status == BACKEND_STATUS_OK; i++) {
        const BackendSubgraphLayer *layer = g->layers[i];
        const BackendLayerDescription *d = layer->description;
        OdStep *step = &p->steps[i];
        uint32_t readers = 0;
        if (d->num_inputs > OD_MAX_INPUTS || d->num_outputs != 1) {
            status = OD_UNSUPPORTED("layer %llu: at most %d inputs and one output", (unsigned long long)layer->id,
                                    OD_MAX_INPUTS);
            break;
        }
        step->id = ids[i] = layer->id;
        step->type = d->layer_type;
        step->num_inputs = d->num_inputs;
        step->output = layer->output_tensors[0];
        for (uint32_t j = 0; j < d->num_inputs; j++) {
            step->inputs[j] = layer->input_tensors[j];
            step->infos[j] = od_is_binary(d->layer_type) ? od_operand_info(&d->inputs[j], &d->outputs[0])
                                                          : d->inputs[j];
        }
        step->infos[d->num_inputs] = d->outputs[0];
        if (d->descriptor != NULL) {
            uint32_t given = *(const uint32_t *)d->descriptor;
            step->descriptor_bytes = given < OD_DESCRIPTOR_MAX ? given : OD_DESCRIPTOR_MAX;
            memcpy(step->descriptor, d->descriptor, step->descriptor_bytes);
        }
        /* fused: an Activation alone reading what the step before wrote, which nothing else reads */
        for (uint32_t k = 0; i > 0 && k < g->num_layers; k++)
            for (uint32_t j = 0; j < g->layers[k]->description->num_inputs; j++)
                readers += g->layers[k]->input_tensors[j] == p->steps[i - 1].output;
        step->fused = i > 0 && d->layer_type == BACKEND_LAYER_ACTIVATION && readers == 1 &&
                      step->inputs[0] == p->steps[i - 1].output &&
                      p->slots[step->inputs[0]].kind == OD_SLOT_INTERNAL && !p->steps[i - 1].fused;
        status = od_make_step(p, step, message, message_size);
    }
    p->num_steps = (OD_PROGRAM_STEP_COUNT)g->num_layers;
    if (status != BACKEND_STATUS_OK) {
        free(ids);
        od_program_destroy(&p->base);
        return status;
    }
    status = views->add_substitution(views, ids, g->num_layers, g->inputs, g->num_inputs, g->outputs,
                                     g->num_outputs, &p->base);
    free(ids);
    return status == BACKEND_STATUS_OK ? BACKEND_STATUS_OK : OD_INVALID("add_substitution refused the program");
}

#include "od_blob.h"

#endif /* ONE_DEFECT_SUBGRAPH_H */
