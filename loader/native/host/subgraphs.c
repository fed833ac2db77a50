/* subgraphs.c - requests of Backend API 1.2: a sub-graph offered to optimize_subgraph() and the
 * views the backend records (checked as loader/networks/_subgraphs.pxi checks them, with the
 * same messages), and the compiled sub-graphs it hands over. compiled.c serves them after. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../struct_members.h"
#include "host.h"

uint64_t dbk_adopt_compiled(BackendCompiledSubgraph *compiled, uint64_t keep)
{
    uint64_t handle;
    if (compiled == NULL)
        return 0;
    if (compiled->struct_size < BACKEND_COMPILED_SUBGRAPH_SIZE_1_2 || compiled->execute == NULL ||
        compiled->destroy == NULL) {
        if (compiled->struct_size >= BACKEND_COMPILED_SUBGRAPH_SIZE_1_2 &&
            compiled->destroy != NULL)
            compiled->destroy(compiled);
        return 0;
    }
    handle = dbk_object_add(DBK_KIND_COMPILED, compiled);
    if (handle == 0) {
        compiled->destroy(compiled);
        return 0;
    }
    if (keep != 0)
        dbk_object_depend(dbk_object_get(handle, DBK_KIND_COMPILED), 1, keep);
    return handle;
}

uint32_t dbk_compiled_members(const BackendCompiledSubgraph *compiled)
{
    return (dbk_compiled_has_serialize(compiled) ? DBK_COMPILED_SERIALIZE : 0u) |
           (dbk_compiled_has_set_profiling_context(compiled) ? DBK_COMPILED_SET_PROFILING : 0u);
}

/* ---- the views a backend records --------------------------------------------------------- */

/* Static: a backend that calls its views after optimize_subgraph() returned finds them closed,
   never freed. */
static struct recorder {
    BackendOptimizationViews views;
    int open;
    uint32_t num_layers, num_tensors;
    size_t max_calls;
    uint64_t constants;
    dbk_writer substitutions, failed, untouched, problems;
    uint32_t num_substitutions, num_failed, num_untouched, num_problems;
    const void **seen;                       /* compiled sub-graphs handed over */
    size_t num_seen, seen_capacity;
} recorder;

static BackendStatus problem(const char *text)
{
    if (recorder.open && recorder.num_problems < 32) {
        dbk_put_string(&recorder.problems, text, strlen(text));
        recorder.num_problems++;
    }
    return BACKEND_STATUS_INVALID_ARGUMENT;
}

static int seen_before(const void *compiled)
{
    const void **grown;
    for (size_t i = 0; i < recorder.num_seen; i++)
        if (recorder.seen[i] == compiled)
            return 1;
    if (recorder.num_seen == recorder.seen_capacity) {
        size_t capacity = recorder.seen_capacity ? 2 * recorder.seen_capacity : 16;
        grown = realloc(recorder.seen, capacity * sizeof *grown);
        if (grown == NULL)
            return 0;
        recorder.seen = grown;
        recorder.seen_capacity = capacity;
    }
    recorder.seen[recorder.num_seen++] = compiled;
    return 0;
}

