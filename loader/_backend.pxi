# Backend instances (docs/python-api.md), included into _core.pyx by _library.pxi: the one place a
# backend status becomes an exception, the instance and what it answers, the allocator offered to
# backends. Every object holds its Library, so the library stays mapped while any of them lives.

cimport cython
import numbers

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_WRITABLE
from cpython.unicode cimport PyUnicode_DecodeASCII

from loader import errors as _errors

# NumPy and the layer table are imported on first use: a process that only discovers and loads
# backends never pays for them (NumPy's libraries also make every later dlopen slower).
cdef object _layers_module = None


cdef object _layers():
    global _layers_module
    if _layers_module is None:
        from loader import layers
        _layers_module = layers
    return _layers_module


cdef str _absence(Feature feature, uint32_t minor, uint32_t struct_size):
    """Why a member is not in an instance: an older minor version, or too small a struct."""
    if feature.since_minor > minor:
        return skew_detail(minor)
    return (f"the instance's struct_size ({struct_size}) ends before {feature.member}, which "
            f"Backend API {API_VERSION_MAJOR}.{minor} includes")


class Capabilities(dict):
    """The backend's capabilities (name -> bool). ``missing_because_of_skew`` names each Backend
    API feature the backend lacks because it was built against an older minor version."""

    def __init__(self, values, missing_because_of_skew):
        super().__init__(values)
        self.missing_because_of_skew = dict(missing_because_of_skew)

    def __repr__(self):
        return f"Capabilities({dict.__repr__(self)}, missing_because_of_skew={self.missing_because_of_skew!r})"


class LayerSupport(tuple):
    """``(supported, reason)``; true iff supported, so it reads as both a flag and a pair."""

    def __new__(cls, bint supported, str reason=""):
        return tuple.__new__(cls, (supported, reason))

    @property
    def supported(self):
        return self[0]

    @property
    def reason(self):
        return self[1]

    def __bool__(self):
        return self[0]

    def __repr__(self):
        return f"LayerSupport(supported={self[0]}, reason={self[1]!r})"


# ---------------------------------------------------------------------------------------------
# The one place a backend status becomes an exception
# ---------------------------------------------------------------------------------------------

cdef enum:
    MESSAGE_SIZE = 1024
    MAX_CAPABILITIES = 4096     # a longer list is a broken backend, not a long list


cdef inline void _clear(char *message) noexcept nogil:
    message[0] = 0
    message[MESSAGE_SIZE - 1] = 0


cdef int _check(abi.BackendStatus status, char *message, str action) except -1:
    """Raise the exception for ``status`` (with the backend's message), or return 0 for OK."""
    if status == abi.BACKEND_STATUS_OK:
        return 0
    message[MESSAGE_SIZE - 1] = 0
    text = message.decode("utf-8", "replace") if message[0] else "no message"
    cls = _errors.STATUS_ERRORS.get(status, _errors.BackendInternalError)
    raise cls(f"{action}: {text} (status {status})")


def status_error(int status, bytes message, str action):
    """The exception _check raises for ``status`` with the backend's ``message`` (bytes up to
    its NUL), or None for OK: the same rule for a backend in a host process."""
    if status == abi.BACKEND_STATUS_OK:
        return None
    text = message.decode("utf-8", "replace") if message else "no message"
    cls = _errors.STATUS_ERRORS.get(status, _errors.BackendInternalError)
    return cls(f"{action}: {text} (status {status})")


def feature_unavailable(str backend_id, int index, uint32_t minor, uint32_t struct_size,
                        bint covered):
    """What _enter_feature says of the feature FEATURES[index] an instance lacks."""
    cdef Feature feature = FEATURES[index]
    return (f"backend {backend_id!r}: {feature.name} ({feature.member}) is "
            + (f"missing: {_absence(feature, minor, struct_size)}" if not covered
               else "not implemented"))


def absence(int index, uint32_t minor, uint32_t struct_size):
    """Why FEATURES[index] is not in an instance of this minor version and struct size."""
    return _absence(FEATURES[index], minor, struct_size)


include "_layer_call.pxi"
include "_backend_objects.pxi"


# ---------------------------------------------------------------------------------------------
# The backend instance
# ---------------------------------------------------------------------------------------------

