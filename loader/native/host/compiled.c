/* compiled.c - requests on what optimize_subgraph() produced (subgraphs.c): compiled sub-graphs
 * serialized and loaded back, profiling contexts and their sink, and sequences: steps of a
 * loaded network bound once to their buffers and run by one request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../struct_members.h"
#include "host.h"

/* ---- compiled sub-graphs and profiling contexts ------------------------------------------ */

void dbk_set_profiling(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_COMPILED);
    uint64_t profiling = dbk_take_u64(r);
    dbk_object *context = NULL;
    BackendCompiledSubgraph *compiled;
    (void)fd;
    if (object == NULL || r->problem != NULL ||
        (profiling != 0 && (context = dbk_object_get(profiling, DBK_KIND_PROFILING)) == NULL)) {
        dbk_refuse(r, "the request names no live compiled sub-graph or profiling context");
        return;
    }
    compiled = object->pointer;
    if (!dbk_compiled_has_set_profiling_context(compiled)) {
        dbk_put_u32(&reply->payload, 0);
        return;
    }
    dbk_note("set_profiling_context");
    compiled->set_profiling_context(compiled, context == NULL ? NULL : context->pointer);
    dbk_object_depend(object, 0, profiling);
    dbk_put_u32(&reply->payload, 1);
}

void dbk_serialize(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_COMPILED);
    uint64_t segment = dbk_take_u64(r), offset = dbk_take_u64(r), capacity = dbk_take_u64(r);
    uint64_t size = 0;
    void *buffer = NULL;
    char message[DBK_HOST_MESSAGE_BYTES];
    BackendCompiledSubgraph *compiled;
    (void)fd;
    if (object == NULL || r->problem != NULL) {
        dbk_refuse(r, "the request names no live compiled sub-graph");
        return;
    }
    compiled = object->pointer;
    if (!dbk_compiled_has_serialize(compiled)) {
        dbk_reply_problem(reply, DBK_OUTCOME_ABSENT, "the compiled sub-graph has no serialize");
        return;
    }
    if (capacity != 0 && (buffer = dbk_segment_span(r, segment, offset, capacity, 1)) == NULL)
        return;
    dbk_clear_message(message);
    dbk_note("serialize");
    dbk_put_status(reply, compiled->serialize(compiled, buffer, capacity, &size, message,
                                          DBK_HOST_MESSAGE_BYTES), message);
    dbk_put_u64(&reply->payload, size);
}

void dbk_load_compiled(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_INSTANCE);
    uint64_t segment = dbk_take_u64(r), offset = dbk_take_u64(r), size = dbk_take_u64(r);
    const void *data = NULL;
    BackendCompiledSubgraph *created = NULL;
    BackendInstance *instance;
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (object == NULL || r->problem != NULL) {
        dbk_refuse(r, "the request names no live instance");
        return;
    }
    instance = object->pointer;
    if (!(dbk_instance_members(instance, 1) & DBK_MEMBER_LOAD_COMPILED_SUBGRAPH)) {
        dbk_reply_problem(reply, DBK_OUTCOME_ABSENT, "the instance lacks load_compiled_subgraph");
        return;
    }
    if (size != 0 && (data = dbk_segment_span(r, segment, offset, size, 0)) == NULL)
        return;
    dbk_clear_message(message);
    dbk_note("load_compiled_subgraph");
    dbk_put_status(reply, instance->load_compiled_subgraph(instance, data, size, &created, message,
                                                       DBK_HOST_MESSAGE_BYTES), message);
    if (reply->value != BACKEND_STATUS_OK)
        return;
    reply->handle = dbk_adopt_compiled(created, 0);
    if (reply->handle == 0)
        dbk_reply_problem(reply, DBK_OUTCOME_MALFORMED,
                          "load_compiled_subgraph returned a malformed compiled sub-graph");
    else
        dbk_put_u32(&reply->payload, dbk_compiled_members(created));
}

void dbk_create_profiling(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_INSTANCE);
    BackendProfilingContext *created = NULL;
    BackendInstance *instance;
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (object == NULL) {
        dbk_refuse(r, "the request names no live instance");
        return;
    }
    instance = object->pointer;
    if (!(dbk_instance_members(instance, 1) & DBK_MEMBER_CREATE_PROFILING_CONTEXT)) {
        dbk_reply_problem(reply, DBK_OUTCOME_ABSENT, "the instance lacks create_profiling_context");
        return;
    }
    dbk_clear_message(message);
    dbk_note("create_profiling_context");
    dbk_put_status(reply, instance->create_profiling_context(instance, &created, message,
                                                         DBK_HOST_MESSAGE_BYTES), message);
    if (reply->value != BACKEND_STATUS_OK || created == NULL)
        return;
    if (created->struct_size < BACKEND_PROFILING_CONTEXT_SIZE_1_2 || created->enable == NULL ||
        created->collect == NULL || created->destroy == NULL) {
        if (created->struct_size >= BACKEND_PROFILING_CONTEXT_SIZE_1_2 && created->destroy != NULL)
            created->destroy(created);
        dbk_reply_problem(reply, DBK_OUTCOME_MALFORMED,
                          "create_profiling_context returned a malformed context");
        return;
    }
    reply->handle = dbk_object_add(DBK_KIND_PROFILING, created);
    if (reply->handle == 0) {
        created->destroy(created);
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY, "the host's object table is full");
    }
}