static BackendStatus add_substitution(BackendOptimizationViews *views, const uint64_t *layer_ids,
                                      uint32_t num_layer_ids, const uint32_t *inputs,
                                      uint32_t num_inputs, const uint32_t *outputs,
                                      uint32_t num_outputs, BackendCompiledSubgraph *compiled)
{
    char text[256];
    uint64_t adopted = 0;
    BackendStatus status = BACKEND_STATUS_OK;
    dbk_writer *w = &recorder.substitutions;
    (void)views;
    /* Ownership of `compiled` passes with this call, whatever else is wrong. */
    if (compiled != NULL) {
        if (seen_before(compiled))
            return problem("add_substitution: the same compiled sub-graph was handed over twice");
        adopted = dbk_adopt_compiled(compiled, recorder.constants);
    }
    if (!recorder.open) {
        status = problem("add_substitution called after optimize_subgraph returned");
    } else if (recorder.num_substitutions >= recorder.max_calls) {
        snprintf(text, sizeof text, "add_substitution: far more calls than the sub-graph's %u "
                 "layers", (unsigned)recorder.num_layers);
        status = problem(text);
    } else if (num_layer_ids > recorder.num_layers || num_inputs > recorder.num_tensors ||
               num_outputs > recorder.num_tensors) {
        snprintf(text, sizeof text, "add_substitution: %u layers, %u inputs, %u outputs, but the "
                 "sub-graph has %u layers and %u tensors", (unsigned)num_layer_ids,
                 (unsigned)num_inputs, (unsigned)num_outputs, (unsigned)recorder.num_layers,
                 (unsigned)recorder.num_tensors);
        status = problem(text);
    } else if ((num_layer_ids && layer_ids == NULL) || (num_inputs && inputs == NULL) ||
               (num_outputs && outputs == NULL)) {
        status = problem("add_substitution: a NULL array with a non-zero count");
    }
    if (status != BACKEND_STATUS_OK) {
        if (adopted != 0)
            dbk_object_disown(adopted);
        return status;
    }
    dbk_put_u32(w, num_layer_ids);
    dbk_put(w, layer_ids, (size_t)num_layer_ids * sizeof *layer_ids);
    dbk_put_u32(w, num_inputs);
    dbk_put(w, inputs, (size_t)num_inputs * sizeof *inputs);
    dbk_put_u32(w, num_outputs);
    dbk_put(w, outputs, (size_t)num_outputs * sizeof *outputs);
    dbk_put_u64(w, adopted);
    dbk_put_u32(w, adopted == 0 ? 0 : dbk_compiled_members(compiled));
    recorder.num_substitutions++;
    return BACKEND_STATUS_OK;
}

static BackendStatus add_failed(BackendOptimizationViews *views, uint64_t layer_id,
                                const char *reason)
{
    char text[256];
    (void)views;
    if (!recorder.open)
        return problem("add_failed called after optimize_subgraph returned");
    if ((size_t)recorder.num_failed + recorder.num_untouched >= recorder.max_calls) {
        snprintf(text, sizeof text, "add_failed: far more calls than the sub-graph's %u layers",
                 (unsigned)recorder.num_layers);
        return problem(text);
    }
    dbk_put_u64(&recorder.failed, layer_id);
    if (reason == NULL)
        reason = "no reason given";
    dbk_put_string(&recorder.failed, reason, strnlen(reason, DBK_HOST_MAX_STRING));
    recorder.num_failed++;
    return BACKEND_STATUS_OK;
}

static BackendStatus add_untouched(BackendOptimizationViews *views, uint64_t layer_id)
{
    char text[256];
    (void)views;
    if (!recorder.open)
        return problem("add_untouched called after optimize_subgraph returned");
    if ((size_t)recorder.num_failed + recorder.num_untouched >= recorder.max_calls) {
        snprintf(text, sizeof text, "add_untouched: far more calls than the sub-graph's %u "
                 "layers", (unsigned)recorder.num_layers);
        return problem(text);
    }
    dbk_put_u64(&recorder.untouched, layer_id);
    recorder.num_untouched++;
    return BACKEND_STATUS_OK;
}

static void reset_recorder(void)
{
    dbk_writer *writers[] = {&recorder.substitutions, &recorder.failed, &recorder.untouched,
                             &recorder.problems};
    for (size_t i = 0; i < 4; i++) {
        writers[i]->size = 0;
        writers[i]->failed = 0;
    }
    recorder.num_substitutions = recorder.num_failed = recorder.num_untouched = 0;
    recorder.num_problems = 0;
    recorder.num_seen = 0;
    memset(&recorder.views, 0, sizeof recorder.views);
    recorder.views.struct_size = sizeof recorder.views;
    recorder.views.add_substitution = add_substitution;
    recorder.views.add_failed = add_failed;
    recorder.views.add_untouched = add_untouched;
}

/* ---- the sub-graph ----------------------------------------------------------------------- */

typedef struct storage {
    BackendSubgraph subgraph;
    BackendSubgraphTensor *tensors;
    const BackendSubgraphTensor **tensor_pointers;
    BackendSubgraphLayer *layers;
    const BackendSubgraphLayer **layer_pointers;
    dbk_layer *descriptions;
    uint32_t **indices;            /* per layer: its input then output tensor indices */
    uint32_t *boundary;            /* the sub-graph's inputs then outputs */
    uint32_t num_layers;
} storage;

