# The objects a backend instance creates (memory managers, backend contexts, workloads, workload
# factories), included into _core.pyx by _backend.pxi. Each holds its Library, so the library
# stays mapped while it lives; each backend call goes through _check() on the next line.

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


def network_id(value):
    """``value`` checked as a network id the ABI can carry (TypeError, InvalidArgumentError)."""
    return _network_id(value)


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
        cdef _Buffers buffers = _Buffers(len(self.layer.input_shapes) + 1,
                                         self._library.minor >= 3)
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
        cdef _LayerCall call
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendWorkload *created = NULL
        cdef Workload workload
        if self._factory == NULL:
            raise _errors.BackendError("the workload factory is closed")
        refusal = _version_refusal(prepared, self._library)
        if refusal is not None:
            raise _errors.LayerNotSupportedError(f"{prepared.name}: {refusal}")
        call = _pack_layer(prepared)
        _clear(message)
        status = self._factory.create_workload(self._factory, &call.description, &created,
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
