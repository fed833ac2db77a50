"""What crosses a backend host's channel, on the runtime's side: the requests' payloads and the
replies read back, every one checked as untrusted input (a host is the backend's process: a
reply that does not parse is the host misbehaving, ``HostProtocolError``, and the host is
killed). The frames themselves, segments and the hot path live in C (``loader._core``:
``HostChannel``, ``Segment``, ``wire_layer``, ``wire_subgraph``); the layout is
``loader/native/host/protocol.h``."""
import struct

from loader import _core

HostChannelClosed = _core.HostChannelClosed
HostChannelTimeout = _core.HostChannelTimeout
HostProtocolError = _core.HostProtocolError

OP = dict(_core.HOST_OPS)           # request name -> its code

OUTCOME_OK, OUTCOME_REFUSED, OUTCOME_MALFORMED, OUTCOME_ABSENT, OUTCOME_NO_MEMORY = range(5)

# The Backend API call each request makes, for a crash the host did not note itself.
CALLS = {
    "ready": "loading", "ping": "ping", "add_segment": "mapping a segment",
    "destroy": "destroy", "shutdown": "shutdown", "create_instance": "BackendFactory",
    "get_id": "get_id", "capabilities": "get_capabilities",
    "layer_support": "is_layer_supported", "create_memory_manager": "create_memory_manager",
    "create_workload_factory": "create_workload_factory",
    "create_context": "create_backend_context", "custom_allocator": "use_custom_allocator",
    "availability": "is_available", "acquire": "acquire", "release": "release",
    "context_event": "a backend context notification", "create_workload": "create_workload",
    "execute": "execute", "optimize": "optimize_subgraph",
    "set_profiling": "set_profiling_context", "serialize": "serialize",
    "load_compiled": "load_compiled_subgraph", "create_profiling": "create_profiling_context",
    "profiling_enable": "enable", "profiling_collect": "collect",
    "add_sequence": "binding a network's steps", "run_sequence": "execute",
}
NAMES = {code: name for name, code in OP.items()}

SEGMENT_WRITABLE = 1
COMPILED_SERIALIZE, COMPILED_SET_PROFILING = 1, 2
RUN_TIMING = 1
NO_STEP = 0xFFFFFFFF
EVENTS = {"before_load_network": 0, "after_load_network": 1, "before_unload_network": 2,
          "after_unload_network": 3}

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")


class Reader:
    """A reply's payload, read field by field; running past its end is HostProtocolError."""

    __slots__ = ("data", "at")

    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def _take(self, fmt: struct.Struct):
        try:
            (value,) = fmt.unpack_from(self.data, self.at)
        except struct.error:
            raise HostProtocolError("a reply is shorter than its contents say") from None
        self.at += fmt.size
        return value

    def u32(self) -> int:
        return self._take(_U32)

    def u64(self) -> int:
        return self._take(_U64)

    def i64(self) -> int:
        return self._take(_I64)

    def f64(self) -> float:
        return self._take(_F64)

    def raw(self, size: int) -> bytes:
        if size > len(self.data) - self.at:
            raise HostProtocolError("a reply is shorter than its contents say")
        value = self.data[self.at:self.at + size]
        self.at += size
        return value

    def string(self) -> bytes:
        return self.raw(self.u32())

    def count(self, item_bytes: int) -> int:
        """A count of items of at least ``item_bytes`` each, checked against what is left."""
        n = self.u32()
        if n * item_bytes > len(self.data) - self.at:
            raise HostProtocolError("a count is larger than the reply can hold")
        return n

    def u32s(self, n: int):
        return list(struct.unpack_from(f"<{n}I", self.raw(4 * n)))

    def u64s(self, n: int):
        return list(struct.unpack_from(f"<{n}Q", self.raw(8 * n)))


def u32(value: int) -> bytes:
    return _U32.pack(value)


def u64(value: int) -> bytes:
    return _U64.pack(value)


def u64s(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def destroy(handles) -> bytes:
    return _U32.pack(len(handles)) + struct.pack(f"<{len(handles)}Q", *handles)


def message(payload: bytes) -> bytes:
    """The backend's message most replies carry first."""
    return Reader(payload).string()


def text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def instance(payload: bytes):
    """CREATE_INSTANCE: (struct_size, covered members, present members)."""
    r = Reader(payload)
    return r.u32(), r.u32(), r.u32()


def backend_id(payload: bytes):
    """GET_ID: the id as bytes, or None."""
    r = Reader(payload)
    is_null, value = r.u32(), r.string()
    return None if is_null else value


def capabilities(payload: bytes):
    """CAPABILITIES: [(value, name bytes or None)]."""
    r = Reader(payload)
    entries = []
    for _ in range(r.count(12)):
        value, has_name, name = r.u32(), r.u32(), r.string()
        entries.append((value, name if has_name else None))
    return entries


def views(payload: bytes):
    """OPTIMIZE: (message, substitutions [(ids, inputs, outputs, compiled handle, its members)],
    failed
    [(id, reason bytes)], untouched [ids], problems [bytes])."""
    r = Reader(payload)
    text_ = r.string()
    substitutions = []
    for _ in range(r.count(24)):
        ids = r.u64s(r.count(8))
        inputs = r.u32s(r.count(4))
        outputs = r.u32s(r.count(4))
        substitutions.append((ids, inputs, outputs, r.u64(), r.u32()))
    failed = [(r.u64(), r.string()) for _ in range(r.count(12))]
    untouched = r.u64s(r.count(8))
    problems = [r.string() for _ in range(r.count(4))]
    return text_, substitutions, failed, untouched, problems


def records(payload: bytes):
    """PROFILING_COLLECT: ("event", name, ids or None, start, end) and ("counter", name,
    value) tuples, as the in-process sink gives them."""
    r = Reader(payload)
    result = []
    for _ in range(r.count(8)):
        kind, name = r.u32(), text(r.string())
        if kind == 0:
            ids_null, n = r.u32(), r.count(8)
            ids = r.u64s(n)
            result.append(("event", name, None if ids_null else tuple(ids), r.i64(), r.i64()))
        elif kind == 1:
            result.append(("counter", name, r.f64()))
        else:
            raise HostProtocolError(f"a profiling record of kind {kind}")
    return result


def run(payload: bytes):
    """RUN_SEQUENCE: (message, failed step or None, [(start_ns, end_ns)] when timed)."""
    r = Reader(payload)
    text_ = r.string()
    failed = r.u32()
    times = [(r.i64(), r.i64()) for _ in range(r.count(16))]
    return text_, None if failed == NO_STEP else failed, times


def loaded(payload: bytes):
    """LOAD_COMPILED: (message, the compiled sub-graph's members)."""
    r = Reader(payload)
    return r.string(), r.u32()


def serialized(payload: bytes):
    """SERIALIZE: (message, size)."""
    r = Reader(payload)
    return r.string(), r.u64()