static void free_storage(storage *s)
{
    for (uint32_t i = 0; i < s->num_layers; i++) {
        if (s->descriptions != NULL)
            dbk_free_layer(&s->descriptions[i]);
        if (s->indices != NULL)
            free(s->indices[i]);
    }
    free(s->tensors);
    free(s->tensor_pointers);
    free(s->layers);
    free(s->layer_pointers);
    free(s->descriptions);
    free(s->indices);
    free(s->boundary);
}

static uint32_t *read_indices(dbk_reader *r, uint32_t count, uint32_t num_tensors, uint32_t *into)
{
    const void *raw = dbk_take(r, (size_t)count * sizeof(uint32_t));
    if (raw == NULL)
        return NULL;
    memcpy(into, raw, (size_t)count * sizeof(uint32_t));
    for (uint32_t i = 0; i < count; i++) {
        if (into[i] >= num_tensors) {
            dbk_refuse(r, "a tensor index past the sub-graph's tensors");
            return NULL;
        }
    }
    return into;
}

static int read_subgraph(dbk_reader *r, storage *s, uint64_t constants)
{
    uint32_t num_tensors, num_layers, count;
    const void *raw;
    memset(s, 0, sizeof *s);
    num_tensors = dbk_take_count(r, 4 + sizeof(BackendTensorInfo) + 16);
    if (r->problem != NULL)
        return -1;
    s->tensors = calloc(num_tensors ? num_tensors : 1, sizeof *s->tensors);
    s->tensor_pointers = calloc(num_tensors ? num_tensors : 1, sizeof *s->tensor_pointers);
    if (s->tensors == NULL || s->tensor_pointers == NULL) {
        dbk_refuse(r, "no memory for the sub-graph's tensors");
        return -1;
    }
    for (uint32_t i = 0; i < num_tensors; i++) {
        BackendSubgraphTensor *t = &s->tensors[i];
        uint64_t offset, size;
        t->struct_size = sizeof *t;
        t->kind = dbk_take_u32(r);
        raw = dbk_take(r, sizeof t->info);
        offset = dbk_take_u64(r);
        size = dbk_take_u64(r);
        if (raw == NULL)
            return -1;
        memcpy(&t->info, raw, sizeof t->info);
        if (t->info.struct_size != sizeof t->info || t->info.num_dimensions > BACKEND_MAX_DIMENSIONS) {
            dbk_refuse(r, "a tensor info of the wrong size or with too many dimensions");
            return -1;
        }
        if (t->kind == BACKEND_SUBGRAPH_TENSOR_CONSTANT) {
            t->data = size == 0 ? NULL : dbk_segment_span(r, constants, offset, size, 0);
            if (size != 0 && t->data == NULL)
                return -1;
            t->size_bytes = size;
        }
        s->tensor_pointers[i] = t;
    }
    num_layers = dbk_take_count(r, 8 + 16);
    if (r->problem != NULL)
        return -1;
    s->layers = calloc(num_layers ? num_layers : 1, sizeof *s->layers);
    s->layer_pointers = calloc(num_layers ? num_layers : 1, sizeof *s->layer_pointers);
    s->descriptions = calloc(num_layers ? num_layers : 1, sizeof *s->descriptions);
    s->indices = calloc(num_layers ? num_layers : 1, sizeof *s->indices);
    if (s->layers == NULL || s->layer_pointers == NULL || s->descriptions == NULL ||
        s->indices == NULL) {
        dbk_refuse(r, "no memory for the sub-graph's layers");
        return -1;
    }
    for (uint32_t i = 0; i < num_layers; i++) {
        BackendSubgraphLayer *layer = &s->layers[i];
        dbk_layer *d = &s->descriptions[i];
        s->num_layers = i + 1;
        layer->struct_size = sizeof *layer;
        layer->id = dbk_take_u64(r);
        if (dbk_read_layer(r, d) != 0)
            return -1;
        count = d->description.num_inputs + d->description.num_outputs;
        s->indices[i] = malloc((count ? count : 1) * sizeof(uint32_t));
        if (s->indices[i] == NULL) {
            dbk_refuse(r, "no memory for a layer's tensor indices");
            return -1;
        }
        if (read_indices(r, count, num_tensors, s->indices[i]) == NULL)
            return -1;
        layer->description = &d->description;
        layer->input_tensors = s->indices[i];
        layer->output_tensors = s->indices[i] + d->description.num_inputs;
        s->layer_pointers[i] = layer;
    }
    s->subgraph.num_inputs = dbk_take_count(r, 4);
    s->boundary = calloc((size_t)s->subgraph.num_inputs + num_tensors + 1, sizeof(uint32_t));
    if (s->boundary == NULL) {
        dbk_refuse(r, "no memory for the sub-graph's boundary");
        return -1;
    }
    if (read_indices(r, s->subgraph.num_inputs, num_tensors, s->boundary) == NULL)
        return -1;
    s->subgraph.num_outputs = dbk_take_count(r, 4);
    if (s->subgraph.num_outputs > num_tensors + 1) {
        dbk_refuse(r, "more sub-graph outputs than tensors");
        return -1;
    }
    if (read_indices(r, s->subgraph.num_outputs, num_tensors,
                     s->boundary + s->subgraph.num_inputs) == NULL)
        return -1;
    s->subgraph.struct_size = sizeof s->subgraph;
    s->subgraph.num_tensors = num_tensors;
    s->subgraph.tensors = s->tensor_pointers;
    s->subgraph.num_layers = num_layers;
    s->subgraph.layers = s->layer_pointers;
    s->subgraph.inputs = s->boundary;
    s->subgraph.outputs = s->boundary + s->subgraph.num_inputs;
    return 0;
}

