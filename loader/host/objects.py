"""The objects a hosted backend instance creates, used as their ``loader`` counterparts:
memory managers, backend contexts, workload factories, workloads, compiled sub-graphs and
profiling contexts; and the network calls ``loader._core`` hands to a hosted backend
(``optimize_subgraph``, ``create_profiling_context``, ``load_compiled_subgraph``).

Each checks what its counterpart checks, in the same order and with the same messages, then
asks the host. Tensors and other bulk data (constants, serialized sub-graphs) go through
segments, never through the channel."""
import numpy as np

from loader import _core, layers as _layers
from loader.errors import (BackendError, BackendInternalError, FeatureNotAvailableError,
                           InvalidLayerError, LayerNotSupportedError)
from loader.host import channel as wire
from loader.host.backend import HostObject, check_status, reply_message
from loader.host.process import outcome_error


def _malformed(outcome, payload, text):
    """Raise ``text`` (a BackendInternalError) for a MALFORMED reply, or what any other
    outcome that is not OK raises."""
    if outcome == wire.OUTCOME_MALFORMED:
        raise BackendInternalError(text)
    if outcome != wire.OUTCOME_OK:
        raise outcome_error(outcome, wire.text(wire.message(payload)))


class HostMemoryManager(HostObject):
    """A backend's memory manager in its host: ``acquire()`` before executing, ``release()``
    after; also a context manager that does both."""

    _what = "the memory manager"

    def __init__(self, library, handle):
        super().__init__(library, handle)
        self._acquired = 0

    def _require(self) -> int:
        if self._closed:
            raise BackendError("the memory manager is closed")
        return self._handle

    def _ask(self, op):
        self._require()
        _, status, outcome, payload = self._call(op)
        check_status(status, reply_message(outcome, payload), op)

    def acquire(self):
        self._ask("acquire")
        self._acquired += 1

    def release(self):
        self._ask("release")
        self._acquired -= 1

    @property
    def acquired(self):
        return self._acquired

    def close(self):
        self._close()

    @property
    def closed(self):
        return self._closed

    def __repr__(self):
        state = "closed" if self._closed else f"live, acquired {self._acquired}"
        return f"<MemoryManager of {self._library.backend_id!r} {state}>"

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, exc_type, *exc_info):
        if exc_type is not None and self.lost:
            return             # the host's crash is the error to see, not the lost manager
        self.release()


class HostBackendContext(HostObject):
    """A backend context in its host: notified before and after each network is loaded and
    unloaded."""

    _what = "the backend context"

    def _notify(self, event, network_id):
        checked = _core.network_id(network_id)
        if self._closed:
            raise BackendError("the backend context is closed")
        _, status, outcome, payload = self._call("context_event", wire.EVENTS[event],
                                                 wire.u64(checked))
        check_status(status, reply_message(outcome, payload), event)

    def before_load_network(self, network_id):
        self._notify("before_load_network", network_id)

    def after_load_network(self, network_id):
        self._notify("after_load_network", network_id)

    def before_unload_network(self, network_id):
        self._notify("before_unload_network", network_id)

    def after_unload_network(self, network_id):
        self._notify("after_unload_network", network_id)

    def close(self):
        self._close()

    @property
    def closed(self):
        return self._closed

    def __repr__(self):
        state = "closed" if self._closed else "live"
        return f"<BackendContext of {self._library.backend_id!r} {state}>"


class HostWorkload(HostObject):
    """One layer, ready to run in the host. ``execute(inputs)`` returns new arrays;
    ``execute(inputs, outputs)`` writes into the given ones; the tensors cross through the
    host's I/O segment."""

    _what = "the workload"

    def __init__(self, library, handle, prepared, memory_manager):
        super().__init__(library, handle)
        self.layer = prepared
        self._memory_manager = memory_manager
        self._flags = library.minor >= 3
        sizes = [4 * int(np.prod(shape, dtype=np.int64)) for shape in prepared.input_shapes]
        sizes.append(4 * int(np.prod(prepared.output_shape, dtype=np.int64)))
        self._nbytes = _core.aligned_bytes(sizes)

    def close(self):
        self._close()

    @property
    def closed(self):
        return self._closed

    @property
    def output_shape(self):
        return self.layer.output_shape

    def __repr__(self):
        state = "closed" if self._closed else "live"
        return (f"<Workload {self.layer.name} {[list(v) for v in self.layer.input_shapes]} -> "
                f"{list(self.layer.output_shape)} of {self._library.backend_id!r} {state}>")

    def execute(self, inputs, outputs=None):
        """Run on ``inputs`` (float32 arrays of the shapes the workload was made for)."""
        layer = self.layer
        name = layer.name
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"{name}: inputs must be a list, not {type(inputs).__name__}")
        arrays = [_layers.input_array(name, i, v) for i, v in enumerate(inputs)]
        shapes = tuple(a.shape for a in arrays)
        if shapes != layer.input_shapes:
            raise InvalidLayerError(
                f"{name}: the workload was created for inputs "
                f"{[list(s) for s in layer.input_shapes]}, got {[list(s) for s in shapes]}")
        if outputs is None:
            outputs = [_layers.new_output(layer)]
        elif (not isinstance(outputs, (list, tuple)) or len(outputs) != 1
                or not isinstance(outputs[0], np.ndarray) or outputs[0].dtype != np.float32
                or outputs[0].shape != layer.output_shape or not outputs[0].flags.c_contiguous
                or not outputs[0].flags.writeable):
            raise InvalidLayerError(
                f"{name}: outputs must be [a writable C-contiguous float32 array of shape "
                f"{list(layer.output_shape)}]")
        if self._closed:
            raise BackendError("the workload is closed")
        status, message = self._host.execute(self, arrays, outputs[0], self._flags, self._nbytes)
        check_status(status, message, f"{name}: execute")
        return list(outputs)


