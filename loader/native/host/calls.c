/* calls.c - requests about backend instances and the objects of Backend API 1.1 (memory
 * managers, workload factories, workloads, contexts), and the table of every request's
 * handler. Each checks its object and arguments, calls the backend once, and checks what the
 * backend returned exactly as the loader does in process (loader/_backend.pxi,
 * loader/_backend_objects.pxi), so that the runtime raises the same errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../struct_members.h"
#include "host.h"

dbk_library dbk_loaded;

void dbk_clear_message(char *message)
{
    message[0] = 0;
    message[DBK_HOST_MESSAGE_BYTES - 1] = 0;
}

/* The backend's status and its message (empty when OK), the reply of most requests. */
void dbk_put_status(dbk_reply *reply, BackendStatus status, char *message)
{
    reply->value = status;
    if (status == BACKEND_STATUS_OK)
        message[0] = 0;
    dbk_put_message(&reply->payload, message);
}

static void *object_of(dbk_reader *r, uint64_t handle, uint32_t kind)
{
    dbk_object *object = dbk_object_get(handle, kind);
    if (object == NULL) {
        dbk_refuse(r, "the request names no live object of its kind");
        return NULL;
    }
    return object->pointer;
}

/* ---- instances --------------------------------------------------------------------------- */

const char *dbk_instance_problem(BackendInstance *instance, char *text)
{
    const char *id;
    size_t expected = strlen(dbk_loaded.backend_id);
    if (instance == NULL)
        return "BackendFactory returned NULL";
    if (instance->struct_size < BACKEND_INSTANCE_SIZE_1_0) {
        snprintf(text, DBK_HOST_MESSAGE_BYTES,
                 "struct_size is %u, smaller than the instance header (%zu)",
                 (unsigned)instance->struct_size, (size_t)BACKEND_INSTANCE_SIZE_1_0);
        return text;
    }
    if (instance->api_major != dbk_loaded.major || instance->api_minor != dbk_loaded.minor) {
        snprintf(text, DBK_HOST_MESSAGE_BYTES,
                 "instance declares version %u.%u, GetVersion reported %u.%u",
                 (unsigned)instance->api_major, (unsigned)instance->api_minor,
                 (unsigned)dbk_loaded.major, (unsigned)dbk_loaded.minor);
        return text;
    }
    if (instance->destroy == NULL)
        return "destroy is NULL";
    if (instance->get_id == NULL)
        return "get_id is NULL";
    dbk_note("get_id");
    id = instance->get_id(instance);
    dbk_note("BackendFactory");
    if (id == NULL)
        return "get_id returned NULL";
    if (strnlen(id, BACKEND_ID_MAX_LENGTH + 1) != expected ||
        strcmp(id, dbk_loaded.backend_id) != 0) {
        /* As Python's repr() quotes an id, which holds no space and no backslash-worthy
           character but may hold one kind of quote. */
        int double_quotes = strchr(dbk_loaded.backend_id, '\'') != NULL &&
                            strchr(dbk_loaded.backend_id, '"') == NULL;
        snprintf(text, DBK_HOST_MESSAGE_BYTES,
                 double_quotes ? "get_id returned a different id than GetBackendId (\"%s\")"
                               : "get_id returned a different id than GetBackendId ('%s')",
                 dbk_loaded.backend_id);
        return text;
    }
    return NULL;
}

void dbk_destroy_instance(BackendInstance *instance)
{
    if (instance != NULL && instance->struct_size >= BACKEND_INSTANCE_SIZE_1_0 &&
        instance->destroy != NULL)
        instance->destroy(instance);
}

