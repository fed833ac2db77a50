# The runtime's end of a backend host's channel (loader/native/host/protocol.h), included into
# _core.pyx after host/_segment.pxi (the segments, and fcntl): frames sent and received
# without the GIL (the host's output drained meanwhile, a deadline kept), the layer and
# sub-graph descriptions a request carries, and the one request on the hot path (a workload's
# execute with its tensors copied through a segment). What the frames mean is decided in
# loader/host/; every reply is checked there as untrusted input.

from libc.errno cimport EAGAIN, EPIPE, ECONNRESET
from libc.limits cimport INT_MAX
from libc.stdint cimport int32_t
from cpython.bytes cimport PyBytes_FromStringAndSize

cimport protocol as wire
from loader._posix cimport (F_GETFL, F_SETFL, iovec, msghdr, cmsghdr, SOL_SOCKET, SCM_RIGHTS,
                            MSG_NOSIGNAL, MSG_DONTWAIT, MSG_PEEK, CMSG_FIRSTHDR, CMSG_DATA, CMSG_SPACE, CMSG_LEN, sendmsg,
                            recv, pollfd, POLLIN, POLLOUT, POLLERR, POLLHUP, POLLNVAL, poll)


class HostChannelClosed(Exception):
    """The host closed the channel or died: reap it to learn how."""


class HostChannelTimeout(Exception):
    """The host did not answer before the deadline."""


class HostProtocolError(Exception):
    """The host sent something the protocol does not allow."""


HOST_PROTOCOL_VERSION = wire.DBK_HOST_PROTOCOL_VERSION
HOST_STATUS_BYTES = wire.DBK_HOST_STATUS_BYTES
HOST_NOTE_BYTES = wire.DBK_HOST_NOTE_BYTES
HOST_MAX_FRAME = wire.DBK_HOST_MAX_FRAME
MAX_SERIALIZED_SUBGRAPH_BYTES = MAX_SERIALIZED_BYTES
HOST_OPS = {name[len("DBK_OP_"):].lower(): value for name, value in (
    ("DBK_OP_READY", wire.DBK_OP_READY), ("DBK_OP_PING", wire.DBK_OP_PING),
    ("DBK_OP_ADD_SEGMENT", wire.DBK_OP_ADD_SEGMENT), ("DBK_OP_DESTROY", wire.DBK_OP_DESTROY),
    ("DBK_OP_SHUTDOWN", wire.DBK_OP_SHUTDOWN),
    ("DBK_OP_CREATE_INSTANCE", wire.DBK_OP_CREATE_INSTANCE), ("DBK_OP_GET_ID", wire.DBK_OP_GET_ID),
    ("DBK_OP_CAPABILITIES", wire.DBK_OP_CAPABILITIES),
    ("DBK_OP_LAYER_SUPPORT", wire.DBK_OP_LAYER_SUPPORT),
    ("DBK_OP_CREATE_MEMORY_MANAGER", wire.DBK_OP_CREATE_MEMORY_MANAGER),
    ("DBK_OP_CREATE_WORKLOAD_FACTORY", wire.DBK_OP_CREATE_WORKLOAD_FACTORY),
    ("DBK_OP_CREATE_CONTEXT", wire.DBK_OP_CREATE_CONTEXT),
    ("DBK_OP_CUSTOM_ALLOCATOR", wire.DBK_OP_CUSTOM_ALLOCATOR),
    ("DBK_OP_AVAILABILITY", wire.DBK_OP_AVAILABILITY), ("DBK_OP_ACQUIRE", wire.DBK_OP_ACQUIRE),
    ("DBK_OP_RELEASE", wire.DBK_OP_RELEASE), ("DBK_OP_CONTEXT_EVENT", wire.DBK_OP_CONTEXT_EVENT),
    ("DBK_OP_CREATE_WORKLOAD", wire.DBK_OP_CREATE_WORKLOAD), ("DBK_OP_EXECUTE", wire.DBK_OP_EXECUTE),
    ("DBK_OP_OPTIMIZE", wire.DBK_OP_OPTIMIZE), ("DBK_OP_SET_PROFILING", wire.DBK_OP_SET_PROFILING),
    ("DBK_OP_SERIALIZE", wire.DBK_OP_SERIALIZE), ("DBK_OP_LOAD_COMPILED", wire.DBK_OP_LOAD_COMPILED),
    ("DBK_OP_CREATE_PROFILING", wire.DBK_OP_CREATE_PROFILING),
    ("DBK_OP_PROFILING_ENABLE", wire.DBK_OP_PROFILING_ENABLE),
    ("DBK_OP_PROFILING_COLLECT", wire.DBK_OP_PROFILING_COLLECT),
    ("DBK_OP_ADD_SEQUENCE", wire.DBK_OP_ADD_SEQUENCE),
    ("DBK_OP_RUN_SEQUENCE", wire.DBK_OP_RUN_SEQUENCE))}

