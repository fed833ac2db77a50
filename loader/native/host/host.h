/* host.h - the parts of the backend host (dynamic-backend-host) and what they share.
 *
 *   main.c        start-up: containment (parent death, descriptors, process limits), loading
 *                 the library with the loader's checks, then the one loop over requests.
 *   wire.c        frames on the channel; reading untrusted payloads, writing replies; layers.
 *   objects.c     the handle table: objects, what each keeps alive, segments, the call note.
 *   calls.c       requests about instances, memory managers, factories, workloads, contexts.
 *   subgraphs.c   a sub-graph offered to the optimizer and the views the backend records.
 *   compiled.c    compiled sub-graphs (serialized, loaded back), profiling contexts and their
 *                 sink, sequences of a loaded network's steps.
 */
#ifndef DBK_HOST_H
#define DBK_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "backend_api.h"
#include "protocol.h"

/* ---- wire.c ------------------------------------------------------------------------------ */

/* A payload being read. Each take_* returns 0 (or NULL) once anything was missing, and the
   first problem stays in `problem`. */
typedef struct dbk_reader {
    const unsigned char *at;
    size_t left;
    const char *problem;
} dbk_reader;

uint32_t dbk_take_u32(dbk_reader *r);
uint64_t dbk_take_u64(dbk_reader *r);
const void *dbk_take(dbk_reader *r, size_t bytes);
/* A count of items of `item_bytes` each that must all be in the payload: checked before use. */
uint32_t dbk_take_count(dbk_reader *r, size_t item_bytes);
void dbk_refuse(dbk_reader *r, const char *problem);

/* A reply being written; `failed` once an allocation failed or DBK_HOST_MAX_FRAME was hit. */
typedef struct dbk_writer {
    unsigned char *data;
    size_t size, capacity;
    int failed;
} dbk_writer;

void dbk_put(dbk_writer *w, const void *data, size_t bytes);
void dbk_put_u32(dbk_writer *w, uint32_t value);
void dbk_put_u64(dbk_writer *w, uint64_t value);
void dbk_put_i64(dbk_writer *w, int64_t value);
void dbk_put_f64(dbk_writer *w, double value);
void dbk_put_string(dbk_writer *w, const char *text, size_t length);
/* A backend's message buffer (DBK_HOST_MESSAGE_BYTES, maybe unterminated) as a string. */
void dbk_put_message(dbk_writer *w, char *message);
/* Whether `bytes` more would still fit in a frame. */
int dbk_fits(const dbk_writer *w, size_t bytes);

/* The reply to the request in progress. */
typedef struct dbk_reply {
    dbk_writer payload;
    uint64_t handle;
    int32_t value;
    uint32_t outcome;
} dbk_reply;

/* A refusal or a malformed object: the outcome and its message, replacing any payload. */
void dbk_reply_problem(dbk_reply *reply, uint32_t outcome, const char *text);

enum { DBK_CHANNEL_MAX_FDS = 16 };

/* The channel: frames in from the runtime, replies out. Descriptors arrive in the order their
   frames were sent, but a read may take them with the bytes of an earlier frame: they wait in
   `fds` until the frame that carried one claims it. */
typedef struct dbk_channel {
    int fd;
    unsigned char *buffer;
    size_t used, capacity;
    size_t consumed;              /* bytes of the frame last returned */
    int fds[DBK_CHANNEL_MAX_FDS];
    int num_fds;
    int64_t last_wait_ns;         /* how long the last frame was waited for (see protocol.h) */
} dbk_channel;

/* The next frame: 1 (its header and payload valid until the next call), 0 at end of file, -1
   on a broken stream (message on stderr). */
int dbk_channel_next(dbk_channel *c, dbk_frame *frame, const unsigned char **payload);
/* The oldest descriptor received and not yet claimed, or -1. */
int dbk_channel_take_fd(dbk_channel *c);
int dbk_channel_reply(dbk_channel *c, uint32_t op, dbk_reply *reply);

/* A layer read from a payload, in the form a backend takes. */
typedef struct dbk_layer {
    BackendLayerDescription description;
    BackendTensorInfo *infos;     /* inputs then outputs */
    uint64_t *descriptor;         /* 8-aligned copy of the descriptor's bytes, or NULL */
} dbk_layer;

int dbk_read_layer(dbk_reader *r, dbk_layer *layer);
void dbk_free_layer(dbk_layer *layer);

/* ---- objects.c --------------------------------------------------------------------------- */