void dbk_profiling_enable(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_PROFILING);
    BackendProfilingContext *context;
    (void)reply, (void)fd;
    if (object == NULL) {
        dbk_refuse(r, "the request names no live profiling context");
        return;
    }
    context = object->pointer;
    dbk_note("enable");
    context->enable(context, request->value ? 1 : 0);
}

static struct sink {
    BackendProfilingSink sink;
    dbk_writer *records;
    uint32_t count;
} sink;

enum { MAX_PROFILE_RECORDS = 1 << 20 };

static void sink_event(BackendProfilingSink *self, const char *name, const uint64_t *layer_ids,
                       uint32_t num_layer_ids, int64_t start_ns, int64_t end_ns)
{
    size_t length = name == NULL ? 0 : strnlen(name, DBK_HOST_MAX_EVENT_NAME);
    uint32_t ids = num_layer_ids < DBK_HOST_MAX_EVENT_IDS ? num_layer_ids : DBK_HOST_MAX_EVENT_IDS;
    int null_ids = num_layer_ids != 0 && layer_ids == NULL;
    (void)self;
    if (sink.records == NULL || sink.count >= MAX_PROFILE_RECORDS ||
        !dbk_fits(sink.records, 36 + length + (null_ids ? 0 : (size_t)ids * 8)))
        return;
    dbk_put_u32(sink.records, 0);
    dbk_put_string(sink.records, name, length);
    dbk_put_u32(sink.records, (uint32_t)null_ids);
    dbk_put_u32(sink.records, null_ids ? 0 : ids);
    if (!null_ids)
        dbk_put(sink.records, layer_ids, (size_t)ids * sizeof *layer_ids);
    dbk_put_i64(sink.records, start_ns);
    dbk_put_i64(sink.records, end_ns);
    sink.count++;
}

static void sink_counter(BackendProfilingSink *self, const char *name, double value)
{
    size_t length = name == NULL ? 0 : strnlen(name, DBK_HOST_MAX_EVENT_NAME);
    (void)self;
    if (sink.records == NULL || sink.count >= MAX_PROFILE_RECORDS ||
        !dbk_fits(sink.records, 16 + length))
        return;
    dbk_put_u32(sink.records, 1);
    dbk_put_string(sink.records, name, length);
    dbk_put_f64(sink.records, value);
    sink.count++;
}

void dbk_profiling_collect(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_PROFILING);
    BackendProfilingContext *context;
    dbk_writer records = {NULL, 0, 0, 0};
    (void)fd;
    if (object == NULL) {
        dbk_refuse(r, "the request names no live profiling context");
        return;
    }
    context = object->pointer;
    memset(&sink, 0, sizeof sink);
    sink.sink.struct_size = sizeof sink.sink;
    sink.sink.event = sink_event;
    sink.sink.counter = sink_counter;
    sink.records = &records;
    dbk_note("collect");
    context->collect(context, &sink.sink);
    sink.records = NULL;
    dbk_put_u32(&reply->payload, sink.count);
    dbk_put(&reply->payload, records.data, records.size);
    free(records.data);
}

/* ---- sequences --------------------------------------------------------------------------- */