uint32_t dbk_instance_members(const BackendInstance *p, int present)
{
#define MEMBER(bit, name) \
    ((present ? dbk_has_##name(p) : dbk_covers_##name(p)) ? (uint32_t)(bit) : 0u)
    return MEMBER(DBK_MEMBER_GET_CAPABILITIES, get_capabilities) |
           MEMBER(DBK_MEMBER_IS_LAYER_SUPPORTED, is_layer_supported) |
           MEMBER(DBK_MEMBER_CREATE_MEMORY_MANAGER, create_memory_manager) |
           MEMBER(DBK_MEMBER_CREATE_WORKLOAD_FACTORY, create_workload_factory) |
           MEMBER(DBK_MEMBER_CREATE_BACKEND_CONTEXT, create_backend_context) |
           MEMBER(DBK_MEMBER_USE_CUSTOM_ALLOCATOR, use_custom_allocator) |
           MEMBER(DBK_MEMBER_OPTIMIZE_SUBGRAPH, optimize_subgraph) |
           MEMBER(DBK_MEMBER_IS_AVAILABLE, is_available) |
           MEMBER(DBK_MEMBER_CREATE_PROFILING_CONTEXT, create_profiling_context) |
           MEMBER(DBK_MEMBER_LOAD_COMPILED_SUBGRAPH, load_compiled_subgraph);
#undef MEMBER
}

/* The instance a request names, provided it has `member` (a DBK_MEMBER_* bit, 0: none). */
static BackendInstance *instance_with(dbk_reader *r, dbk_reply *reply, uint64_t handle,
                                      uint32_t member)
{
    BackendInstance *instance = object_of(r, handle, DBK_KIND_INSTANCE);
    if (instance != NULL && member != 0 && !(dbk_instance_members(instance, 1) & member)) {
        dbk_reply_problem(reply, DBK_OUTCOME_ABSENT, "the instance lacks that member");
        return NULL;
    }
    return instance;
}

static void create_instance(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    char text[DBK_HOST_MESSAGE_BYTES];
    BackendInstance *instance;
    const char *problem;
    uint64_t handle;
    (void)request, (void)r, (void)fd;
    dbk_note("BackendFactory");
    instance = dbk_loaded.factory();
    problem = dbk_instance_problem(instance, text);
    if (problem != NULL) {
        dbk_note("destroy (instance)");
        dbk_destroy_instance(instance);
        dbk_reply_problem(reply, DBK_OUTCOME_MALFORMED, problem);
        return;
    }
    handle = dbk_object_add(DBK_KIND_INSTANCE, instance);
    if (handle == 0) {
        dbk_destroy_instance(instance);
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY, "the host's object table is full");
        return;
    }
    reply->handle = handle;
    dbk_put_u32(&reply->payload, instance->struct_size);
    dbk_put_u32(&reply->payload, dbk_instance_members(instance, 0));
    dbk_put_u32(&reply->payload, dbk_instance_members(instance, 1));
}

static void get_id(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle, 0);
    const char *id;
    (void)fd;
    if (instance == NULL)
        return;
    dbk_note("get_id");
    id = instance->get_id(instance);
    dbk_put_u32(&reply->payload, id == NULL);
    if (id == NULL)
        dbk_put_string(&reply->payload, "", 0);
    else
        dbk_put_string(&reply->payload, id, strnlen(id, BACKEND_ID_MAX_LENGTH + 1));
}

static void capabilities(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle,
                                              DBK_MEMBER_GET_CAPABILITIES);
    const BackendCapability *entries = NULL, *entry;
    const char *base;
    uint32_t count = 0;
    char text[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (instance == NULL)
        return;
    dbk_note("get_capabilities");
    reply->value = instance->get_capabilities(instance, &entries, &count);
    if (reply->value != BACKEND_STATUS_OK)
        return;
    if (count > DBK_HOST_MAX_CAPABILITIES) {
        snprintf(text, sizeof text, "get_capabilities reports %u entries (at most %u are accepted)",
                 (unsigned)count, (unsigned)DBK_HOST_MAX_CAPABILITIES);
        dbk_reply_problem(reply, DBK_OUTCOME_MALFORMED, text);
        return;
    }
    if (entries == NULL)
        count = 0;
    dbk_put_u32(&reply->payload, count);
    base = (const char *)entries;
    for (uint32_t i = 0; i < count; i++) {
        entry = (const BackendCapability *)base;
        if (entry->struct_size < BACKEND_CAPABILITY_SIZE_1_1) {
            snprintf(text, sizeof text, "capability %u has struct_size %u", (unsigned)i,
                     (unsigned)entry->struct_size);
            dbk_reply_problem(reply, DBK_OUTCOME_MALFORMED, text);
            return;
        }
        dbk_put_u32(&reply->payload, entry->value);
        dbk_put_u32(&reply->payload, entry->name != NULL);
        if (entry->name != NULL)
            dbk_put_string(&reply->payload, entry->name,
                           strnlen(entry->name, DBK_HOST_MAX_STRING));
        else
            dbk_put_string(&reply->payload, "", 0);
        base += entry->struct_size;
    }
}