enum {
    DBK_KIND_FREE,
    DBK_KIND_INSTANCE,
    DBK_KIND_MEMORY_MANAGER,
    DBK_KIND_FACTORY,
    DBK_KIND_WORKLOAD,
    DBK_KIND_CONTEXT,
    DBK_KIND_COMPILED,
    DBK_KIND_PROFILING,
    DBK_KIND_SEGMENT,
    DBK_KIND_SEQUENCE,
    DBK_KIND_COUNT
};

typedef struct dbk_segment {
    unsigned char *base;
    uint64_t size;
    int writable;
} dbk_segment;

typedef struct dbk_step {
    uint32_t kind;                /* DBK_KIND_WORKLOAD or DBK_KIND_COMPILED */
    void *object;                 /* BackendWorkload * or BackendCompiledSubgraph * */
    uint32_t num_inputs, num_outputs;
    BackendBuffer *buffers;       /* into the sequence's array */
} dbk_step;

typedef struct dbk_sequence {
    uint32_t num_steps;
    dbk_step *steps;
    BackendBuffer *buffers;
    uint64_t *keep;               /* handles this sequence keeps alive */
    uint32_t num_keep;
    int64_t *times;               /* start, end per step */
} dbk_sequence;

enum { DBK_MAX_DEPENDENCIES = 2 };

typedef struct dbk_object {
    uint32_t kind;
    uint32_t generation;
    uint32_t refs;                /* 1 while the runtime owns it, plus one per dependent */
    int owned;
    void *pointer;                /* the backend's object, a dbk_segment or a dbk_sequence */
    uint64_t depends[DBK_MAX_DEPENDENCIES];
} dbk_object;

/* A new object owned by the runtime: its handle, or 0 (the table is full or out of memory;
   the caller still owns `pointer`). */
uint64_t dbk_object_add(uint32_t kind, void *pointer);
/* The live object `handle` names if it is of `kind`, else NULL. */
dbk_object *dbk_object_get(uint64_t handle, uint32_t kind);
/* `object` keeps `dependency` (a live handle, or 0 for none) alive in slot `slot`, instead of
   what it kept there before. */
void dbk_object_depend(dbk_object *object, int slot, uint64_t dependency);
void dbk_object_keep(uint64_t handle);
void dbk_object_release(uint64_t handle);
/* The runtime gave the object up (DESTROY); it goes when nothing needs it any more. */
void dbk_object_disown(uint64_t handle);
/* Every object, dependents first (SHUTDOWN). */
void dbk_objects_destroy_all(void);

/* `size` bytes at `offset` of segment `handle`: the address, or NULL with a problem set. */
void *dbk_segment_span(dbk_reader *r, uint64_t handle, uint64_t offset, uint64_t size,
                       int writable);
int dbk_read_buffers(dbk_reader *r, uint32_t count, BackendBuffer *buffers, uint32_t minor,
                     int outputs);

/* The call in progress, in the status page the runtime reads after a crash. */
void dbk_note_init(void *page);
void dbk_note(const char *call);

/* ---- calls.c, subgraphs.c, compiled.c ------------------------------------------------------ */

/* What was loaded at start. */
typedef struct dbk_library {
    const char *path;
    const char *backend_id;
    uint32_t major, minor;
    BackendFactoryFunction factory;
} dbk_library;

extern dbk_library dbk_loaded;

/* The instance's problem (the loader's rule for a well-formed header), or NULL. `text` holds
   what is returned, DBK_HOST_MESSAGE_BYTES long. */
const char *dbk_instance_problem(BackendInstance *instance, char *text);
void dbk_destroy_instance(BackendInstance *instance);
uint32_t dbk_instance_members(const BackendInstance *instance, int present);

/* A message buffer emptied (and always terminated); the backend's status and its message
   (empty when OK), the reply of most requests. */
void dbk_clear_message(char *message);
void dbk_put_status(dbk_reply *reply, BackendStatus status, char *message);
/* A compiled sub-graph the backend handed over: its handle (keeping `keep`, a segment, alive),
   or 0 after destroying it where that is possible (malformed, or no room); the optional members
   it has. */
uint64_t dbk_adopt_compiled(BackendCompiledSubgraph *compiled, uint64_t keep);
uint32_t dbk_compiled_members(const BackendCompiledSubgraph *compiled);

typedef void (*dbk_handler)(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
extern const dbk_handler dbk_handlers[DBK_OP_COUNT];

void dbk_optimize(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_set_profiling(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_serialize(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_load_compiled(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_create_profiling(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_profiling_enable(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_profiling_collect(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_add_sequence(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);
void dbk_run_sequence(const dbk_frame *request, dbk_reader *r, dbk_reply *reply, int fd);

/* Destroy a backend object of `kind` (its destroy member was checked when it was adopted). */
void dbk_destroy_backend_object(uint32_t kind, void *pointer);

#endif