static void disown_substitutions(void)
{
    dbk_reader r = {recorder.substitutions.data, recorder.substitutions.size, NULL};
    for (uint32_t k = 0; k < recorder.num_substitutions; k++) {
        for (int part = 0; part < 3; part++)
            dbk_take(&r, (size_t)dbk_take_u32(&r) * (part == 0 ? 8 : 4));
        uint64_t handle = dbk_take_u64(&r);
        dbk_take_u32(&r);
        if (handle != 0)
            dbk_object_disown(handle);
    }
}

void dbk_optimize(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_INSTANCE);
    BackendInstance *instance;
    uint64_t constants = dbk_take_u64(r);
    char message[DBK_HOST_MESSAGE_BYTES];
    storage s;
    dbk_writer *w = &reply->payload;
    (void)fd;
    if (object == NULL) {
        dbk_refuse(r, "the request names no live instance");
        return;
    }
    instance = object->pointer;
    if (!(dbk_instance_members(instance, 1) & DBK_MEMBER_OPTIMIZE_SUBGRAPH)) {
        dbk_reply_problem(reply, DBK_OUTCOME_ABSENT, "the instance lacks optimize_subgraph");
        return;
    }
    if (constants != 0 && dbk_object_get(constants, DBK_KIND_SEGMENT) == NULL) {
        dbk_refuse(r, "the constants segment is not live");
        return;
    }
    if (read_subgraph(r, &s, constants) != 0) {
        free_storage(&s);
        return;
    }
    reset_recorder();
    recorder.num_layers = s.subgraph.num_layers;
    recorder.num_tensors = s.subgraph.num_tensors;
    recorder.max_calls = 2 * (size_t)recorder.num_layers + 16;
    recorder.constants = constants;
    recorder.open = 1;
    dbk_clear_message(message);
    dbk_note("optimize_subgraph");
    reply->value = instance->optimize_subgraph(instance, &s.subgraph, &recorder.views, message,
                                               DBK_HOST_MESSAGE_BYTES);
    recorder.open = 0;
    free_storage(&s);
    dbk_put_status(reply, reply->value, message);
    if (reply->value != BACKEND_STATUS_OK) {
        disown_substitutions();
        for (int i = 0; i < 4; i++)
            dbk_put_u32(w, 0);
        return;
    }
    dbk_put_u32(w, recorder.num_substitutions);
    dbk_put(w, recorder.substitutions.data, recorder.substitutions.size);
    dbk_put_u32(w, recorder.num_failed);
    dbk_put(w, recorder.failed.data, recorder.failed.size);
    dbk_put_u32(w, recorder.num_untouched);
    dbk_put(w, recorder.untouched.data, recorder.untouched.size);
    dbk_put_u32(w, recorder.num_problems);
    dbk_put(w, recorder.problems.data, recorder.problems.size);
    if (recorder.substitutions.failed || recorder.failed.failed || recorder.untouched.failed ||
        recorder.problems.failed || w->failed) {
        disown_substitutions();
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY, "the views do not fit in a reply");
    }
}