static void layer_support(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle,
                                              DBK_MEMBER_IS_LAYER_SUPPORTED);
    char message[DBK_HOST_MESSAGE_BYTES];
    dbk_layer layer;
    (void)fd;
    if (instance == NULL || dbk_read_layer(r, &layer) != 0) {
        if (instance != NULL)
            dbk_free_layer(&layer);
        return;
    }
    dbk_clear_message(message);
    dbk_note("is_layer_supported");
    reply->value = instance->is_layer_supported(instance, &layer.description, message,
                                                DBK_HOST_MESSAGE_BYTES);
    dbk_free_layer(&layer);
    dbk_put_status(reply, reply->value, message);
}

/* Adopt a created object (after the status was OK): its handle in the reply, or MALFORMED. */
static void adopt(dbk_reply *reply, uint32_t kind, void *created, int wellformed,
                  const char *malformed)
{
    uint64_t handle;
    if (!wellformed) {
        dbk_reply_problem(reply, DBK_OUTCOME_MALFORMED, malformed);
        return;
    }
    handle = dbk_object_add(kind, created);
    if (handle == 0) {
        dbk_destroy_backend_object(kind, created);
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY, "the host's object table is full");
        return;
    }
    reply->handle = handle;
}

static void create_memory_manager(const dbk_frame *request, dbk_reader *r, dbk_reply *reply,
                                  int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle,
                                              DBK_MEMBER_CREATE_MEMORY_MANAGER);
    BackendMemoryManager *created = NULL;
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (instance == NULL)
        return;
    dbk_clear_message(message);
    dbk_note("create_memory_manager");
    dbk_put_status(reply, instance->create_memory_manager(instance, &created, message,
                                                      DBK_HOST_MESSAGE_BYTES), message);
    if (reply->value == BACKEND_STATUS_OK)
        adopt(reply, DBK_KIND_MEMORY_MANAGER, created,
              created != NULL && created->struct_size >= BACKEND_MEMORY_MANAGER_SIZE_1_1 &&
                  created->acquire != NULL && created->release != NULL &&
                  created->destroy != NULL,
              "create_memory_manager returned a malformed manager");
}

static void create_workload_factory(const dbk_frame *request, dbk_reader *r, dbk_reply *reply,
                                    int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle,
                                              DBK_MEMBER_CREATE_WORKLOAD_FACTORY);
    BackendWorkloadFactory *created = NULL;
    BackendMemoryManager *manager = NULL;
    uint64_t manager_handle = dbk_take_u64(r);
    char message[DBK_HOST_MESSAGE_BYTES];
    dbk_object *object;
    (void)fd;
    if (instance == NULL || r->problem != NULL)
        return;
    if (manager_handle != 0 &&
        (manager = object_of(r, manager_handle, DBK_KIND_MEMORY_MANAGER)) == NULL)
        return;
    dbk_clear_message(message);
    dbk_note("create_workload_factory");
    dbk_put_status(reply, instance->create_workload_factory(instance, manager, &created, message,
                                                        DBK_HOST_MESSAGE_BYTES), message);
    if (reply->value != BACKEND_STATUS_OK)
        return;
    adopt(reply, DBK_KIND_FACTORY, created,
          created != NULL && created->struct_size >= BACKEND_WORKLOAD_FACTORY_SIZE_1_1 &&
              created->create_workload != NULL && created->destroy != NULL,
          "create_workload_factory returned a malformed factory");
    if (reply->handle != 0 && manager_handle != 0) {
        object = dbk_object_get(reply->handle, DBK_KIND_FACTORY);
        dbk_object_depend(object, 0, manager_handle);
    }
}

