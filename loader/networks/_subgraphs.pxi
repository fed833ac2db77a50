# Sub-graphs on the C side (Backend API 1.2), included into _core.pyx after _backend.pxi: the
# sub-graph description handed to optimize_subgraph(), the views a backend records and compiled
# sub-graphs. Planning lives in loader/networks/planning.py; nothing here decides anything.

from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc

cdef extern from "<time.h>" nogil:
    ctypedef int clockid_t
    cdef struct timespec:
        long tv_sec
        long tv_nsec
    int clock_gettime(clockid_t clock, timespec *ts)
    enum:
        CLOCK_MONOTONIC


cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef enum:
    MAX_REASON_LENGTH = 4096


# ---------------------------------------------------------------------------------------------
# Compiled sub-graphs
# ---------------------------------------------------------------------------------------------

# Its native handle lives in the library: the garbage collector must never drop the library
# reference before __dealloc__ has released the handle.
@cython.no_gc_clear
cdef class CompiledSubgraph:
    """A backend's compiled replacement for some layers of a sub-graph: opaque, run on the
    buffers of its boundary. Owned by the runtime; valid after the backend instance is gone."""
    cdef abi.BackendCompiledSubgraph *_compiled
    cdef Library _library
    cdef object _keep            # the constants the backend may point into
    cdef object _profiling       # the ProfilingContext handed to it, kept alive
    cdef object __weakref__

    def __dealloc__(self):
        self._destroy()

    cdef void _destroy(self) noexcept:
        cdef abi.BackendCompiledSubgraph *compiled = self._compiled
        self._compiled = NULL
        if compiled != NULL and compiled.destroy != NULL:
            compiled.destroy(compiled)

    def close(self):
        self._destroy()
        # Destroyed: nothing it held is needed any more, not even its library, which may now be
        # unloaded although this object lives on.
        self._library = None
        self._keep = None
        self._profiling = None

    @property
    def closed(self):
        return self._compiled == NULL

    @property
    def serializable(self):
        return self._compiled != NULL and _compiled_has_serialize(self._compiled)

    def set_profiling_context(self, ProfilingContext context):
        """Hand ``context`` (or None) to the compiled sub-graph; kept alive while it is held.
        False when the compiled sub-graph takes no profiling context."""
        if self._compiled == NULL or not _compiled_has_set_profiling_context(self._compiled):
            return False
        self._compiled.set_profiling_context(
            self._compiled, NULL if context is None else context._context)
        self._profiling = context
        return True

    def serialize(self):
        """The backend's bytes for this compiled sub-graph (rule 12.8)."""
        cdef uint64_t size = 0, again = 0
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendStatus status
        cdef bytearray data
        cdef char *buffer
        if self._compiled == NULL:
            raise _errors.BackendError("the compiled sub-graph was destroyed")
        if not _compiled_has_serialize(self._compiled):
            raise _errors.FeatureNotAvailableError(
                "the backend's compiled sub-graphs cannot be serialized")
        _clear(message)
        self._compiled.serialize(self._compiled, NULL, 0, &size, message, MESSAGE_SIZE)
        if size == 0 or size > MAX_SERIALIZED_BYTES:
            raise _errors.BackendInternalError(
                f"serialize: the backend asked for {size} bytes (at most "
                f"{MAX_SERIALIZED_BYTES} are accepted)")
        data = bytearray(size)
        buffer = data
        _clear(message)
        status = self._compiled.serialize(self._compiled, buffer, size, &again, message,
                                          MESSAGE_SIZE)
        _check(status, message, "serialize")
        if again != size:
            raise _errors.BackendInternalError(
                f"serialize: the backend wrote {again} bytes after asking for {size}")
        return bytes(data)


cdef extern from "struct_members.h":
    bint _compiled_has_serialize "dbk_compiled_has_serialize"(const abi.BackendCompiledSubgraph *p)
    bint _compiled_has_set_profiling_context "dbk_compiled_has_set_profiling_context"(
        const abi.BackendCompiledSubgraph *p)


cdef enum:
    MAX_SERIALIZED_BYTES = 1 << 30
    MAX_EVENT_NAME = 256
    MAX_PROFILE_RECORDS = 1 << 20


cdef object _hosted(object backend, str method):
    """The method of a backend that runs in a host process (loader.host), which every call
    below hands its work to; None for a Backend of this process."""
    if isinstance(backend, Backend):
        return None
    call = getattr(backend, method, None)
    if call is None:
        raise TypeError(f"expected a loader Backend, not {type(backend).__name__}")
    return call


def load_compiled_subgraph(object backend, data):
    """A CompiledSubgraph from bytes serialize() wrote (rule 12.8)."""
    hosted = _hosted(backend, "_load_compiled_subgraph")
    if hosted is not None:
        return hosted(data)
    return _load_compiled_subgraph(backend, data)


