# Profiling contexts (rule 12.7) on the C side, included into _core.pyx after
# networks/_subgraphs.pxi: the sink a backend reports its events and counters to.


cdef struct _Sink:
    abi.BackendProfilingSink sink           # first: the backend sees a BackendProfilingSink
    PyObject *records                       # a list, borrowed for the collect() call


cdef void _sink_event(abi.BackendProfilingSink *sink, const char *name, const uint64_t *layer_ids,
                      uint32_t num_layer_ids, int64_t start_ns, int64_t end_ns) noexcept with gil:
    cdef list records
    cdef uint32_t i
    try:
        records = <list>(<_Sink *>sink).records
        if len(records) >= MAX_PROFILE_RECORDS:
            return
        text = "" if name == NULL else name[:_posix.strnlen(name, MAX_EVENT_NAME)].decode(
            "utf-8", "replace")
        if num_layer_ids and layer_ids == NULL:
            ids = None                       # refused by the runtime's checks
        else:
            ids = tuple(layer_ids[i] for i in range(min(num_layer_ids, 1 << 16)))
        records.append(("event", text, ids, start_ns, end_ns))
    except BaseException:
        pass


cdef void _sink_counter(abi.BackendProfilingSink *sink, const char *name,
                        double value) noexcept with gil:
    cdef list records
    try:
        records = <list>(<_Sink *>sink).records
        if len(records) >= MAX_PROFILE_RECORDS:
            return
        text = "" if name == NULL else name[:_posix.strnlen(name, MAX_EVENT_NAME)].decode(
            "utf-8", "replace")
        records.append(("counter", text, value))
    except BaseException:
        pass


@cython.no_gc_clear
cdef class ProfilingContext:
    """A backend's BackendProfilingContext for one loaded network (rule 12.7)."""
    cdef abi.BackendProfilingContext *_context
    cdef Library _library

    def __dealloc__(self):
        self._destroy()

    cdef void _destroy(self) noexcept:
        cdef abi.BackendProfilingContext *context = self._context
        self._context = NULL
        if context != NULL:
            context.destroy(context)

    def close(self):
        self._destroy()

    def enable(self, bint enabled):
        if self._context != NULL:
            self._context.enable(self._context, 1 if enabled else 0)

    def collect(self):
        """What the backend recorded since the last call: ("event", name, layer ids or None,
        start_ns, end_ns) and ("counter", name, value) tuples, unchecked."""
        cdef _Sink sink
        cdef list records = []
        if self._context == NULL:
            return records
        memset(&sink, 0, sizeof(sink))
        sink.sink.struct_size = sizeof(abi.BackendProfilingSink)
        sink.sink.event = _sink_event
        sink.sink.counter = _sink_counter
        sink.records = <PyObject *>records
        self._context.collect(self._context, &sink.sink)
        return records


def create_profiling_context(object backend):
    """The backend's profiling context for one network, or None when it offers none."""
    hosted = _hosted(backend, "_create_profiling_context")
    if hosted is not None:
        return hosted()
    return _create_profiling_context(backend)


cdef object _create_profiling_context(Backend backend):
    cdef abi.BackendInstance *instance
    cdef abi.BackendProfilingContext *created = NULL
    cdef char message[MESSAGE_SIZE]
    cdef ProfilingContext context
    if not backend._provides(_PROFILING):
        return None
    instance = backend._enter_feature(_PROFILING)
    try:
        _clear(message)
        _check(instance.create_profiling_context(instance, &created, message, MESSAGE_SIZE),
               message, f"backend {backend.id!r}: create_profiling_context")
    finally:
        backend._leave()
    if created == NULL:
        return None
    if created.struct_size < abi.BACKEND_PROFILING_CONTEXT_SIZE_1_2 or created.enable == NULL \
            or created.collect == NULL or created.destroy == NULL:
        if created.struct_size >= abi.BACKEND_PROFILING_CONTEXT_SIZE_1_2 and created.destroy != NULL:
            created.destroy(created)
        raise _errors.BackendInternalError(
            f"backend {backend.id!r}: create_profiling_context returned a malformed context")
    context = ProfilingContext.__new__(ProfilingContext)
    context._context = created
    context._library = backend._library
    return context
