# Cython mirror of abi/backend_api.h: declarations only, named exactly as in
# the header. Logic lives in loader/_core.pyx.
from libc.stdint cimport uint32_t


cdef extern from "backend_api.h" nogil:
    enum:
        BACKEND_API_VERSION_MAJOR
        BACKEND_API_VERSION_MINOR
        BACKEND_ID_MAX_LENGTH

    cdef struct BackendInstance:
        uint32_t struct_size
        uint32_t api_major
        uint32_t api_minor
        const char *(*get_id)(const BackendInstance *self)
        void (*destroy)(BackendInstance *self)

    const size_t BACKEND_INSTANCE_SIZE_1_0

    ctypedef const char *(*GetBackendIdFunction)()
    ctypedef void (*GetVersionFunction)(uint32_t *major, uint32_t *minor)
    ctypedef void *(*BackendFactoryFunction)()