# Its native handle lives in the library: the garbage collector must never drop the library
# reference before __dealloc__ has released the handle.
@cython.no_gc_clear
cdef class Backend:
    """A live backend instance. Holds its library, so the library stays mapped for as long as
    the instance (or anything it created) lives, whatever happened to the runtime."""
    cdef abi.BackendInstance *_instance
    cdef Library _library
    # Calls in flight, so that close() from another thread waits for them. Only touched while
    # holding the GIL, which serialises the updates.
    cdef int _users
    cdef bint _close_pending
    cdef object __weakref__

    def __dealloc__(self):
        cdef abi.BackendInstance *instance = self._instance
        self._instance = NULL
        _destroy_instance(instance)

    cdef inline abi.BackendInstance *_enter(self) except NULL:
        """Start a call into the instance; pair with _leave()."""
        if self._instance == NULL or self._close_pending:
            raise _errors.BackendError(f"backend {self.id!r} is closed")
        self._users += 1
        return self._instance

    cdef inline void _leave(self):
        cdef abi.BackendInstance *instance
        self._users -= 1
        if self._users == 0 and self._close_pending:
            instance, self._instance = self._instance, NULL
            _destroy_instance(instance)

    cdef abi.BackendInstance *_enter_feature(self, Feature feature) except NULL:
        cdef abi.BackendInstance *instance = self._enter()
        if not feature.present(instance):
            self._leave()
            raise _errors.FeatureNotAvailableError(
                f"backend {self.id!r}: {feature.name} ({feature.member}) is "
                + (f"missing: {_absence(feature, self._library.minor, instance.struct_size)}"
                   if not feature.covered(instance) else "not implemented"))
        return instance

    cdef bint _provides(self, Feature feature) except -1:
        cdef abi.BackendInstance *instance = self._enter()
        cdef bint present = feature.present(instance)
        self._leave()
        return present

    def close(self):
        """Destroy the instance now, or when the calls in flight end. Idempotent."""
        cdef abi.BackendInstance *instance = NULL
        if self._users:
            self._close_pending = True
        else:
            instance, self._instance = self._instance, NULL
        _destroy_instance(instance)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    @property
    def closed(self):
        return self._instance == NULL or self._close_pending

    @property
    def id(self):
        """The backend id."""
        return self._library.backend_id

    @property
    def version(self):
        """The Backend API version the backend was built against."""
        from loader.versions import BackendVersion
        return BackendVersion(self._library.major, self._library.minor)

    @property
    def file(self):
        """Canonical path of the shared object the backend came from."""
        return self._library.path

    @property
    def library(self):
        return self._library

    def get_id(self):
        """The id as the instance's get_id() returns it now (a call into the backend)."""
        cdef abi.BackendInstance *instance = self._enter()
        cdef const char *raw = instance.get_id(instance)
        self._leave()
        if raw == NULL:
            return None
        return PyUnicode_DecodeASCII(raw, _posix.strnlen(raw, abi.BACKEND_ID_MAX_LENGTH + 1), "replace")

    @property
    def struct_size(self):
        """The instance's struct_size, as the backend set it."""
        cdef abi.BackendInstance *instance = self._enter()
        cdef uint32_t size = instance.struct_size
        self._leave()
        return size

    @property
    def features(self):
        """Backend API feature name -> whether this backend provides it."""
        cdef abi.BackendInstance *instance = self._enter()
        cdef Feature feature
        try:
            return {feature.name: feature.present(instance) for feature in FEATURES}
        finally:
            self._leave()

    @property
    def capabilities(self):
        """The backend's capabilities as a ``Capabilities`` dict (name -> bool)."""
        cdef abi.BackendInstance *instance = self._enter()
        cdef const abi.BackendCapability *entries = NULL
        cdef const abi.BackendCapability *entry
        cdef const char *base
        cdef uint32_t count = 0, i
        cdef Feature feature
        values = {}
        try:
            missing = {feature.name: _absence(feature, self._library.minor, instance.struct_size)
                       for feature in FEATURES if not feature.covered(instance)}
            if _GET_CAPABILITIES.present(instance):
                if instance.get_capabilities(instance, &entries, &count) != abi.BACKEND_STATUS_OK:
                    raise _errors.BackendInternalError(f"backend {self.id!r}: get_capabilities failed")
                if count > MAX_CAPABILITIES:
                    raise _errors.BackendInternalError(
                        f"backend {self.id!r}: get_capabilities reports {count} entries "
                        f"(at most {MAX_CAPABILITIES} are accepted)")
                base = <const char *>entries
                for i in range(count if entries != NULL else 0):
                    entry = <const abi.BackendCapability *>base
                    if entry.struct_size < abi.BACKEND_CAPABILITY_SIZE_1_1:
                        raise _errors.BackendInternalError(
                            f"backend {self.id!r}: capability {i} has struct_size {entry.struct_size}")
                    if entry.name != NULL:
                        values[(<bytes>entry.name).decode("ascii", "replace")] = bool(entry.value)
                    base += entry.struct_size
            return Capabilities(values, missing)
        finally:
            self._leave()

    def is_layer_supported(self, layer, inputs, descriptor=None):
        """Whether the backend can run ``layer`` on inputs of these arrays' (or shapes') shapes:
        a ``LayerSupport`` (true or false, with the backend's reason when false)."""
        return self.query_layer_support(_prepare(layer, inputs, descriptor))

    def query_layer_support(self, prepared):
        """``is_layer_supported`` for a layer description built by the caller (a
        loader.layers.PreparedLayer), passed to the backend as it is, unchecked."""
        cdef _LayerCall call
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendStatus status
        cdef abi.BackendInstance *instance
        refusal = _version_refusal(prepared, self._library)
        if refusal is not None:
            return LayerSupport(False, refusal)
        call = _pack_layer(prepared)
        instance = self._enter_feature(_LAYER_SUPPORT)
        try:
            _clear(message)
            status = instance.is_layer_supported(instance, &call.description, message, MESSAGE_SIZE)
        finally:
            self._leave()
        if status == abi.BACKEND_STATUS_OK:
            return LayerSupport(True, "")
        message[MESSAGE_SIZE - 1] = 0
        return LayerSupport(False, message.decode("utf-8", "replace") or f"status {status}")

    def create_memory_manager(self):
        """A new MemoryManager (FeatureNotAvailableError when the backend has none)."""
        cdef abi.BackendInstance *instance = self._enter_feature(_MEMORY_MANAGER)
        cdef abi.BackendMemoryManager *created = NULL
        cdef char message[MESSAGE_SIZE]
        cdef MemoryManager manager
        try:
            _clear(message)
            _check(instance.create_memory_manager(instance, &created, message, MESSAGE_SIZE),
                   message, "create_memory_manager")
        finally:
            self._leave()
        if created == NULL or created.struct_size < abi.BACKEND_MEMORY_MANAGER_SIZE_1_1 \
                or created.acquire == NULL or created.release == NULL or created.destroy == NULL:
            raise _errors.BackendInternalError("create_memory_manager returned a malformed manager")
        manager = MemoryManager.__new__(MemoryManager)
        manager._manager = created
        manager._library = self._library
        return manager

    def create_workload_factory(self, MemoryManager memory_manager=None):
        """A new WorkloadFactory, using ``memory_manager`` (one of this backend's) if given."""
        cdef abi.BackendInstance *instance = self._enter_feature(_WORKLOAD_FACTORY)
        cdef abi.BackendWorkloadFactory *created = NULL
        cdef abi.BackendMemoryManager *manager = NULL
        cdef char message[MESSAGE_SIZE]
        cdef WorkloadFactory factory
        try:
            if memory_manager is not None:
                if memory_manager._library is not self._library and (
                        self._library._handle == NULL
                        or memory_manager._library._handle != self._library._handle):
                    raise _errors.InvalidArgumentError(
                        f"create_workload_factory: the memory manager was created by backend "
                        f"{memory_manager._library.backend_id!r} from "
                        f"{memory_manager._library.path}, not by this one "
                        f"({self.id!r} from {self._library.path})")
                manager = memory_manager._require()
            _clear(message)
            _check(instance.create_workload_factory(instance, manager, &created, message, MESSAGE_SIZE),
                   message, "create_workload_factory")
        finally:
            self._leave()
        if created == NULL or created.struct_size < abi.BACKEND_WORKLOAD_FACTORY_SIZE_1_1 \
                or created.create_workload == NULL or created.destroy == NULL:
            raise _errors.BackendInternalError("create_workload_factory returned a malformed factory")
        factory = WorkloadFactory.__new__(WorkloadFactory)
        factory._factory = created
        factory._library = self._library
        factory._memory_manager = memory_manager
        return factory

    def create_backend_context(self):
        """A new BackendContext, or None when the backend wants no notifications."""
        cdef abi.BackendInstance *instance = self._enter_feature(_BACKEND_CONTEXT)
        cdef abi.BackendContext *created = NULL
        cdef char message[MESSAGE_SIZE]
        cdef BackendContext context
        try:
            _clear(message)
            _check(instance.create_backend_context(instance, &created, message, MESSAGE_SIZE),
                   message, "create_backend_context")
        finally:
            self._leave()
        if created == NULL:
            return None
        if created.struct_size < abi.BACKEND_CONTEXT_SIZE_1_1 or created.destroy == NULL \
                or created.before_load_network == NULL or created.after_load_network == NULL \
                or created.before_unload_network == NULL or created.after_unload_network == NULL:
            raise _errors.BackendInternalError("create_backend_context returned a malformed context")
        context = BackendContext.__new__(BackendContext)
        context._context = created
        context._library = self._library
        return context

    def supports_custom_allocator(self):
        """The custom-allocator question, asked with the runtime's malloc-backed allocator:
        ``(answer, reason)`` as a LayerSupport."""
        cdef abi.BackendInstance *instance = self._enter()
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendStatus status
        try:
            if not _CUSTOM_ALLOCATOR.present(instance):
                return LayerSupport(False, "the backend does not implement use_custom_allocator")
            _clear(message)
            status = instance.use_custom_allocator(instance, &_MALLOC_ALLOCATOR, message, MESSAGE_SIZE)
        finally:
            self._leave()
        if status == abi.BACKEND_STATUS_OK:
            return LayerSupport(True, "")
        message[MESSAGE_SIZE - 1] = 0
        return LayerSupport(False, message.decode("utf-8", "replace"))

    def execute(self, layer, inputs, descriptor=None):
        """Run one layer on NumPy arrays and return its outputs as new arrays: checks support,
        creates the workload, runs it between acquire and release of a fresh memory manager."""
        name = _layers().layer_type(layer).name
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"{name}: inputs must be a list, not {type(inputs).__name__}")
        arrays = [_layers().input_array(name, i, v) for i, v in enumerate(inputs)]
        prepared = _prepare(name, arrays, descriptor)
        outputs = [_layers().new_output(prepared)]
        support = self.query_layer_support(prepared)
        if not support:
            raise _errors.LayerNotSupportedError(
                f"backend {self.id!r} cannot run {name}: {support.reason}")
        manager = self.create_memory_manager() if self._provides(_MEMORY_MANAGER) else None
        factory = self.create_workload_factory(manager)
        workload = factory.create_workload_prepared(prepared)
        factory.close()
        try:
            if manager is None:
                return workload.execute(arrays, outputs)
            with manager:
                return workload.execute(arrays, outputs)
        finally:
            workload.close()
            if manager is not None:
                manager.close()

    def __repr__(self):
        state = "closed" if self.closed else "live"
        return f"<Backend {self.id!r} {self.version} from {self.file!r} {state}>"


