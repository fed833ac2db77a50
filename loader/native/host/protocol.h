/* protocol.h - what the runtime and a backend host process say to each other.
 *
 * The backend host (dynamic-backend-host, loader/native/host/) serves one backend library to
 * one runtime over a channel: a Unix stream socket, inherited as DBK_HOST_CHANNEL_FD. Both
 * sides run on the same machine, so values are in its native byte order and layout; every
 * field is read with memcpy (nothing is assumed aligned).
 *
 * FRAMES
 *
 *   Every message is one frame: a dbk_frame header followed by `size - sizeof(dbk_frame)` bytes
 *   of payload, at most DBK_HOST_MAX_FRAME in all. The runtime sends a request and waits for
 *   its reply, one at a time; DESTROY alone gets no reply. A file descriptor travels only with
 *   ADD_SEGMENT, as SCM_RIGHTS ancillary data on the frame's first byte (a read may deliver it
 *   with an earlier frame's bytes: each ADD_SEGMENT claims the oldest one received).
 *
 *   In a payload, integers are u32/u64/i32/i64/f64 as named; a string is a u32 length and that
 *   many bytes (no NUL); a layer is DBK_LAYER below; a buffer is a dbk_wire_buffer.
 *
 * TRUST
 *
 *   The host checks every frame like untrusted input: sizes, counts, handles (kind and
 *   generation), offsets and sizes inside the segments they name, overflow-checked, before
 *   anything is read or allocated. A frame that fails a check is answered with
 *   DBK_OUTCOME_REFUSED and a message; the backend is never called with it.
 *
 * TENSORS
 *
 *   Tensor data never travels in frames. It lives in segments: memfd files the runtime creates,
 *   seals against shrinking and growing (and writing, for constants) and hands over with
 *   ADD_SEGMENT. Both processes map them; a buffer names (segment, offset, size).
 *
 * OBJECTS
 *
 *   Every object the host keeps for the runtime (backend instances and what they create,
 *   segments, sequences) has a handle: (generation << 32) | (slot + 1), never 0. An object that
 *   another needs (a workload's memory manager, a compiled sub-graph's profiling context and
 *   constants, a sequence's steps and segments) stays alive until that one is destroyed too,
 *   whatever order the runtime destroys them in.
 */
#ifndef DBK_HOST_PROTOCOL_H
#define DBK_HOST_PROTOCOL_H

#include <stdint.h>

#define DBK_HOST_PROTOCOL_VERSION 1

/* The descriptors the host starts with: 0 /dev/null, 1 and 2 the pipe its output goes to,
   then these two. Every other descriptor is closed at start. */
#define DBK_HOST_CHANNEL_FD 3
#define DBK_HOST_STATUS_FD 4        /* a memfd of DBK_HOST_STATUS_BYTES: the call in progress */

#define DBK_HOST_STATUS_BYTES 4096
#define DBK_HOST_NOTE_BYTES 128     /* the note at the start of the status page, NUL-terminated */

#define DBK_HOST_MAX_FRAME (64u << 20)
#define DBK_HOST_MAX_OBJECTS (1u << 20)
#define DBK_HOST_MESSAGE_BYTES 1024 /* a backend's message buffer, as in process */
#define DBK_HOST_MAX_DESCRIPTOR 1024 /* bytes of a layer's descriptor struct */
#define DBK_HOST_MAX_STRING 4096    /* a name or reason the host reads from the backend */
#define DBK_HOST_MAX_CAPABILITIES 4096
#define DBK_HOST_MAX_EVENT_NAME 256
#define DBK_HOST_MAX_EVENT_IDS (1u << 16)

/* How long either side polls the channel for the other's next frame before it sleeps in the
   kernel, when the last wait was shorter than this: waking a sleeping process costs 10-30 us
   on an idle virtual machine, more than a small request's whole work. A side whose last wait
   was longer sleeps at once, so a slow call or an idle runtime costs no CPU. */
#define DBK_HOST_SPIN_NS 60000