class HostWorkloadFactory(HostObject):
    """Creates workloads in the host. Workloads outlive the factory and the instance."""

    _what = "the workload factory"

    def __init__(self, library, handle, memory_manager):
        super().__init__(library, handle)
        self._memory_manager = memory_manager

    def close(self):
        self._close()

    @property
    def closed(self):
        return self._closed

    @property
    def memory_manager(self):
        return self._memory_manager

    def __repr__(self):
        state = "closed" if self._closed else "live"
        manager = "with" if self._memory_manager is not None else "without"
        return (f"<WorkloadFactory of {self._library.backend_id!r} {state}, {manager} a memory "
                f"manager>")

    def create_workload(self, layer, inputs, descriptor=None):
        return self.create_workload_prepared(_layers.prepare(layer, inputs, descriptor))

    def create_workload_prepared(self, prepared):
        if self._closed:
            raise BackendError("the workload factory is closed")
        library = self._library
        refusal = _core.version_refusal(prepared, library.backend_id, library.major,
                                        library.minor)
        if refusal is not None:
            raise LayerNotSupportedError(f"{prepared.name}: {refusal}")
        request = _core.wire_layer(prepared)
        handle, status, outcome, payload = self._call("create_workload", payload=request)
        _malformed(outcome, payload,
                   f"{prepared.name}: create_workload returned a malformed workload")
        check_status(status, wire.message(payload), f"{prepared.name}: create_workload")
        return HostWorkload(library, handle, prepared, self._memory_manager)


class HostCompiledSubgraph(HostObject):
    """A compiled sub-graph in the host: opaque, run by the network's sequences there."""

    _what = "the compiled sub-graph"

    def __init__(self, library, handle, members):
        super().__init__(library, handle)
        self._members = members
        self._profiling = None

    def close(self):
        self._close()
        self._profiling = None

    @property
    def closed(self):
        return self._closed

    @property
    def serializable(self):
        return not self._closed and bool(self._members & wire.COMPILED_SERIALIZE)

    def set_profiling_context(self, context):
        """Hand ``context`` (a profiling context of the same host, or None) to the compiled
        sub-graph; False when it takes none."""
        if self._closed or not self._members & wire.COMPILED_SET_PROFILING:
            return False
        _, _, outcome, payload = self._call(
            "set_profiling", payload=wire.u64(0 if context is None else context._handle))
        if outcome != wire.OUTCOME_OK:
            raise outcome_error(outcome, wire.text(wire.message(payload)))
        self._profiling = context
        return wire.Reader(payload).u32() == 1

    def serialize(self):
        """The backend's bytes for this compiled sub-graph (rule 12.8), through a segment."""
        if self._closed:
            raise BackendError("the compiled sub-graph was destroyed")
        if not self._members & wire.COMPILED_SERIALIZE:
            raise FeatureNotAvailableError(
                "the backend's compiled sub-graphs cannot be serialized")
        _, _, outcome, payload = self._call("serialize", payload=wire.u64s(0, 0, 0))
        if outcome != wire.OUTCOME_OK:
            raise outcome_error(outcome, wire.text(wire.message(payload)))
        _, size = wire.serialized(payload)
        if size == 0 or size > _core.MAX_SERIALIZED_SUBGRAPH_BYTES:
            raise BackendInternalError(
                f"serialize: the backend asked for {size} bytes (at most "
                f"{_core.MAX_SERIALIZED_SUBGRAPH_BYTES} are accepted)")
        segment = _core.Segment(size)
        try:
            handle = self._host.add_segment(self, segment, writable=True)
            try:
                _, status, outcome, payload = self._call("serialize",
                                                         payload=wire.u64s(handle, 0, size))
            finally:
                self._host.destroy_now(self._generation, handle)
            if outcome != wire.OUTCOME_OK:
                raise outcome_error(outcome, wire.text(wire.message(payload)))
            message, again = wire.serialized(payload)
            check_status(status, message, "serialize")
            if again != size:
                raise BackendInternalError(
                    f"serialize: the backend wrote {again} bytes after asking for {size}")
            return segment.read_bytes(0, size)
        finally:
            segment.close()


