# Cython mirror of protocol.h (the backend host's channel): declarations only.
from libc.stdint cimport int32_t, uint32_t, uint64_t


cdef extern from "protocol.h" nogil:
    enum:
        DBK_HOST_PROTOCOL_VERSION
        DBK_HOST_CHANNEL_FD
        DBK_HOST_STATUS_FD
        DBK_HOST_STATUS_BYTES
        DBK_HOST_NOTE_BYTES
        DBK_HOST_MAX_FRAME
        DBK_HOST_MESSAGE_BYTES
        DBK_HOST_SPIN_NS

    ctypedef struct dbk_frame:
        uint32_t size
        uint32_t op
        uint64_t handle
        int32_t value
        uint32_t outcome

    enum:
        DBK_OUTCOME_OK
        DBK_OUTCOME_REFUSED
        DBK_OUTCOME_MALFORMED
        DBK_OUTCOME_ABSENT
        DBK_OUTCOME_NO_MEMORY

    enum:
        DBK_OP_READY
        DBK_OP_PING
        DBK_OP_ADD_SEGMENT
        DBK_OP_DESTROY
        DBK_OP_SHUTDOWN
        DBK_OP_CREATE_INSTANCE
        DBK_OP_GET_ID
        DBK_OP_CAPABILITIES
        DBK_OP_LAYER_SUPPORT
        DBK_OP_CREATE_MEMORY_MANAGER
        DBK_OP_CREATE_WORKLOAD_FACTORY
        DBK_OP_CREATE_CONTEXT
        DBK_OP_CUSTOM_ALLOCATOR
        DBK_OP_AVAILABILITY
        DBK_OP_ACQUIRE
        DBK_OP_RELEASE
        DBK_OP_CONTEXT_EVENT
        DBK_OP_CREATE_WORKLOAD
        DBK_OP_EXECUTE
        DBK_OP_OPTIMIZE
        DBK_OP_SET_PROFILING
        DBK_OP_SERIALIZE
        DBK_OP_LOAD_COMPILED
        DBK_OP_CREATE_PROFILING
        DBK_OP_PROFILING_ENABLE
        DBK_OP_PROFILING_COLLECT
        DBK_OP_ADD_SEQUENCE
        DBK_OP_RUN_SEQUENCE
        DBK_OP_COUNT

    enum:
        DBK_COMPILED_SERIALIZE
        DBK_COMPILED_SET_PROFILING
        DBK_SEGMENT_WRITABLE
        DBK_RUN_TIMING
        DBK_NO_STEP

    enum:
        DBK_EVENT_BEFORE_LOAD
        DBK_EVENT_AFTER_LOAD
        DBK_EVENT_BEFORE_UNLOAD
        DBK_EVENT_AFTER_UNLOAD

    ctypedef struct dbk_wire_buffer:
        uint64_t segment
        uint64_t offset
        uint64_t size
        uint32_t flags
        uint32_t reserved