static void create_context(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle,
                                              DBK_MEMBER_CREATE_BACKEND_CONTEXT);
    BackendContext *created = NULL;
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (instance == NULL)
        return;
    dbk_clear_message(message);
    dbk_note("create_backend_context");
    dbk_put_status(reply, instance->create_backend_context(instance, &created, message,
                                                       DBK_HOST_MESSAGE_BYTES), message);
    if (reply->value != BACKEND_STATUS_OK || created == NULL)
        return;
    adopt(reply, DBK_KIND_CONTEXT, created,
          created->struct_size >= BACKEND_CONTEXT_SIZE_1_1 && created->destroy != NULL &&
              created->before_load_network != NULL && created->after_load_network != NULL &&
              created->before_unload_network != NULL && created->after_unload_network != NULL,
          "create_backend_context returned a malformed context");
}

/* The allocator offered to backends: static, so it stays valid for as long as any may keep
   it (the loader's own, loader/_backend.pxi, does the same in process). */
static void *allocate(void *user_data, size_t size, size_t alignment)
{
    void *pointer = NULL;
    (void)user_data;
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    return posix_memalign(&pointer, alignment, size) == 0 ? pointer : NULL;
}

static void deallocate(void *user_data, void *pointer)
{
    (void)user_data;
    free(pointer);
}

static const BackendAllocator malloc_allocator = {
    sizeof(BackendAllocator), 0, NULL, allocate, deallocate};

static void custom_allocator(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle,
                                              DBK_MEMBER_USE_CUSTOM_ALLOCATOR);
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (instance == NULL)
        return;
    dbk_clear_message(message);
    dbk_note("use_custom_allocator");
    dbk_put_status(reply, instance->use_custom_allocator(instance, &malloc_allocator, message,
                                                     DBK_HOST_MESSAGE_BYTES), message);
}

static void availability(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    BackendInstance *instance = instance_with(r, reply, request->handle,
                                              DBK_MEMBER_IS_AVAILABLE);
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (instance == NULL)
        return;
    dbk_clear_message(message);
    dbk_note("is_available");
    dbk_put_status(reply, instance->is_available(instance, message, DBK_HOST_MESSAGE_BYTES),
               message);
}

/* ---- memory managers and contexts -------------------------------------------------------- */

static void acquire_or_release(const dbk_frame *request, dbk_reader *r, dbk_reply *reply,
                               int fd)
{
    BackendMemoryManager *manager = object_of(r, request->handle, DBK_KIND_MEMORY_MANAGER);
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (manager == NULL)
        return;
    dbk_clear_message(message);
    if (request->op == DBK_OP_ACQUIRE) {
        dbk_note("acquire");
        dbk_put_status(reply, manager->acquire(manager, message, DBK_HOST_MESSAGE_BYTES), message);
    } else {
        dbk_note("release");
        dbk_put_status(reply, manager->release(manager, message, DBK_HOST_MESSAGE_BYTES), message);
    }
}

static void context_event(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    static const char *const names[] = {"before_load_network", "after_load_network",
                                        "before_unload_network", "after_unload_network"};
    BackendContext *context = object_of(r, request->handle, DBK_KIND_CONTEXT);
    uint64_t network = dbk_take_u64(r);
    char message[DBK_HOST_MESSAGE_BYTES];
    BackendStatus (*notify)(BackendContext *, uint64_t, char *, size_t);
    (void)fd;
    if (context == NULL || r->problem != NULL)
        return;
    switch (request->value) {
    case DBK_EVENT_BEFORE_LOAD: notify = context->before_load_network; break;
    case DBK_EVENT_AFTER_LOAD: notify = context->after_load_network; break;
    case DBK_EVENT_BEFORE_UNLOAD: notify = context->before_unload_network; break;
    case DBK_EVENT_AFTER_UNLOAD: notify = context->after_unload_network; break;
    default: dbk_refuse(r, "no such context event"); return;
    }
    dbk_clear_message(message);
    dbk_note(names[request->value]);
    dbk_put_status(reply, notify(context, network, message, DBK_HOST_MESSAGE_BYTES), message);
}

