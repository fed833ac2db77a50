# Backend instances and the objects they create (memory managers, workload factories, workloads,
# contexts), included into _core.pyx. Every object holds its Library, so the library stays mapped
# while any of them lives. Every backend call goes through _check() on the next line.

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


# ---------------------------------------------------------------------------------------------
# Layer descriptions: the C side of loader.layers.PreparedLayer
# ---------------------------------------------------------------------------------------------

cdef struct _LayerStorage:
    abi.BackendLayerDescription description
    abi.BackendTensorInfo infos[4]               # up to 3 inputs, then the output
    abi.BackendActivationDescriptor activation
    abi.BackendFullyConnectedDescriptor fully_connected
    abi.BackendConvolution2dDescriptor convolution
    abi.BackendPooling2dDescriptor pooling
    abi.BackendSoftmaxDescriptor softmax


cdef void _fill_info(abi.BackendTensorInfo *info, tuple shape) except *:
    cdef int d
    memset(info, 0, sizeof(abi.BackendTensorInfo))
    info.struct_size = sizeof(abi.BackendTensorInfo)
    info.data_type = abi.BACKEND_DATA_TYPE_FLOAT32
    info.num_dimensions = len(shape)
    for d in range(len(shape)):
        info.dimensions[d] = shape[d]


cdef void _pack_layer(_LayerStorage *s, object prepared) except *:
    """Fill ``s`` from a loader.layers.PreparedLayer; ``s.description`` points into ``s``. What
    the C structs cannot hold (more inputs or dimensions than they have room for, values out of
    their members' range) is refused; everything else is passed on unchecked."""
    cdef int n = len(prepared.input_shapes)
    cdef dict f = prepared.fields
    cdef uint32_t code
    if n > 3:
        raise _errors.InvalidLayerError(f"{prepared.name}: a layer description holds at most 3 "
                                        f"inputs, got {n}")
    for shape in list(prepared.input_shapes) + [prepared.output_shape]:
        if len(shape) > abi.BACKEND_MAX_DIMENSIONS:
            raise _errors.InvalidLayerError(
                f"{prepared.name}: a tensor has at most {abi.BACKEND_MAX_DIMENSIONS} dimensions, "
                f"got shape {list(shape)}")
    try:
        code = prepared.code
        _fill(s, prepared, n, f, code)
    except OverflowError as error:
        raise _errors.InvalidLayerError(f"{prepared.name}: a value does not fit the C layer "
                                        f"description: {error}") from None


cdef void _fill(_LayerStorage *s, object prepared, int n, dict f, uint32_t code) except *:
    cdef int i
    memset(s, 0, sizeof(_LayerStorage))
    for i in range(n):
        _fill_info(&s.infos[i], prepared.input_shapes[i])
    _fill_info(&s.infos[3], prepared.output_shape)
    s.description.struct_size = sizeof(abi.BackendLayerDescription)
    s.description.layer_type = code
    s.description.num_inputs = n
    s.description.num_outputs = 1
    s.description.inputs = &s.infos[0]
    s.description.outputs = &s.infos[3]
    s.description.descriptor = NULL
    if code == abi.BACKEND_LAYER_ACTIVATION:
        s.activation.struct_size = sizeof(s.activation)
        s.activation.function = f["function"]
        s.activation.a = f["a"]
        s.activation.b = f["b"]
        s.description.descriptor = &s.activation
    elif code == abi.BACKEND_LAYER_FULLY_CONNECTED:
        s.fully_connected.struct_size = sizeof(s.fully_connected)
        s.fully_connected.transpose_weights = f["transpose_weights"]
        s.fully_connected.bias_enabled = f["bias_enabled"]
        s.description.descriptor = &s.fully_connected
    elif code == abi.BACKEND_LAYER_CONVOLUTION2D or code == abi.BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D:
        s.convolution.struct_size = sizeof(s.convolution)
        s.convolution.stride_y, s.convolution.stride_x = f["stride_y"], f["stride_x"]
        s.convolution.pad_top, s.convolution.pad_bottom = f["pad_top"], f["pad_bottom"]
        s.convolution.pad_left, s.convolution.pad_right = f["pad_left"], f["pad_right"]
        s.convolution.dilation_y, s.convolution.dilation_x = f["dilation_y"], f["dilation_x"]
        s.convolution.bias_enabled = f["bias_enabled"]
        s.description.descriptor = &s.convolution
    elif code == abi.BACKEND_LAYER_POOLING2D:
        s.pooling.struct_size = sizeof(s.pooling)
        s.pooling.pool_type = f["pool_type"]
        s.pooling.kernel_y, s.pooling.kernel_x = f["kernel_y"], f["kernel_x"]
        s.pooling.stride_y, s.pooling.stride_x = f["stride_y"], f["stride_x"]
        s.pooling.pad_top, s.pooling.pad_bottom = f["pad_top"], f["pad_bottom"]
        s.pooling.pad_left, s.pooling.pad_right = f["pad_left"], f["pad_right"]
        s.description.descriptor = &s.pooling
    elif code == abi.BACKEND_LAYER_SOFTMAX:
        s.softmax.struct_size = sizeof(s.softmax)
        s.softmax.beta = f["beta"]
        s.description.descriptor = &s.softmax