void dbk_add_sequence(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    uint32_t count = dbk_take_count(r, 16), total = 0, step_count;
    dbk_sequence *sequence = calloc(1, sizeof *sequence);
    const unsigned char *start = r->at;
    size_t left = r->left;
    uint64_t handle;
    (void)request, (void)fd;
    if (sequence == NULL || r->problem != NULL || count == 0) {
        free(sequence);
        dbk_refuse(r, "a sequence of no steps, or no memory for one");
        return;
    }
    /* First pass: how many buffers, bounded by what the request holds. */
    for (uint32_t i = 0; i < count && r->problem == NULL; i++) {
        dbk_take_u64(r);
        step_count = dbk_take_u32(r);
        step_count += dbk_take_u32(r);
        if (step_count > r->left / sizeof(dbk_wire_buffer)) {
            dbk_refuse(r, "a step's buffers run past the request");
            break;
        }
        dbk_take(r, (size_t)step_count * sizeof(dbk_wire_buffer));
        total += step_count;
    }
    if (r->problem == NULL) {
        sequence->steps = calloc(count, sizeof *sequence->steps);
        sequence->buffers = calloc(total ? total : 1, sizeof *sequence->buffers);
        sequence->keep = calloc((size_t)count + total, sizeof *sequence->keep);
        sequence->times = calloc(2 * (size_t)count, sizeof *sequence->times);
        if (!sequence->steps || !sequence->buffers || !sequence->keep || !sequence->times)
            dbk_refuse(r, "no memory for the sequence");
    }
    r->at = start;
    r->left = r->problem == NULL ? left : 0;
    total = 0;
    for (uint32_t i = 0; i < count && r->problem == NULL; i++) {
        dbk_step *step = &sequence->steps[i];
        uint64_t object_handle = dbk_take_u64(r);
        dbk_object *object = dbk_object_get(object_handle, DBK_KIND_FREE);
        step->num_inputs = dbk_take_u32(r);
        step->num_outputs = dbk_take_u32(r);
        if (object == NULL || (object->kind != DBK_KIND_WORKLOAD &&
                               object->kind != DBK_KIND_COMPILED)) {
            dbk_refuse(r, "a step names no live workload or compiled sub-graph");
            break;
        }
        step->kind = object->kind;
        step->object = object->pointer;
        step->buffers = sequence->buffers + total;
        if (dbk_read_buffers(r, step->num_inputs, step->buffers, dbk_loaded.minor, 0) != 0 ||
            dbk_read_buffers(r, step->num_outputs, step->buffers + step->num_inputs,
                             dbk_loaded.minor, 1) != 0)
            break;
        total += step->num_inputs + step->num_outputs;
        sequence->num_steps = i + 1;
    }
    if (r->problem == NULL) {
        /* Everything a step uses stays alive while the sequence does. */
        const unsigned char *again = start;
        for (uint32_t i = 0; i < count; i++) {
            uint64_t object_handle;
            uint32_t n_in, n_out;
            memcpy(&object_handle, again, 8);
            memcpy(&n_in, again + 8, 4);
            memcpy(&n_out, again + 12, 4);
            again += 16;
            dbk_object_keep(object_handle);
            sequence->keep[sequence->num_keep++] = object_handle;
            for (uint32_t b = 0; b < n_in + n_out; b++, again += sizeof(dbk_wire_buffer)) {
                uint64_t segment;
                memcpy(&segment, again, 8);
                dbk_object_keep(segment);
                sequence->keep[sequence->num_keep++] = segment;
            }
        }
        handle = dbk_object_add(DBK_KIND_SEQUENCE, sequence);
        if (handle != 0) {
            reply->handle = handle;
            return;
        }
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY, "the host's object table is full");
        for (uint32_t i = 0; i < sequence->num_keep; i++)
            dbk_object_release(sequence->keep[i]);
    }
    free(sequence->steps);
    free(sequence->buffers);
    free(sequence->keep);
    free(sequence->times);
    free(sequence);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void dbk_run_sequence(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_SEQUENCE);
    dbk_sequence *sequence;
    char message[DBK_HOST_MESSAGE_BYTES];
    BackendStatus status = BACKEND_STATUS_OK;
    uint32_t failed = DBK_NO_STEP, i;
    int timing = request->value & DBK_RUN_TIMING;
    (void)fd;
    if (object == NULL) {
        dbk_refuse(r, "the request names no live sequence");
        return;
    }
    sequence = object->pointer;
    dbk_clear_message(message);
    for (i = 0; i < sequence->num_steps; i++) {
        dbk_step *step = &sequence->steps[i];
        if (timing)
            sequence->times[2 * i] = now_ns();
        if (step->kind == DBK_KIND_WORKLOAD) {
            BackendWorkload *workload = step->object;
            dbk_note("execute");
            status = workload->execute(workload, step->buffers, step->num_inputs,
                                       step->buffers + step->num_inputs, step->num_outputs,
                                       message, DBK_HOST_MESSAGE_BYTES);
        } else {
            BackendCompiledSubgraph *compiled = step->object;
            dbk_note("execute (compiled sub-graph)");
            status = compiled->execute(compiled, step->buffers, step->num_inputs,
                                       step->buffers + step->num_inputs, step->num_outputs,
                                       message, DBK_HOST_MESSAGE_BYTES);
        }
        if (timing)
            sequence->times[2 * i + 1] = now_ns();
        if (status != BACKEND_STATUS_OK) {
            failed = i;
            break;
        }
    }
    dbk_put_status(reply, status, message);
    dbk_put_u32(&reply->payload, failed);
    dbk_put_u32(&reply->payload, timing ? sequence->num_steps : 0);
    if (timing)
        dbk_put(&reply->payload, sequence->times, 2 * (size_t)sequence->num_steps * 8);
}