/* ---- workloads --------------------------------------------------------------------------- */

static void create_workload(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *factory_object = dbk_object_get(request->handle, DBK_KIND_FACTORY);
    BackendWorkloadFactory *factory;
    BackendWorkload *created = NULL;
    char message[DBK_HOST_MESSAGE_BYTES];
    dbk_layer layer;
    (void)fd;
    if (factory_object == NULL) {
        dbk_refuse(r, "the request names no live workload factory");
        return;
    }
    factory = factory_object->pointer;
    if (dbk_read_layer(r, &layer) != 0) {
        dbk_free_layer(&layer);
        return;
    }
    dbk_clear_message(message);
    dbk_note("create_workload");
    dbk_put_status(reply, factory->create_workload(factory, &layer.description, &created, message,
                                               DBK_HOST_MESSAGE_BYTES), message);
    dbk_free_layer(&layer);
    if (reply->value != BACKEND_STATUS_OK)
        return;
    adopt(reply, DBK_KIND_WORKLOAD, created,
          created != NULL && created->struct_size >= BACKEND_WORKLOAD_SIZE_1_1 &&
              created->execute != NULL && created->destroy != NULL,
          "create_workload returned a malformed workload");
    /* The factory's memory manager stays alive until the workload goes too. */
    if (reply->handle != 0 && factory_object->depends[0] != 0)
        dbk_object_depend(dbk_object_get(reply->handle, DBK_KIND_WORKLOAD), 0,
                          factory_object->depends[0]);
}

static void execute(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    dbk_object *object = dbk_object_get(request->handle, DBK_KIND_FREE);
    BackendBuffer buffers[16], *all = buffers;
    uint32_t num_inputs = dbk_take_u32(r), num_outputs = dbk_take_u32(r), total;
    char message[DBK_HOST_MESSAGE_BYTES];
    (void)fd;
    if (object == NULL || (object->kind != DBK_KIND_WORKLOAD && object->kind != DBK_KIND_COMPILED)) {
        dbk_refuse(r, "the request names no live workload or compiled sub-graph");
        return;
    }
    if (r->problem != NULL || num_inputs > r->left / sizeof(dbk_wire_buffer) ||
        num_outputs > r->left / sizeof(dbk_wire_buffer) - num_inputs) {
        dbk_refuse(r, "more buffers than the request holds");
        return;
    }
    total = num_inputs + num_outputs;
    if (total > sizeof buffers / sizeof buffers[0] &&
        (all = calloc(total, sizeof *all)) == NULL) {
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY, "no memory for the buffers");
        return;
    }
    if (dbk_read_buffers(r, num_inputs, all, dbk_loaded.minor, 0) == 0 &&
        dbk_read_buffers(r, num_outputs, all + num_inputs, dbk_loaded.minor, 1) == 0) {
        dbk_clear_message(message);
        if (object->kind == DBK_KIND_WORKLOAD) {
            BackendWorkload *workload = object->pointer;
            dbk_note("execute");
            reply->value = workload->execute(workload, all, num_inputs, all + num_inputs,
                                             num_outputs, message, DBK_HOST_MESSAGE_BYTES);
        } else {
            BackendCompiledSubgraph *compiled = object->pointer;
            dbk_note("execute (compiled sub-graph)");
            reply->value = compiled->execute(compiled, all, num_inputs, all + num_inputs,
                                             num_outputs, message, DBK_HOST_MESSAGE_BYTES);
        }
        dbk_put_status(reply, reply->value, message);
    }
    if (all != buffers)
        free(all);
}

/* ---- the runtime's own requests ---------------------------------------------------------- */

static void ping(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    (void)request, (void)r, (void)reply, (void)fd;
}