typedef struct dbk_frame {
    uint32_t size;                  /* bytes of the frame, this header included */
    uint32_t op;                    /* DBK_OP_*: the request, or the request a reply answers */
    uint64_t handle;                /* request: the object called; reply: the object created */
    int32_t value;                  /* request: an argument; reply: the backend's status */
    uint32_t outcome;               /* reply: DBK_OUTCOME_*; request: 0 */
} dbk_frame;

/* How the host judged a request (reply.outcome). */
enum {
    DBK_OUTCOME_OK = 0,             /* the backend was called; value is its status */
    DBK_OUTCOME_REFUSED = 1,        /* the request failed the host's checks: string */
    DBK_OUTCOME_MALFORMED = 2,      /* the backend returned an unusable object: string */
    DBK_OUTCOME_ABSENT = 3,         /* the instance lacks the member the request needs */
    DBK_OUTCOME_NO_MEMORY = 4,      /* the host could not allocate what the call needs */
};

/* Requests. "-> " is the reply's payload when its outcome is OK. */
enum {
    /* host -> runtime, once, before any request: OK, or REFUSED with string (why the host will
       not serve the file). */
    DBK_OP_READY = 1,
    /* -> nothing. */
    DBK_OP_PING = 2,
    /* value: DBK_SEGMENT_*; u64 size; the memfd attached. -> handle. */
    DBK_OP_ADD_SEGMENT = 3,
    /* u32 count, u64 handle[count]; no reply. Unknown handles are ignored. */
    DBK_OP_DESTROY = 4,
    /* -> nothing; then the host destroys every object and exits with status 0. */
    DBK_OP_SHUTDOWN = 5,
    /* -> handle, u32 struct_size, u32 covered members, u32 present members (DBK_MEMBER_*
       bits); MALFORMED with string: the instance's problem. */
    DBK_OP_CREATE_INSTANCE = 6,
    /* instance -> u32 is_null, string. */
    DBK_OP_GET_ID = 7,
    /* instance -> (status OK) u32 count, count * (u32 value, u32 has_name, string name);
       MALFORMED with string. */
    DBK_OP_CAPABILITIES = 8,
    /* instance, layer -> string message. */
    DBK_OP_LAYER_SUPPORT = 9,
    /* instance -> handle, string message. */
    DBK_OP_CREATE_MEMORY_MANAGER = 10,
    /* instance, u64 memory manager (0: none) -> handle, string message. */
    DBK_OP_CREATE_WORKLOAD_FACTORY = 11,
    /* instance -> handle (0: the backend wants no notifications), string message. */
    DBK_OP_CREATE_CONTEXT = 12,
    /* instance -> string message. */
    DBK_OP_CUSTOM_ALLOCATOR = 13,
    /* instance -> string message. */
    DBK_OP_AVAILABILITY = 14,
    /* memory manager -> string message. */
    DBK_OP_ACQUIRE = 15,
    DBK_OP_RELEASE = 16,
    /* context, value: DBK_EVENT_*; u64 network id -> string message. */
    DBK_OP_CONTEXT_EVENT = 17,
    /* workload factory, layer -> handle, string message. */
    DBK_OP_CREATE_WORKLOAD = 18,
    /* workload or compiled sub-graph; u32 num_inputs, u32 num_outputs, buffers -> string. */
    DBK_OP_EXECUTE = 19,
    /* instance, subgraph (DBK_SUBGRAPH) -> string message, views (DBK_VIEWS). */
    DBK_OP_OPTIMIZE = 20,
    /* compiled sub-graph, u64 profiling context (0: none) -> u32 accepted. */
    DBK_OP_SET_PROFILING = 21,
    /* compiled sub-graph; u64 segment, u64 offset, u64 capacity (0: only the size)
       -> string message, u64 size. */
    DBK_OP_SERIALIZE = 22,
    /* instance; u64 segment, u64 offset, u64 size -> handle, string message, u32 members
       (DBK_COMPILED_*). */
    DBK_OP_LOAD_COMPILED = 23,
    /* instance -> handle (0: none), string message. */
    DBK_OP_CREATE_PROFILING = 24,
    /* profiling context, value: enabled -> nothing. */
    DBK_OP_PROFILING_ENABLE = 25,
    /* profiling context -> u32 count, records (DBK_RECORDS). */
    DBK_OP_PROFILING_COLLECT = 26,
    /* u32 count, count * (u64 workload or compiled sub-graph, u32 num_inputs, u32 num_outputs,
       buffers) -> handle. */
    DBK_OP_ADD_SEQUENCE = 27,
    /* sequence, value: DBK_RUN_* -> string message, u32 failed step (DBK_NO_STEP: none),
       u32 count, count * (i64 start_ns, i64 end_ns). */
    DBK_OP_RUN_SEQUENCE = 28,
    DBK_OP_COUNT
};