cdef enum:
    _TAIL_BYTES = 8192               # the host's last output kept for a crash report
    _CLOSED = -1
    _TIMED_OUT = -2
    _MALFORMED = -3


# ---------------------------------------------------------------------------------------------
# The channel
# ---------------------------------------------------------------------------------------------

cdef class HostChannel:
    """One host's channel (a stream socket) and the read end of its output pipe. Not
    thread-safe: the runtime holds one lock per host around each use."""
    cdef int sock
    cdef int output
    cdef unsigned char *buffer
    cdef size_t capacity
    cdef char tail[_TAIL_BYTES]
    cdef size_t tail_start, tail_used
    cdef int64_t last_wait_ns       # how long the last reply was waited for (see _arrived_soon)
    cdef readonly int pid

    def __cinit__(self, int sock, int output, int pid):
        self.sock, self.output, self.pid = sock, output, pid
        self.capacity = 1 << 16
        self.buffer = <unsigned char *>malloc(self.capacity)
        if self.buffer == NULL:
            raise MemoryError()
        if output >= 0:
            fcntl(output, F_SETFL, fcntl(output, F_GETFL) | O_NONBLOCK)

    def __dealloc__(self):
        self.close()
        free(self.buffer)
        self.buffer = NULL

    def close(self):
        """Close both descriptors (idempotent); what the host printed stays readable."""
        if self.sock >= 0:
            c_close(self.sock)
            self.sock = -1
        if self.output >= 0:
            self._drain()
            c_close(self.output)
            self.output = -1

    cdef void _drain(self) noexcept nogil:
        """Keep what the host printed, the last _TAIL_BYTES of it."""
        cdef char chunk[4096]
        cdef ssize_t got, i
        if self.output < 0:
            return
        while True:
            got = c_read(self.output, chunk, sizeof(chunk))
            if got < 0 and errno == EINTR:
                continue
            if got <= 0:
                if got == 0:           # the host closed its end: nothing more will come
                    c_close(self.output)
                    self.output = -1
                return
            for i in range(got):
                self.tail[(self.tail_start + self.tail_used) % _TAIL_BYTES] = chunk[i]
                if self.tail_used < _TAIL_BYTES:
                    self.tail_used += 1
                else:
                    self.tail_start = (self.tail_start + 1) % _TAIL_BYTES

    def output_tail(self):
        """What the host printed last (at most 8 KiB), as text."""
        cdef size_t i
        self._drain()
        data = bytes(self.tail[(self.tail_start + i) % _TAIL_BYTES] for i in range(self.tail_used))
        return data.decode("utf-8", "replace")

    cdef int _wait(self, short events, int64_t deadline) noexcept nogil:
        """Until the channel is ready for ``events``, draining the output meanwhile: 0, or
        _CLOSED, _TIMED_OUT."""
        cdef pollfd fds[2]
        cdef int timeout, ready
        cdef int64_t left
        while True:
            if self.sock < 0:
                return _CLOSED
            fds[0].fd, fds[0].events, fds[0].revents = self.sock, events, 0
            fds[1].fd, fds[1].events, fds[1].revents = self.output, POLLIN, 0
            timeout = -1
            if deadline >= 0:
                left = deadline - _now_ns()
                if left <= 0:
                    return _TIMED_OUT
                timeout = <int>min(left // 1000000 + 1, <int64_t>INT_MAX)
            ready = poll(fds, 2 if self.output >= 0 else 1, timeout)
            if ready < 0:
                if errno == EINTR:
                    continue
                return _CLOSED
            if self.output >= 0 and fds[1].revents:
                self._drain()
            if fds[0].revents & events:
                return 0
            if fds[0].revents & (POLLERR | POLLHUP | POLLNVAL):
                return _CLOSED

    cdef int _send(self, const wire.dbk_frame *header, const char *payload, size_t size,
                   int fd, int64_t deadline) noexcept nogil:
        cdef iovec parts[2]
        cdef msghdr message
        cdef char control[64]
        cdef cmsghdr *cmsg
        cdef size_t sent = 0, total = sizeof(wire.dbk_frame) + size, skip
        cdef ssize_t got
        cdef int n, waited
        while sent < total:
            n = 0
            skip = sent
            if skip < sizeof(wire.dbk_frame):
                parts[n].iov_base = <char *>header + skip
                parts[n].iov_len = sizeof(wire.dbk_frame) - skip
                n += 1
                skip = 0
            else:
                skip -= sizeof(wire.dbk_frame)
            if size > skip:
                parts[n].iov_base = <char *>payload + skip
                parts[n].iov_len = size - skip
                n += 1
            memset(&message, 0, sizeof(message))
            message.msg_iov = parts
            message.msg_iovlen = n
            if fd >= 0 and sent == 0:
                memset(control, 0, sizeof(control))
                message.msg_control = control
                message.msg_controllen = CMSG_SPACE(sizeof(int))
                cmsg = CMSG_FIRSTHDR(&message)
                cmsg.cmsg_level = SOL_SOCKET
                cmsg.cmsg_type = SCM_RIGHTS
                cmsg.cmsg_len = CMSG_LEN(sizeof(int))
                memcpy(CMSG_DATA(cmsg), &fd, sizeof(int))
            # The channel is almost always empty: send first, wait only when it is full.
            got = sendmsg(self.sock, &message, MSG_NOSIGNAL | MSG_DONTWAIT)
            if got < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:
                    waited = self._wait(POLLOUT, deadline)
                    if waited != 0:
                        return waited
                    continue
                return _CLOSED
            sent += <size_t>got
        return 0

    cdef void _arrived_soon(self) noexcept nogil:
        """Before sleeping in poll for a reply: polls the channel for up to DBK_HOST_SPIN_NS
        when the last reply came sooner than that (protocol.h), so that a short call's reply
        is taken without the wake-up of a sleeping thread."""
        cdef unsigned char peek
        cdef int64_t start = _now_ns()
        cdef ssize_t got
        if self.last_wait_ns > wire.DBK_HOST_SPIN_NS or self.sock < 0:
            return
        while _now_ns() - start <= wire.DBK_HOST_SPIN_NS:
            got = recv(self.sock, &peek, 1, MSG_PEEK | MSG_DONTWAIT)
            if got >= 0 or (errno != EAGAIN and errno != EINTR):
                return

    cdef int _receive(self, wire.dbk_frame *frame, int64_t deadline) noexcept nogil:
        """One frame into self.buffer: 0, or _CLOSED, _TIMED_OUT, _MALFORMED."""
        cdef size_t used = 0, wanted = sizeof(wire.dbk_frame)
        cdef ssize_t got
        cdef unsigned char *grown
        cdef int waited
        cdef int64_t waiting = _now_ns()
        self._arrived_soon()
        while used < wanted:
            got = recv(self.sock, self.buffer + used, wanted - used, MSG_DONTWAIT)
            if got < 0:
                if errno == EINTR:
                    continue
                if errno == EAGAIN:
                    waited = self._wait(POLLIN, deadline)
                    if waited != 0:
                        return waited
                    continue
                return _CLOSED
            if got == 0:
                return _CLOSED
            if waiting >= 0:
                self.last_wait_ns = _now_ns() - waiting
                waiting = -1
            used += <size_t>got
            if wanted == sizeof(wire.dbk_frame) and used == wanted:
                memcpy(frame, self.buffer, sizeof(wire.dbk_frame))
                if frame.size < sizeof(wire.dbk_frame) or frame.size > wire.DBK_HOST_MAX_FRAME:
                    return _MALFORMED
                if frame.size > self.capacity:
                    grown = <unsigned char *>realloc(self.buffer, frame.size)
                    if grown == NULL:
                        return _MALFORMED
                    self.buffer, self.capacity = grown, frame.size
                wanted = frame.size
        return 0

    cdef tuple _transact(self, uint32_t op, uint64_t handle, int32_t value, const char *payload,
                         size_t size, int fd, double timeout, bint reply):
        cdef wire.dbk_frame header
        cdef wire.dbk_frame answer
        cdef int64_t deadline = -1 if timeout < 0 else _now_ns() + <int64_t>(timeout * 1e9)
        cdef int failed
        if size > wire.DBK_HOST_MAX_FRAME - sizeof(wire.dbk_frame):
            raise ValueError(f"a request of {size} bytes is larger than a frame may be")
        memset(&header, 0, sizeof(header))
        header.size = <uint32_t>(sizeof(wire.dbk_frame) + size)
        header.op = op
        header.handle = handle
        header.value = value
        with nogil:
            failed = self._send(&header, payload, size, fd, deadline)
            if failed == 0 and reply:
                failed = self._receive(&answer, deadline)
        if failed == _CLOSED:
            raise HostChannelClosed()
        if failed == _TIMED_OUT:
            raise HostChannelTimeout()
        if failed == _MALFORMED:
            raise HostProtocolError("a reply frame of an impossible size")
        if not reply:
            return None
        if answer.op != op:
            raise HostProtocolError(f"a reply to request {answer.op} for request {op}")
        return (answer.handle, answer.value, answer.outcome,
                PyBytes_FromStringAndSize(<char *>self.buffer + sizeof(wire.dbk_frame),
                                          answer.size - sizeof(wire.dbk_frame)))

    def request(self, uint32_t op, uint64_t handle=0, int32_t value=0, const unsigned char[::1] payload=None,
                int fd=-1, timeout=None):
        """Send a request and wait for its reply: (handle, value, outcome, payload bytes).
        Raises HostChannelClosed, HostChannelTimeout (``timeout`` seconds; None: none) or
        HostProtocolError."""
        cdef const char *data = NULL
        cdef size_t size = 0
        if payload is not None and len(payload):
            data, size = <const char *>&payload[0], len(payload)
        return self._transact(op, handle, value, data, size, fd, -1.0 if timeout is None
                              else timeout, True)

    def send(self, uint32_t op, uint64_t handle=0, const unsigned char[::1] payload=None, timeout=None):
        """Send a request that gets no reply (DESTROY)."""
        cdef const char *data = NULL
        cdef size_t size = 0
        if payload is not None and len(payload):
            data, size = <const char *>&payload[0], len(payload)
        self._transact(op, handle, 0, data, size, -1, -1.0 if timeout is None else timeout,
                       False)

    def first_frame(self, timeout=None):
        """The frame the host sends on its own once it is ready: (op, outcome, payload)."""
        cdef wire.dbk_frame answer
        cdef int64_t deadline = -1 if timeout is None else _now_ns() + <int64_t>(timeout * 1e9)
        cdef int failed
        with nogil:
            failed = self._receive(&answer, deadline)
        if failed == _CLOSED:
            raise HostChannelClosed()
        if failed == _TIMED_OUT:
            raise HostChannelTimeout()
        if failed == _MALFORMED:
            raise HostProtocolError("a frame of an impossible size")
        return (answer.op, answer.outcome,
                PyBytes_FromStringAndSize(<char *>self.buffer + sizeof(wire.dbk_frame),
                                          answer.size - sizeof(wire.dbk_frame)))

    def execute(self, uint64_t handle, list inputs, object output, Segment io, uint64_t io_handle,
                bint flags, timeout=None, list shared=None):
        """A workload's execute: each of ``inputs`` (C-contiguous buffers) copied into ``io``
        (registered with the host as ``io_handle``), the host told where they and the output
        lie, ``output`` filled from ``io`` when the backend answered OK. ``flags``: the backend
        reads BackendBuffer.flags (1.3). ``shared``: None, or for each input and then the
        output None or (Segment, its handle in the host) when that buffer lies in a segment the
        host maps: the host is told where it lies, and nothing is copied. Returns (status,
        message bytes), or (handle, status, outcome, payload) when the host did not take the
        request."""
        cdef Py_ssize_t n = len(inputs), i
        cdef char small[264]                 # 8 + 8 buffers
        cdef char *at = small
        cdef bytearray large = None
        cdef wire.dbk_wire_buffer *buffers
        cdef uint32_t counts[2]
        cdef uint64_t offset = 0
        cdef size_t size = 8 + (n + 1) * sizeof(wire.dbk_wire_buffer)
        cdef Py_buffer view
        cdef wire.dbk_frame header
        cdef wire.dbk_frame answer
        cdef int64_t deadline = -1 if timeout is None else _now_ns() + <int64_t>(timeout * 1e9)
        cdef int failed
        cdef uint32_t length
        cdef const unsigned char *payload
        cdef bint output_shared = False
        if shared is not None and len(shared) != n + 1:
            raise ValueError("shared names every input and the output")
        if n + 1 > 8:
            large = bytearray(size)
            at = large
        buffers = <wire.dbk_wire_buffer *>(at + 8)
        counts[0], counts[1] = <uint32_t>n, 1
        memcpy(at, counts, 8)
        memset(buffers, 0, (n + 1) * sizeof(wire.dbk_wire_buffer))
        for i in range(n + 1):
            if i < n:
                PyObject_GetBuffer(inputs[i], &view, PyBUF_C_CONTIGUOUS)
            else:
                PyObject_GetBuffer(output, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
            try:
                buffers[i].size = view.len
                buffers[i].flags = abi.BACKEND_BUFFER_READ_ONLY if flags and view.readonly else 0
                if shared is not None and shared[i] is not None and \
                        _place_in(&buffers[i], view.buf, view.len, shared[i]):
                    output_shared = i == n
                    continue
                if io is None:
                    raise ValueError("a buffer to copy, and no I/O segment to copy it to")
                if i < n:
                    memcpy(io._span(offset, view.len, True), view.buf, view.len)
                else:
                    io._span(offset, view.len, True)
                buffers[i].segment = io_handle
                buffers[i].offset = offset
            finally:
                PyBuffer_Release(&view)
            offset += _aligned(buffers[i].size)
        memset(&header, 0, sizeof(header))
        header.size = <uint32_t>(sizeof(wire.dbk_frame) + size)
        header.op = wire.DBK_OP_EXECUTE
        header.handle = handle
        with nogil:
            failed = self._send(&header, at, size, -1, deadline)
            if failed == 0:
                failed = self._receive(&answer, deadline)
        if failed == _CLOSED:
            raise HostChannelClosed()
        if failed == _TIMED_OUT:
            raise HostChannelTimeout()
        if failed == _MALFORMED or answer.op != wire.DBK_OP_EXECUTE:
            raise HostProtocolError("a malformed reply to execute")
        payload = self.buffer + sizeof(wire.dbk_frame)
        if answer.outcome != wire.DBK_OUTCOME_OK:
            return (answer.handle, answer.value, answer.outcome,
                    PyBytes_FromStringAndSize(<char *>payload, answer.size - sizeof(wire.dbk_frame)))
        if answer.size < sizeof(wire.dbk_frame) + 4:
            raise HostProtocolError("an execute reply without its message")
        memcpy(&length, payload, 4)
        if length > answer.size - sizeof(wire.dbk_frame) - 4:
            raise HostProtocolError("an execute reply's message runs past it")
        if answer.value == abi.BACKEND_STATUS_OK and not output_shared:
            PyObject_GetBuffer(output, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
            try:
                memcpy(view.buf, io._span(buffers[n].offset, view.len, False), view.len)
            finally:
                PyBuffer_Release(&view)
            return 0, b""
        return answer.value, PyBytes_FromStringAndSize(<char *>payload + 4, length)


# ---------------------------------------------------------------------------------------------
# Layers and sub-graphs as a request carries them (protocol.h: DBK_LAYER, DBK_SUBGRAPH)
# ---------------------------------------------------------------------------------------------

cdef void _append(bytearray out, const void *data, size_t size):
    out.extend((<const char *>data)[:size])


cdef void _append_layer(bytearray out, _LayerCall call):
    cdef uint32_t header[4]
    cdef uint32_t n = call.description.num_inputs + call.description.num_outputs
    header[0] = call.description.layer_type
    header[1] = call.description.num_inputs
    header[2] = call.description.num_outputs
    header[3] = 0 if call.description.descriptor == NULL else \
        (<const uint32_t *>call.description.descriptor)[0]
    _append(out, header, sizeof(header))
    _append(out, call.infos, n * sizeof(abi.BackendTensorInfo))
    if header[3]:
        _append(out, call.description.descriptor, header[3])


def wire_layer(prepared):
    """DBK_LAYER for a loader.layers.PreparedLayer (what _pack_layer refuses, refused here)."""
    cdef bytearray out = bytearray()
    _append_layer(out, _pack_layer(prepared))
    return bytes(out)


def wire_subgraph(spec, list prepared_layers, dict placed, uint64_t constants):
    """DBK_SUBGRAPH for a planning.SubgraphSpec; ``placed``: constant tensor name -> (offset,
    size) in the segment ``constants`` (a host handle, 0 for none)."""
    cdef bytearray out = bytearray()
    cdef abi.BackendTensorInfo info
    cdef uint32_t u
    cdef uint64_t v[2]
    cdef Py_ssize_t i
    cdef _LayerCall call
    _append(out, &constants, 8)
    u = len(spec.tensors)
    _append(out, &u, 4)
    for name, kind, shape in spec.tensors:
        u = kind
        _append(out, &u, 4)
        _fill_info(&info, tuple(shape))
        _append(out, &info, sizeof(info))
        v[0], v[1] = placed[name] if kind == abi.BACKEND_SUBGRAPH_TENSOR_CONSTANT else (0, 0)
        _append(out, v, 16)
    u = len(spec.layers)
    _append(out, &u, 4)
    for i in range(len(spec.layers)):
        v[0] = spec.layers[i]
        _append(out, v, 8)
        call = _pack_layer(prepared_layers[i])
        if call.description.num_inputs != len(spec.layer_inputs[i]) or \
                call.description.num_outputs != len(spec.layer_outputs[i]):
            raise _errors.InvalidLayerError(f"{prepared_layers[i].name}: its tensors do not match "
                                            f"the sub-graph's")
        _append_layer(out, call)
        for j in list(spec.layer_inputs[i]) + list(spec.layer_outputs[i]):
            u = j
            _append(out, &u, 4)
    for indices in (spec.inputs, spec.outputs):
        u = len(indices)
        _append(out, &u, 4)
        for j in indices:
            u = j
            _append(out, &u, 4)
    return bytes(out)