# The allocator offered to backends: static, so it stays valid for as long as any backend may
# keep it.
cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void **memptr, size_t alignment, size_t size)


cdef void *_malloc_allocate(void *user_data, size_t size, size_t alignment) noexcept nogil:
    cdef void *pointer = NULL
    if alignment < sizeof(void *):
        alignment = sizeof(void *)
    if posix_memalign(&pointer, alignment, size) != 0:
        return NULL
    return pointer


cdef void _malloc_deallocate(void *user_data, void *pointer) noexcept nogil:
    free(pointer)


cdef abi.BackendAllocator _MALLOC_ALLOCATOR
memset(&_MALLOC_ALLOCATOR, 0, sizeof(_MALLOC_ALLOCATOR))
_MALLOC_ALLOCATOR.struct_size = sizeof(abi.BackendAllocator)
_MALLOC_ALLOCATOR.allocate = _malloc_allocate
_MALLOC_ALLOCATOR.deallocate = _malloc_deallocate


def query_availability(object backend):
    """(True, "") when ``backend``'s is_available() says it can run here (or it has none),
    else (False, its message). Rule 12.6."""
    if not isinstance(backend, Backend):
        return backend._query_availability()
    return _query_availability(backend)


cdef tuple _query_availability(Backend backend):
    cdef abi.BackendInstance *instance
    cdef char message[MESSAGE_SIZE]
    cdef abi.BackendStatus status
    if not backend._provides(_AVAILABILITY):
        return True, ""
    instance = backend._enter_feature(_AVAILABILITY)
    try:
        _clear(message)
        with nogil:
            status = instance.is_available(instance, message, MESSAGE_SIZE)
    finally:
        backend._leave()
    if status == abi.BACKEND_STATUS_OK:
        return True, ""
    message[MESSAGE_SIZE - 1] = 0
    return False, message.decode("utf-8", "replace") if message[0] else f"status {status}"