cdef object _load_compiled_subgraph(Backend backend, data):
    cdef abi.BackendInstance *instance = backend._enter_feature(_SERIALIZED_SUBGRAPHS)
    cdef abi.BackendCompiledSubgraph *created = NULL
    cdef char message[MESSAGE_SIZE]
    cdef const unsigned char[::1] view = bytes(data)
    cdef const void *pointer = &view[0] if len(view) else NULL
    cdef uint64_t size = len(view)
    cdef abi.BackendStatus status
    cdef CompiledSubgraph result
    try:
        _clear(message)
        with nogil:
            status = instance.load_compiled_subgraph(instance, pointer, size, &created, message,
                                                     MESSAGE_SIZE)
    finally:
        backend._leave()
    _check(status, message, f"backend {backend.id!r}: load_compiled_subgraph")
    result = _adopt_compiled(created, backend._library, None)
    if result is None:
        raise _errors.BackendInternalError(
            f"backend {backend.id!r}: load_compiled_subgraph returned a malformed compiled "
            f"sub-graph")
    return result


cdef CompiledSubgraph _adopt_compiled(abi.BackendCompiledSubgraph *compiled, Library library,
                                      object keep):
    """Take ownership of a compiled sub-graph; None (after destroying it where that is possible)
    when it is malformed."""
    cdef CompiledSubgraph result
    if compiled == NULL:
        return None
    if compiled.struct_size < abi.BACKEND_COMPILED_SUBGRAPH_SIZE_1_2 or compiled.execute == NULL \
            or compiled.destroy == NULL:
        if compiled.struct_size >= abi.BACKEND_COMPILED_SUBGRAPH_SIZE_1_2 and compiled.destroy != NULL:
            compiled.destroy(compiled)
        return None
    result = CompiledSubgraph.__new__(CompiledSubgraph)
    result._compiled = compiled
    result._library = library
    result._keep = keep
    return result


# ---------------------------------------------------------------------------------------------
# The views a backend records during optimize_subgraph()
# ---------------------------------------------------------------------------------------------

cdef struct _RecorderViews:
    abi.BackendOptimizationViews views       # first: the backend sees a BackendOptimizationViews
    PyObject *owner                          # the _ViewsRecorder, borrowed


cdef class _ViewsRecorder:
    """Records the calls a backend makes on its BackendOptimizationViews. Arguments are checked
    against the offered sub-graph's sizes before they are read; what cannot be used becomes a
    problem for planning.validate_views to report."""
    cdef _RecorderViews c
    cdef uint32_t num_layers, num_tensors
    cdef Py_ssize_t max_calls      # bounds what a runaway backend can make the runtime store
    cdef bint open
    cdef Library library
    cdef object keep
    cdef readonly list substitutions, failed, untouched, problems
    cdef set seen_compiled

    def __cinit__(self):
        self.substitutions, self.failed, self.untouched, self.problems = [], [], [], []
        self.seen_compiled = set()
        memset(&self.c, 0, sizeof(self.c))
        self.c.views.struct_size = sizeof(abi.BackendOptimizationViews)
        self.c.views.add_substitution = _views_add_substitution
        self.c.views.add_failed = _views_add_failed
        self.c.views.add_untouched = _views_add_untouched
        self.c.owner = <PyObject *>self

    cdef abi.BackendStatus problem(self, str text):
        if len(self.problems) < 32:
            self.problems.append(text)
        return abi.BACKEND_STATUS_INVALID_ARGUMENT

    cdef list _indices(self, const uint32_t *values, uint32_t count):
        return [values[i] for i in range(count)]


cdef _ViewsRecorder _recorder(abi.BackendOptimizationViews *views):
    return <_ViewsRecorder><object>(<_RecorderViews *>views).owner