static void add_segment(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd)
{
    uint64_t size = dbk_take_u64(r), handle;
    int writable = request->value & DBK_SEGMENT_WRITABLE;
    struct stat status;
    dbk_segment *segment;
    void *base;
    if (r->problem != NULL)
        return;
    if (fd < 0) {
        dbk_refuse(r, "a segment without its descriptor");
        return;
    }
    if (size == 0 || fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) ||
        (uint64_t)status.st_size < size || size > (uint64_t)SIZE_MAX) {
        dbk_refuse(r, "a segment whose file is not at least its size");
        return;
    }
    base = mmap(NULL, (size_t)size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        dbk_refuse(r, "a segment that cannot be mapped");
        return;
    }
    segment = malloc(sizeof *segment);
    handle = segment == NULL ? 0 : dbk_object_add(DBK_KIND_SEGMENT, segment);
    if (handle == 0) {
        free(segment);
        munmap(base, (size_t)size);
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY, "no room for another segment");
        return;
    }
    segment->base = base;
    segment->size = size;
    segment->writable = writable;
    reply->handle = handle;
}

void dbk_destroy_backend_object(uint32_t kind, void *pointer)
{
    switch (kind) {
    case DBK_KIND_MEMORY_MANAGER:
        dbk_note("destroy (memory manager)");
        ((BackendMemoryManager *)pointer)->destroy(pointer);
        break;
    case DBK_KIND_FACTORY:
        dbk_note("destroy (workload factory)");
        ((BackendWorkloadFactory *)pointer)->destroy(pointer);
        break;
    case DBK_KIND_WORKLOAD:
        dbk_note("destroy (workload)");
        ((BackendWorkload *)pointer)->destroy(pointer);
        break;
    case DBK_KIND_CONTEXT:
        dbk_note("destroy (backend context)");
        ((BackendContext *)pointer)->destroy(pointer);
        break;
    case DBK_KIND_COMPILED:
        dbk_note("destroy (compiled sub-graph)");
        ((BackendCompiledSubgraph *)pointer)->destroy(pointer);
        break;
    case DBK_KIND_PROFILING:
        dbk_note("destroy (profiling context)");
        ((BackendProfilingContext *)pointer)->destroy(pointer);
        break;
    default:
        break;
    }
    dbk_note("");
}

const dbk_handler dbk_handlers[DBK_OP_COUNT] = {
    [DBK_OP_PING] = ping,
    [DBK_OP_ADD_SEGMENT] = add_segment,
    [DBK_OP_CREATE_INSTANCE] = create_instance,
    [DBK_OP_GET_ID] = get_id,
    [DBK_OP_CAPABILITIES] = capabilities,
    [DBK_OP_LAYER_SUPPORT] = layer_support,
    [DBK_OP_CREATE_MEMORY_MANAGER] = create_memory_manager,
    [DBK_OP_CREATE_WORKLOAD_FACTORY] = create_workload_factory,
    [DBK_OP_CREATE_CONTEXT] = create_context,
    [DBK_OP_CUSTOM_ALLOCATOR] = custom_allocator,
    [DBK_OP_AVAILABILITY] = availability,
    [DBK_OP_ACQUIRE] = acquire_or_release,
    [DBK_OP_RELEASE] = acquire_or_release,
    [DBK_OP_CONTEXT_EVENT] = context_event,
    [DBK_OP_CREATE_WORKLOAD] = create_workload,
    [DBK_OP_EXECUTE] = execute,
    [DBK_OP_OPTIMIZE] = dbk_optimize,
    [DBK_OP_SET_PROFILING] = dbk_set_profiling,
    [DBK_OP_SERIALIZE] = dbk_serialize,
    [DBK_OP_LOAD_COMPILED] = dbk_load_compiled,
    [DBK_OP_CREATE_PROFILING] = dbk_create_profiling,
    [DBK_OP_PROFILING_ENABLE] = dbk_profiling_enable,
    [DBK_OP_PROFILING_COLLECT] = dbk_profiling_collect,
    [DBK_OP_ADD_SEQUENCE] = dbk_add_sequence,
    [DBK_OP_RUN_SEQUENCE] = dbk_run_sequence,
};