cdef object _prepare(object layer, object inputs, object descriptor):
    """Arrays (or shapes) -> PreparedLayer."""
    return _layers().prepare(layer, inputs, descriptor)


# ---------------------------------------------------------------------------------------------
# Buffers: NumPy arrays lent to a workload for one execution
# ---------------------------------------------------------------------------------------------

cdef bint _is_float32_array(object value):
    import numpy as np
    return isinstance(value, np.ndarray) and value.dtype == np.float32


cdef class _Buffers:
    """Holds Py_buffer views of arrays (C-contiguous or refused) for the duration of a call."""
    cdef Py_buffer views[4]
    cdef abi.BackendBuffer buffers[4]
    cdef int count

    def __dealloc__(self):
        cdef int i
        for i in range(self.count):
            PyBuffer_Release(&self.views[i])

    cdef int add(self, object array, bint writable) except -1:
        cdef int flags = PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0)
        if self.count >= 4:
            raise ValueError("too many buffers")
        PyObject_GetBuffer(array, &self.views[self.count], flags)
        self.buffers[self.count].struct_size = sizeof(abi.BackendBuffer)
        self.buffers[self.count].reserved = 0
        self.buffers[self.count].data = self.views[self.count].buf
        self.buffers[self.count].size_bytes = self.views[self.count].len
        self.count += 1
        return 0


# ---------------------------------------------------------------------------------------------
# Objects a backend creates
# ---------------------------------------------------------------------------------------------

# Its native handle lives in the library: the garbage collector must never drop the library
# reference before __dealloc__ has released the handle.
@cython.no_gc_clear
cdef class MemoryManager:
    """A backend's memory manager. ``acquire()`` before executing, ``release()`` after; also a
    context manager that does both."""
    cdef abi.BackendMemoryManager *_manager
    cdef Library _library
    cdef int _acquired
    cdef object __weakref__

    def __dealloc__(self):
        self._destroy()

    cdef void _destroy(self) noexcept:
        cdef abi.BackendMemoryManager *manager = self._manager
        self._manager = NULL
        if manager != NULL and manager.destroy != NULL:
            manager.destroy(manager)

    cdef abi.BackendMemoryManager *_require(self) except NULL:
        if self._manager == NULL:
            raise _errors.BackendError("the memory manager is closed")
        return self._manager

    def acquire(self):
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendMemoryManager *manager = self._require()
        _clear(message)
        _check(manager.acquire(manager, message, MESSAGE_SIZE), message, "acquire")
        self._acquired += 1

    def release(self):
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendMemoryManager *manager = self._require()
        _clear(message)
        _check(manager.release(manager, message, MESSAGE_SIZE), message, "release")
        self._acquired -= 1

    @property
    def acquired(self):
        """Acquisitions not yet released."""
        return self._acquired

    def close(self):
        self._destroy()

    @property
    def closed(self):
        return self._manager == NULL

    def __repr__(self):
        state = "closed" if self._manager == NULL else f"live, acquired {self._acquired}"
        return f"<MemoryManager of {self._library.backend_id!r} {state}>"

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc_info):
        self.release()