cdef abi.BackendStatus _views_add_substitution(
        abi.BackendOptimizationViews *views, const uint64_t *layer_ids, uint32_t num_layer_ids,
        const uint32_t *inputs, uint32_t num_inputs, const uint32_t *outputs, uint32_t num_outputs,
        abi.BackendCompiledSubgraph *compiled) noexcept with gil:
    cdef _ViewsRecorder r = None
    cdef CompiledSubgraph adopted = None
    cdef uint32_t i
    try:
        r = _recorder(views)
        # Ownership of `compiled` passes with this call, whatever else is wrong.
        if compiled != NULL:
            if <size_t>compiled in r.seen_compiled:
                return r.problem("add_substitution: the same compiled sub-graph was handed over twice")
            r.seen_compiled.add(<size_t>compiled)
            adopted = _adopt_compiled(compiled, r.library, r.keep)
        if not r.open:
            return r.problem("add_substitution called after optimize_subgraph returned")
        if len(r.substitutions) >= r.max_calls:
            return r.problem(f"add_substitution: far more calls than the sub-graph's {r.num_layers} layers")
        if num_layer_ids > r.num_layers or num_inputs > r.num_tensors or num_outputs > r.num_tensors:
            return r.problem(f"add_substitution: {num_layer_ids} layers, {num_inputs} inputs, "
                             f"{num_outputs} outputs, but the sub-graph has {r.num_layers} layers "
                             f"and {r.num_tensors} tensors")
        if (num_layer_ids and layer_ids == NULL) or (num_inputs and inputs == NULL) \
                or (num_outputs and outputs == NULL):
            return r.problem("add_substitution: a NULL array with a non-zero count")
        r.substitutions.append(([layer_ids[i] for i in range(num_layer_ids)],
                                r._indices(inputs, num_inputs), r._indices(outputs, num_outputs),
                                adopted))
        return abi.BACKEND_STATUS_OK
    except BaseException as error:     # never let an exception cross into the backend
        try:
            return r.problem(f"add_substitution: {error!r}")
        except BaseException:
            return abi.BACKEND_STATUS_INTERNAL_ERROR


cdef abi.BackendStatus _views_add_failed(abi.BackendOptimizationViews *views, uint64_t layer_id,
                                         const char *reason) noexcept with gil:
    cdef _ViewsRecorder r = None
    try:
        r = _recorder(views)
        if not r.open:
            return r.problem("add_failed called after optimize_subgraph returned")
        if reason == NULL:
            text = "no reason given"
        else:
            text = reason[:_posix.strnlen(reason, MAX_REASON_LENGTH)].decode("utf-8", "replace")
        if len(r.failed) + len(r.untouched) >= r.max_calls:
            return r.problem(f"add_failed: far more calls than the sub-graph's {r.num_layers} layers")
        r.failed.append((layer_id, text or "no reason given"))
        return abi.BACKEND_STATUS_OK
    except BaseException as error:
        try:
            return r.problem(f"add_failed: {error!r}")
        except BaseException:
            return abi.BACKEND_STATUS_INTERNAL_ERROR


cdef abi.BackendStatus _views_add_untouched(abi.BackendOptimizationViews *views,
                                            uint64_t layer_id) noexcept with gil:
    cdef _ViewsRecorder r = None
    try:
        r = _recorder(views)
        if not r.open:
            return r.problem("add_untouched called after optimize_subgraph returned")
        if len(r.failed) + len(r.untouched) >= r.max_calls:
            return r.problem(f"add_untouched: far more calls than the sub-graph's {r.num_layers} layers")
        r.untouched.append(layer_id)
        return abi.BACKEND_STATUS_OK
    except BaseException as error:
        try:
            return r.problem(f"add_untouched: {error!r}")
        except BaseException:
            return abi.BACKEND_STATUS_INTERNAL_ERROR


# ---------------------------------------------------------------------------------------------
# The sub-graph description
# ---------------------------------------------------------------------------------------------

cdef class _SubgraphStorage:
    """The C description of one sub-graph, alive for the duration of optimize_subgraph()."""
    cdef abi.BackendSubgraph subgraph
    cdef abi.BackendSubgraphTensor *tensors
    cdef const abi.BackendSubgraphTensor **tensor_pointers
    cdef abi.BackendSubgraphLayer *layers
    cdef const abi.BackendSubgraphLayer **layer_pointers
    cdef list descriptions           # a _LayerCall per layer
    cdef uint32_t *indices
    cdef list arrays                 # constants, kept alive while their data is lent out

    def __dealloc__(self):
        free(self.tensors)
        free(self.tensor_pointers)
        free(self.layers)
        free(self.layer_pointers)
        free(self.indices)


cdef void *_calloc(size_t count, size_t size) except NULL:
    cdef void *p = calloc(count if count else 1, size)
    if p == NULL:
        raise MemoryError()
    return p