class HostProfilingContext(HostObject):
    """A backend's profiling context in its host, for one loaded network (rule 12.7)."""

    _what = "the profiling context"

    def close(self):
        self._close()

    def enable(self, enabled):
        if not self._closed:
            _, _, outcome, payload = self._call("profiling_enable", 1 if enabled else 0)
            if outcome != wire.OUTCOME_OK:
                raise outcome_error(outcome, wire.text(wire.message(payload)))

    def collect(self):
        """What the backend recorded since the last call, as ProfilingContext.collect gives
        it."""
        if self._closed:
            return []
        _, _, outcome, payload = self._call("profiling_collect")
        if outcome != wire.OUTCOME_OK:
            raise outcome_error(outcome, wire.text(wire.message(payload)))
        return wire.records(payload)


# -- the network calls of loader._core, for a hosted backend ------------------------------------

def _bulk_segment(backend, blobs):
    """A read-only segment in ``backend``'s host holding ``blobs`` (name -> C-contiguous
    data): (segment or None, its handle or 0, name -> (offset, size))."""
    placed, offset = {}, 0
    for name, data in blobs.items():
        size = memoryview(data).nbytes
        placed[name] = (offset, size)
        offset += _core.aligned_bytes([size])
    if offset == 0:
        return None, 0, {name: (0, 0) for name in blobs}
    segment = _core.Segment(offset)
    try:
        for name, data in blobs.items():
            if placed[name][1]:
                segment.write(placed[name][0], data)
        segment.seal_read_only()
        return segment, backend._host.add_segment(backend, segment, writable=False), placed
    except BaseException:
        segment.close()
        raise


def optimize_subgraph(backend, spec, prepared_layers, constants):
    """``_core.optimize_subgraph`` for a hosted backend: the sub-graph's constants in a
    read-only segment (kept by the host while a compiled sub-graph may point into it)."""
    from loader.networks.planning import CONSTANT, Views
    blobs = {name: np.ascontiguousarray(constants[name], dtype=np.float32)
             for name, kind, _ in spec.tensors if kind == CONSTANT}
    backend._require("SubgraphOptimization")
    segment, handle, placed = _bulk_segment(backend, blobs)
    try:
        request = _core.wire_subgraph(spec, list(prepared_layers), placed, handle)
        _, status, outcome, payload = backend._call("optimize", payload=request)
    finally:
        if segment is not None:
            backend._host.release(backend._generation, handle)   # compiled ones keep it
            segment.close()
    if outcome != wire.OUTCOME_OK:
        raise outcome_error(outcome, wire.text(wire.message(payload)))
    message, substitutions, failed, untouched, problems = wire.views(payload)
    library = backend._library
    views = Views([(ids, inputs, outputs,
                    HostCompiledSubgraph(library, compiled, members) if compiled else None)
                   for ids, inputs, outputs, compiled, members in substitutions],
                  [(layer_id, wire.text(reason) or "no reason given")
                   for layer_id, reason in failed],
                  list(untouched), [wire.text(p) for p in problems])
    check_status(status, message, f"backend {backend.id!r}: optimize_subgraph")
    return views


def create_profiling_context(backend):
    """``_core.create_profiling_context`` for a hosted backend."""
    if not backend._provides("Profiling"):
        return None
    backend._require("Profiling")
    handle, status, outcome, payload = backend._call("create_profiling")
    _malformed(outcome, payload,
               f"backend {backend.id!r}: create_profiling_context returned a malformed context")
    check_status(status, wire.message(payload), f"backend {backend.id!r}: create_profiling_context")
    return HostProfilingContext(backend._library, handle) if handle else None


def load_compiled_subgraph(backend, data):
    """``_core.load_compiled_subgraph`` for a hosted backend: the bytes through a segment."""
    backend._require("SerializedSubgraphs")
    blob = bytes(data)
    segment, handle, placed = _bulk_segment(backend, {"data": blob})
    try:
        _, size = placed["data"]
        created, status, outcome, payload = backend._call(
            "load_compiled", payload=wire.u64s(handle, 0, size))
    finally:
        if segment is not None:
            backend._host.destroy_now(backend._generation, handle)
            segment.close()
    _malformed(outcome, payload, f"backend {backend.id!r}: load_compiled_subgraph returned a "
                                 f"malformed compiled sub-graph")
    message, members = wire.loaded(payload) if status == 0 else (wire.message(payload), 0)
    check_status(status, message, f"backend {backend.id!r}: load_compiled_subgraph")
    return HostCompiledSubgraph(backend._library, created, members)