cdef uint64_t _network_id(object value) except? 0:
    """A network id as the ABI carries it: an integer from 0 to 2^64 - 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"a network id must be an integer, not {type(value).__name__}")
    if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        raise _errors.InvalidArgumentError(f"network id {value} is out of range (0 to 2^64 - 1)")
    return int(value)


# Its native handle lives in the library: the garbage collector must never drop the library
# reference before __dealloc__ has released the handle.
@cython.no_gc_clear
cdef class BackendContext:
    """A backend context: notified before and after each network is loaded and unloaded."""
    cdef abi.BackendContext *_context
    cdef Library _library
    cdef object __weakref__

    def __dealloc__(self):
        self._destroy()

    cdef void _destroy(self) noexcept:
        cdef abi.BackendContext *context = self._context
        self._context = NULL
        if context != NULL and context.destroy != NULL:
            context.destroy(context)

    cdef abi.BackendContext *_require(self) except NULL:
        if self._context == NULL:
            raise _errors.BackendError("the backend context is closed")
        return self._context

    def before_load_network(self, network_id):
        cdef char message[MESSAGE_SIZE]
        cdef uint64_t checked = _network_id(network_id)
        cdef abi.BackendContext *c = self._require()
        _clear(message)
        _check(c.before_load_network(c, checked, message, MESSAGE_SIZE), message,
               "before_load_network")

    def after_load_network(self, network_id):
        cdef char message[MESSAGE_SIZE]
        cdef uint64_t checked = _network_id(network_id)
        cdef abi.BackendContext *c = self._require()
        _clear(message)
        _check(c.after_load_network(c, checked, message, MESSAGE_SIZE), message,
               "after_load_network")

    def before_unload_network(self, network_id):
        cdef char message[MESSAGE_SIZE]
        cdef uint64_t checked = _network_id(network_id)
        cdef abi.BackendContext *c = self._require()
        _clear(message)
        _check(c.before_unload_network(c, checked, message, MESSAGE_SIZE), message,
               "before_unload_network")

    def after_unload_network(self, network_id):
        cdef char message[MESSAGE_SIZE]
        cdef uint64_t checked = _network_id(network_id)
        cdef abi.BackendContext *c = self._require()
        _clear(message)
        _check(c.after_unload_network(c, checked, message, MESSAGE_SIZE), message,
               "after_unload_network")

    def close(self):
        self._destroy()

    @property
    def closed(self):
        return self._context == NULL

    def __repr__(self):
        state = "closed" if self._context == NULL else "live"
        return f"<BackendContext of {self._library.backend_id!r} {state}>"


# Its native handle lives in the library: the garbage collector must never drop the library
# reference before __dealloc__ has released the handle.
@cython.no_gc_clear
cdef class Workload:
    """One layer, ready to run. ``execute(inputs)`` returns new arrays; ``execute(inputs,
    outputs)`` writes into the given ones. Not to be run from two threads at once."""
    cdef abi.BackendWorkload *_workload
    cdef Library _library
    cdef MemoryManager _memory_manager       # kept alive: the factory may have handed it on
    cdef object _lock
    cdef readonly object layer               # the loader.layers.PreparedLayer it runs
    cdef object __weakref__

    def __cinit__(self):
        self._lock = threading.Lock()

    def __dealloc__(self):
        self._destroy()

    cdef void _destroy(self) noexcept:
        cdef abi.BackendWorkload *workload = self._workload
        self._workload = NULL
        if workload != NULL and workload.destroy != NULL:
            workload.destroy(workload)

    def close(self):
        with self._lock:
            self._destroy()

    @property
    def closed(self):
        return self._workload == NULL

    @property
    def output_shape(self):
        return self.layer.output_shape

    def __repr__(self):
        state = "closed" if self._workload == NULL else "live"
        return (f"<Workload {self.layer.name} {[list(v) for v in self.layer.input_shapes]} -> "
                f"{list(self.layer.output_shape)} of {self._library.backend_id!r} {state}>")

    def execute(self, inputs, outputs=None):
        """Run on ``inputs`` (float32 arrays of the shapes the workload was made for)."""
        cdef _Buffers buffers = _Buffers()
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendStatus status
        cdef abi.BackendWorkload *workload
        cdef uint32_t num_inputs
        name = self.layer.name
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"{name}: inputs must be a list, not {type(inputs).__name__}")
        arrays = [_layers().input_array(name, i, v) for i, v in enumerate(inputs)]
        shapes = tuple(a.shape for a in arrays)
        if shapes != self.layer.input_shapes:
            raise _errors.InvalidLayerError(
                f"{name}: the workload was created for inputs {[list(s) for s in self.layer.input_shapes]}, "
                f"got {[list(s) for s in shapes]}")
        if outputs is None:
            outputs = [_layers().new_output(self.layer)]
        elif (not isinstance(outputs, (list, tuple)) or len(outputs) != 1
                or not _is_float32_array(outputs[0])
                or outputs[0].shape != self.layer.output_shape or not outputs[0].flags.c_contiguous
                or not outputs[0].flags.writeable):
            raise _errors.InvalidLayerError(
                f"{name}: outputs must be [a writable C-contiguous float32 array of shape "
                f"{list(self.layer.output_shape)}]")
        for a in arrays:
            buffers.add(a, False)
        buffers.add(outputs[0], True)
        num_inputs = len(arrays)
        _clear(message)
        with self._lock:
            workload = self._workload
            if workload == NULL:
                raise _errors.BackendError("the workload is closed")
            with nogil:
                status = workload.execute(workload, &buffers.buffers[0], num_inputs,
                                          &buffers.buffers[num_inputs], 1, message, MESSAGE_SIZE)
        _check(status, message, f"{name}: execute")
        return list(outputs)


# Its native handle lives in the library: the garbage collector must never drop the library
# reference before __dealloc__ has released the handle.
@cython.no_gc_clear
cdef class WorkloadFactory:
    """Creates workloads. Workloads outlive the factory and the backend instance."""
    cdef abi.BackendWorkloadFactory *_factory
    cdef Library _library
    cdef MemoryManager _memory_manager
    cdef object __weakref__

    def __dealloc__(self):
        self._destroy()

    cdef void _destroy(self) noexcept:
        cdef abi.BackendWorkloadFactory *factory = self._factory
        self._factory = NULL
        if factory != NULL and factory.destroy != NULL:
            factory.destroy(factory)

    def close(self):
        self._destroy()

    @property
    def closed(self):
        return self._factory == NULL

    @property
    def memory_manager(self):
        return self._memory_manager

    def __repr__(self):
        state = "closed" if self._factory == NULL else "live"
        manager = "with" if self._memory_manager is not None else "without"
        return (f"<WorkloadFactory of {self._library.backend_id!r} {state}, {manager} a memory "
                f"manager>")

    def create_workload(self, layer, inputs, descriptor=None):
        """A workload for ``layer`` on inputs of these arrays' (or shapes') shapes."""
        return self.create_workload_prepared(_prepare(layer, inputs, descriptor))

    def create_workload_prepared(self, prepared):
        """``create_workload`` for a layer description built by the caller (a
        loader.layers.PreparedLayer), passed to the backend as it is, unchecked."""
        cdef _LayerStorage storage
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendWorkload *created = NULL
        cdef Workload workload
        if self._factory == NULL:
            raise _errors.BackendError("the workload factory is closed")
        _pack_layer(&storage, prepared)
        _clear(message)
        status = self._factory.create_workload(self._factory, &storage.description, &created,
                                               message, MESSAGE_SIZE)
        _check(status, message, f"{prepared.name}: create_workload")
        if created == NULL or created.struct_size < abi.BACKEND_WORKLOAD_SIZE_1_1 \
                or created.execute == NULL or created.destroy == NULL:
            raise _errors.BackendInternalError(f"{prepared.name}: create_workload returned a "
                                               f"malformed workload")
        workload = Workload.__new__(Workload)
        workload._workload = created
        workload._library = self._library
        workload._memory_manager = self._memory_manager
        workload.layer = prepared
        return workload


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
        cdef _LayerStorage storage
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendStatus status
        cdef abi.BackendInstance *instance
        _pack_layer(&storage, prepared)
        instance = self._enter_feature(_LAYER_SUPPORT)
        try:
            _clear(message)
            status = instance.is_layer_supported(instance, &storage.description, message, MESSAGE_SIZE)
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