cdef _SubgraphStorage _pack_subgraph(object spec, list prepared_layers, dict constants):
    """Fill a _SubgraphStorage from a planning.SubgraphSpec; ``prepared_layers`` holds each
    layer's PreparedLayer, ``constants`` the arrays of constant tensors by name."""
    cdef _SubgraphStorage s = _SubgraphStorage.__new__(_SubgraphStorage)
    cdef uint32_t n_tensors = len(spec.tensors), n_layers = len(spec.layers)
    cdef uint32_t i, j, k = 0, total = 0
    cdef abi.BackendSubgraphTensor *t
    cdef abi.BackendSubgraphLayer *layer
    cdef Py_buffer view
    s.arrays = []
    for refs in spec.layer_inputs:
        total += len(refs)
    for refs in spec.layer_outputs:
        total += len(refs)
    total += len(spec.inputs) + len(spec.outputs)
    s.tensors = <abi.BackendSubgraphTensor *>_calloc(n_tensors, sizeof(abi.BackendSubgraphTensor))
    s.tensor_pointers = <const abi.BackendSubgraphTensor **>_calloc(n_tensors, sizeof(void *))
    s.layers = <abi.BackendSubgraphLayer *>_calloc(n_layers, sizeof(abi.BackendSubgraphLayer))
    s.layer_pointers = <const abi.BackendSubgraphLayer **>_calloc(n_layers, sizeof(void *))
    s.descriptions = []
    s.indices = <uint32_t *>_calloc(total, sizeof(uint32_t))
    for i in range(n_tensors):
        name, kind, shape = spec.tensors[i]
        t = &s.tensors[i]
        t.struct_size = sizeof(abi.BackendSubgraphTensor)
        t.kind = kind
        _fill_info(&t.info, tuple(shape))
        if kind == abi.BACKEND_SUBGRAPH_TENSOR_CONSTANT:
            array = constants[name]
            s.arrays.append(array)
            PyObject_GetBuffer(array, &view, PyBUF_C_CONTIGUOUS)
            t.data = view.buf           # the array is read-only, C-contiguous and kept alive
            t.size_bytes = view.len
            PyBuffer_Release(&view)
        s.tensor_pointers[i] = t
    for i in range(n_layers):
        call = _pack_layer(prepared_layers[i])
        s.descriptions.append(call)
        layer = &s.layers[i]
        layer.struct_size = sizeof(abi.BackendSubgraphLayer)
        layer.id = spec.layers[i]
        layer.description = &(<_LayerCall>call).description
        layer.input_tensors = &s.indices[k]
        for j in spec.layer_inputs[i]:
            s.indices[k] = j
            k += 1
        layer.output_tensors = &s.indices[k]
        for j in spec.layer_outputs[i]:
            s.indices[k] = j
            k += 1
        s.layer_pointers[i] = layer
    s.subgraph.struct_size = sizeof(abi.BackendSubgraph)
    s.subgraph.num_tensors = n_tensors
    s.subgraph.tensors = s.tensor_pointers
    s.subgraph.num_layers = n_layers
    s.subgraph.layers = s.layer_pointers
    s.subgraph.num_inputs = len(spec.inputs)
    s.subgraph.inputs = &s.indices[k]
    for j in spec.inputs:
        s.indices[k] = j
        k += 1
    s.subgraph.num_outputs = len(spec.outputs)
    s.subgraph.outputs = &s.indices[k]
    for j in spec.outputs:
        s.indices[k] = j
        k += 1
    return s


cdef object _optimize_subgraph(Backend backend, object spec, list prepared_layers, dict constants):
    """Offer one sub-graph to ``backend``'s optimize_subgraph(); a planning.Views of what it
    recorded. Compiled sub-graphs are owned (and kept) from the moment they are handed over."""
    from loader.networks.planning import Views
    cdef _SubgraphStorage storage = _pack_subgraph(spec, prepared_layers, constants)
    cdef _ViewsRecorder recorder = _ViewsRecorder.__new__(_ViewsRecorder)
    cdef char message[MESSAGE_SIZE]
    cdef abi.BackendStatus status = abi.BACKEND_STATUS_INTERNAL_ERROR
    cdef abi.BackendInstance *instance = backend._enter_feature(_SUBGRAPH_OPTIMIZATION)
    recorder.num_layers = storage.subgraph.num_layers
    recorder.num_tensors = storage.subgraph.num_tensors
    recorder.max_calls = 2 * <Py_ssize_t>recorder.num_layers + 16
    recorder.library = backend._library
    recorder.keep = storage.arrays
    recorder.open = True
    try:
        _clear(message)
        with nogil:
            status = instance.optimize_subgraph(instance, &storage.subgraph, &recorder.c.views,
                                                message, MESSAGE_SIZE)
    finally:
        recorder.open = False
        backend._leave()
    views = Views(recorder.substitutions, recorder.failed, recorder.untouched, recorder.problems)
    if status != abi.BACKEND_STATUS_OK:
        for substitution in views.substitutions:
            if substitution[3] is not None:
                substitution[3].close()
    _check(status, message, f"backend {backend.id!r}: optimize_subgraph")
    return views


def optimize_subgraph(object backend, spec, prepared_layers, constants):
    """Python entry to _optimize_subgraph (see loader.networks.planning)."""
    hosted = _hosted(backend, "_optimize_subgraph")
    if hosted is not None:
        return hosted(spec, list(prepared_layers), dict(constants))
    return _optimize_subgraph(backend, spec, list(prepared_layers), dict(constants))
