# The executor of a loaded network, included into _core.pyx after networks/_subgraphs.pxi:
# pre-bound buffers and a loop over the steps without the GIL. What the steps are is decided in
# loader/networks/planning.py.

cdef enum:
    STEP_WORKLOAD = 0
    STEP_COMPILED = 1


cdef struct _ExecStep:
    int kind
    void *handle                     # BackendWorkload * or BackendCompiledSubgraph *
    uint32_t num_inputs
    uint32_t num_outputs
    abi.BackendBuffer *buffers       # num_inputs then num_outputs entries


cdef class Executor:
    """Runs a planned network: every buffer pointer is bound at construction except those of
    network inputs and outputs, which ``run`` patches before walking the steps in a C loop."""
    cdef _ExecStep *steps
    cdef Py_ssize_t num_steps
    cdef abi.BackendBuffer *buffers
    cdef Py_ssize_t *patch_start     # CSR: dynamic slot d patches buffers[patches[patch_start[d]:...]]
    cdef Py_ssize_t *patches
    cdef Py_ssize_t num_dynamic
    cdef int64_t *times              # start, end per step (when timing)
    cdef bint closed
    cdef list _keep                  # workloads, compiled sub-graphs, arena, constants
    cdef object _lock
    cdef readonly list step_names

    def __cinit__(self):
        self._lock = threading.Lock()

    def __dealloc__(self):
        free(self.steps)
        free(self.buffers)
        free(self.patch_start)
        free(self.patches)
        free(self.times)

    def __init__(self, list steps, object arena, Py_ssize_t num_dynamic):
        """``steps``: (name, kind, object, input refs, output refs) per step; a ref is
        ("arena", byte offset, bytes), ("constant", array) or ("dynamic", slot)."""
        cdef Py_ssize_t i, j, b = 0, total = 0, n_patches = 0
        cdef Py_buffer view
        cdef char *arena_base = NULL
        cdef _ExecStep *step
        self._keep = [arena]
        self.step_names = []
        for spec in steps:
            total += len(spec[3]) + len(spec[4])
            n_patches += sum(1 for ref in list(spec[3]) + list(spec[4]) if ref[0] == "dynamic")
        self.num_steps = len(steps)
        self.num_dynamic = num_dynamic
        self.steps = <_ExecStep *>_calloc(self.num_steps, sizeof(_ExecStep))
        self.buffers = <abi.BackendBuffer *>_calloc(total, sizeof(abi.BackendBuffer))
        self.patch_start = <Py_ssize_t *>_calloc(num_dynamic + 1, sizeof(Py_ssize_t))
        self.patches = <Py_ssize_t *>_calloc(n_patches, sizeof(Py_ssize_t))
        self.times = <int64_t *>_calloc(2 * self.num_steps, sizeof(int64_t))
        if arena is not None and len(arena):
            PyObject_GetBuffer(arena, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
            arena_base = <char *>view.buf      # the arena array is kept alive in _keep
            PyBuffer_Release(&view)
        per_slot = [[] for _ in range(num_dynamic)]
        for i in range(self.num_steps):
            name, kind, obj, input_refs, output_refs = steps[i]
            self.step_names.append(name)
            self._keep.append(obj)
            step = &self.steps[i]
            if not isinstance(obj, Workload if kind == "workload" else CompiledSubgraph):
                raise TypeError(f"{name}: a {kind} step needs a {kind} of this process, not "
                                f"{type(obj).__name__}")
            if kind == "workload":
                step.kind = STEP_WORKLOAD
                step.handle = (<Workload>obj)._workload
                library = (<Workload>obj)._library
            else:
                step.kind = STEP_COMPILED
                step.handle = (<CompiledSubgraph>obj)._compiled
                library = (<CompiledSubgraph>obj)._library
            if step.handle == NULL:
                raise _errors.BackendError(f"{name}: closed before the network was planned")
            step.num_inputs = len(input_refs)
            step.num_outputs = len(output_refs)
            step.buffers = &self.buffers[b]
            for ref in list(input_refs) + list(output_refs):
                self.buffers[b].struct_size = sizeof(abi.BackendBuffer)
                if ref[0] == "arena":
                    self.buffers[b].data = arena_base + <Py_ssize_t>ref[1]
                    self.buffers[b].size_bytes = ref[2]
                elif ref[0] == "constant":
                    self._keep.append(ref[1])
                    PyObject_GetBuffer(ref[1], &view, PyBUF_C_CONTIGUOUS)
                    self.buffers[b].data = view.buf
                    self.buffers[b].size_bytes = view.len
                    if view.readonly and (<Library>library).minor >= 3:
                        self.buffers[b].flags = abi.BACKEND_BUFFER_READ_ONLY
                    PyBuffer_Release(&view)
                else:
                    per_slot[ref[1]].append(b)
                b += 1
        j = 0
        for i in range(num_dynamic):
            self.patch_start[i] = j
            for b in per_slot[i]:
                self.patches[j] = b
                j += 1
        self.patch_start[num_dynamic] = j

    def close(self):
        """Forget every handle (the owners destroy them); later runs raise."""
        with self._lock:
            self.closed = True
            self._keep = []

    def lost(self):
        """False: steps in this process are never lost (a backend host's can be)."""
        return False

    def step_times(self):
        """(start_ns, end_ns) of each step of the last timed run (CLOCK_MONOTONIC)."""
        return [(self.times[2 * i], self.times[2 * i + 1]) for i in range(self.num_steps)]

    def run(self, list arrays, bint timing=False):
        """Bind ``arrays`` (one per dynamic slot: inputs read-only, outputs writable, all
        C-contiguous float32 of the planned sizes) and run every step in order."""
        cdef Py_ssize_t n = len(arrays), i, p, failed_step = -1
        cdef Py_buffer *views
        cdef Py_ssize_t acquired = 0
        cdef char message[MESSAGE_SIZE]
        cdef abi.BackendStatus status = abi.BACKEND_STATUS_OK
        cdef _ExecStep *step
        cdef abi.BackendWorkload *workload
        cdef abi.BackendCompiledSubgraph *compiled
        if n != self.num_dynamic:
            raise ValueError(f"{n} arrays for {self.num_dynamic} slots")
        views = <Py_buffer *>_calloc(n, sizeof(Py_buffer))
        try:
            for i in range(n):
                PyObject_GetBuffer(arrays[i], &views[i], PyBUF_C_CONTIGUOUS)
                acquired += 1
            with self._lock:
                if self.closed:
                    raise _errors.BackendError("the network was unloaded")
                for i in range(n):
                    for p in range(self.patch_start[i], self.patch_start[i + 1]):
                        self.buffers[self.patches[p]].data = views[i].buf
                        self.buffers[self.patches[p]].size_bytes = views[i].len
                _clear(message)
                with nogil:
                    for i in range(self.num_steps):
                        step = &self.steps[i]
                        if timing:
                            self.times[2 * i] = _now_ns()
                        if step.kind == STEP_WORKLOAD:
                            workload = <abi.BackendWorkload *>step.handle
                            status = workload.execute(workload, step.buffers, step.num_inputs,
                                                      step.buffers + step.num_inputs,
                                                      step.num_outputs, message, MESSAGE_SIZE)
                        else:
                            compiled = <abi.BackendCompiledSubgraph *>step.handle
                            status = compiled.execute(compiled, step.buffers, step.num_inputs,
                                                      step.buffers + step.num_inputs,
                                                      step.num_outputs, message, MESSAGE_SIZE)
                        if timing:
                            self.times[2 * i + 1] = _now_ns()
                        if status != abi.BACKEND_STATUS_OK:
                            failed_step = i
                            break
                if failed_step >= 0:
                    _check(status, message, f"{self.step_names[failed_step]}: execute")
        finally:
            for i in range(acquired):
                PyBuffer_Release(&views[i])
            free(views)