/* The optional members a compiled sub-graph has. */
#define DBK_COMPILED_SERIALIZE 1
#define DBK_COMPILED_SET_PROFILING 2

#define DBK_SEGMENT_WRITABLE 1      /* mapped read-write in the host; otherwise read-only */
#define DBK_RUN_TIMING 1            /* RUN_SEQUENCE: time each step (CLOCK_MONOTONIC) */
#define DBK_NO_STEP 0xFFFFFFFFu

/* BackendContext notifications, in the order of its members. */
enum { DBK_EVENT_BEFORE_LOAD, DBK_EVENT_AFTER_LOAD, DBK_EVENT_BEFORE_UNLOAD,
       DBK_EVENT_AFTER_UNLOAD };

/* Members of BackendInstance beyond the 1.0 header, in loader/_features.pxi's order. */
enum {
    DBK_MEMBER_GET_CAPABILITIES = 1u << 0,
    DBK_MEMBER_IS_LAYER_SUPPORTED = 1u << 1,
    DBK_MEMBER_CREATE_MEMORY_MANAGER = 1u << 2,
    DBK_MEMBER_CREATE_WORKLOAD_FACTORY = 1u << 3,
    DBK_MEMBER_CREATE_BACKEND_CONTEXT = 1u << 4,
    DBK_MEMBER_USE_CUSTOM_ALLOCATOR = 1u << 5,
    DBK_MEMBER_OPTIMIZE_SUBGRAPH = 1u << 6,
    DBK_MEMBER_IS_AVAILABLE = 1u << 7,
    DBK_MEMBER_CREATE_PROFILING_CONTEXT = 1u << 8,
    DBK_MEMBER_LOAD_COMPILED_SUBGRAPH = 1u << 9,
};

/* A buffer of an EXECUTE or a sequence step: `size` bytes at `offset` of `segment`. */
typedef struct dbk_wire_buffer {
    uint64_t segment;
    uint64_t offset;
    uint64_t size;
    uint32_t flags;                 /* BACKEND_BUFFER_* */
    uint32_t reserved;
} dbk_wire_buffer;

/*
 * DBK_LAYER: u32 layer_type, u32 num_inputs, u32 num_outputs, u32 descriptor_bytes (0: no
 *   descriptor; else at least 4 and at most DBK_HOST_MAX_DESCRIPTOR, and the descriptor's own
 *   struct_size), (num_inputs + num_outputs) BackendTensorInfo as the header lays them out
 *   (struct_size == sizeof, num_dimensions <= BACKEND_MAX_DIMENSIONS), the descriptor's bytes.
 *
 * DBK_SUBGRAPH: u64 constants segment (0: none); u32 num_tensors, each: u32 kind,
 *   BackendTensorInfo, u64 offset, u64 size (CONSTANT: where its data lies in the constants
 *   segment); u32 num_layers, each: u64 id, DBK_LAYER, u32 indices[num_inputs],
 *   u32 indices[num_outputs] (tensor indices); u32 num_inputs, u32 indices; u32 num_outputs,
 *   u32 indices.
 *
 * DBK_VIEWS: u32 count, each substitution: u32 n, u64 layer ids[n], u32 n, u32 inputs[n],
 *   u32 n, u32 outputs[n], u64 compiled (0: none or malformed), u32 its members
 *   (DBK_COMPILED_*); u32 count, each failed layer:
 *   u64 id, string reason; u32 count, u64 untouched ids; u32 count, each problem: string.
 *
 * DBK_RECORDS: each: u32 kind (0 event, 1 counter), string name; an event: u32 ids_null,
 *   u32 n, u64 ids[n], i64 start_ns, i64 end_ns; a counter: f64 value.
 */

#endif
