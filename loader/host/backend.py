"""A registered backend served by a host process (``HostedLibrary``) and its instances
(``HostBackend``): the interface and the errors of ``loader.Backend``, each backend call made
by the host. What the loader checks in process before or after a backend call (features, the
version of a layer, malformed objects, statuses) it checks here with the same functions of
``loader._core``, so the same misuse raises the same error either way."""
import os
from typing import Optional

from loader import _core, layers as _layers
from loader.errors import (BackendCreationError, BackendError, BackendInternalError,
                           InvalidArgumentError, LayerNotSupportedError)
from loader.host import channel as wire
from loader.host.process import HostProcess, HostSettings, outcome_error

# The features of _core.FEATURES, by name, and their positions (their bits in the host's reply).
_FEATURES = [(index, feature.name) for index, feature in enumerate(_core.FEATURES)]
_INDEX = {name: index for index, name in _FEATURES}


class HostedLibrary:
    """What registration learnt of a backend file (its id, version and identity), whose code
    runs only in its host process: the stand-in for ``loader.Library`` in a runtime with
    ``backend_host="process"``."""

    def __init__(self, path: str, backend_id: str, major: int, minor: int, identity,
                 settings: HostSettings, on_unavailable=None):
        self.path = path
        self.backend_id = backend_id
        self.major = major
        self.minor = minor
        self.identity = identity                  # (st_dev, st_ino, st_size, st_mtime_ns)
        self.host = HostProcess(self, settings, on_unavailable)

    @classmethod
    def adopt(cls, library, settings: HostSettings, on_unavailable=None) -> "HostedLibrary":
        """The hosted stand-in for a library registration loaded and checked; the library
        itself is closed (the runtime keeps no backend code for calls)."""
        status = os.stat(library.path)
        hosted = cls(library.path, library.backend_id, library.major, library.minor,
                     (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns),
                     settings, on_unavailable)
        library.close()
        return hosted

    @property
    def closed(self) -> bool:
        return self.host._closed

    def create_backend(self) -> "HostBackend":
        """A new instance, made by the host (started now if none is running)."""
        handle, _, outcome, payload = self.host.call(None, "create_instance")
        if outcome == wire.OUTCOME_MALFORMED:
            raise BackendCreationError(f"backend {self.backend_id!r} ({self.path}): "
                                       f"{wire.text(wire.message(payload))}")
        if outcome != wire.OUTCOME_OK:
            raise outcome_error(outcome, wire.text(wire.message(payload)))
        struct_size, covered, present = wire.instance(payload)
        return HostBackend(self, handle, struct_size, covered, present)

    def close(self):
        """Stop the host (reaping it). Idempotent."""
        self.host.close()

    def __repr__(self):
        state = "closed" if self.closed else "hosted"
        return f"<HostedLibrary {self.path!r} id={self.backend_id!r} {state}>"


class HostObject:
    """What every object a host made has: its host, its handle there and the generation of
    the host that made it (a later host does not know it)."""

    _what = "the object"

    def __init__(self, library: HostedLibrary, handle: int):
        self._library = library
        self._host = library.host
        self._handle = handle
        self._generation = self._host.generation
        self._closed = False

    def _closed_error(self):
        return BackendError(f"{self._what} is closed")

    def _call(self, op: str, value: int = 0, payload: bytes = b"", fd: int = -1):
        """Request ``op`` of this object: (handle, value, outcome, payload)."""
        return self._host.call(self, op, self._handle, value, payload, fd)

    def _close(self):
        if not self._closed:
            self._closed = True
            self._host.destroy_now(self._generation, self._handle)

    def __del__(self):
        try:
            if not self._closed:
                self._closed = True
                self._host.release(self._generation, self._handle)
        except Exception:     # finalizers run at interpreter exit too
            pass

    @property
    def hosted(self) -> bool:
        return True

    @property
    def lost(self) -> bool:
        """Whether the host that made this object is gone."""
        return self._generation != self._host.generation or not self._host.running


def reply_message(outcome: int, payload: bytes) -> bytes:
    """The backend's message of an OK reply; raises for any other outcome."""
    if outcome != wire.OUTCOME_OK:
        raise outcome_error(outcome, wire.text(wire.message(payload)))
    return wire.message(payload)


def check_status(status: int, message: bytes, action: str) -> None:
    error = _core.status_error(status, message, action)
    if error is not None:
        raise error


class HostBackend(HostObject):
    """A backend instance in a host process, used as a ``loader.Backend``."""

    _what = "the backend instance"

    def __init__(self, library, handle, struct_size, covered, present):
        super().__init__(library, handle)
        self._struct_size = struct_size
        self._covered = covered
        self._present = present

    # -- the instance's members ------------------------------------------------------------

    def _closed_error(self):
        return BackendError(f"backend {self.id!r} is closed")

    def _enter(self):
        if self._closed:
            raise self._closed_error()

    def _require(self, name: str):
        self._enter()
        index = _INDEX[name]
        if not self._present & (1 << index):
            from loader.errors import FeatureNotAvailableError
            raise FeatureNotAvailableError(_core.feature_unavailable(
                self.id, index, self._library.minor, self._struct_size,
                bool(self._covered & (1 << index))))

    def _provides(self, name: str) -> bool:
        self._enter()
        return bool(self._present & (1 << _INDEX[name]))

    def close(self):
        """Destroy the instance (in the host). Idempotent."""
        self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def id(self) -> str:
        return self._library.backend_id

    @property
    def version(self):
        from loader.versions import BackendVersion
        return BackendVersion(self._library.major, self._library.minor)

    @property
    def file(self) -> str:
        return self._library.path

    @property
    def library(self) -> HostedLibrary:
        return self._library

    @property
    def host(self) -> HostProcess:
        return self._host

    def get_id(self) -> Optional[str]:
        self._enter()
        _, _, outcome, payload = self._call("get_id")
        raw = wire.backend_id(payload) if outcome == wire.OUTCOME_OK else None
        if outcome != wire.OUTCOME_OK:
            raise outcome_error(outcome, wire.text(wire.message(payload)))
        return None if raw is None else raw.decode("ascii", "replace")

    @property
    def struct_size(self) -> int:
        self._enter()
        return self._struct_size

    @property
    def features(self):
        self._enter()
        return {name: bool(self._present & (1 << index)) for index, name in _FEATURES}

    @property
    def capabilities(self):
        self._enter()
        missing = {name: _core.absence(index, self._library.minor, self._struct_size)
                   for index, name in _FEATURES if not self._covered & (1 << index)}
        values = {}
        if self._present & (1 << _INDEX["Capabilities"]):
            _, status, outcome, payload = self._call("capabilities")
            if outcome == wire.OUTCOME_MALFORMED:
                raise BackendInternalError(f"backend {self.id!r}: "
                                           f"{wire.text(wire.message(payload))}")
            if outcome != wire.OUTCOME_OK:
                raise outcome_error(outcome, wire.text(wire.message(payload)))
            if status != 0:
                raise BackendInternalError(f"backend {self.id!r}: get_capabilities failed")
            for value, name in wire.capabilities(payload):
                if name is not None:
                    values[name.decode("ascii", "replace")] = bool(value)
        return _core.Capabilities(values, missing)

    # -- layers ----------------------------------------------------------------------------

    def is_layer_supported(self, layer, inputs, descriptor=None):
        return self.query_layer_support(_layers.prepare(layer, inputs, descriptor))

    def query_layer_support(self, prepared):
        refusal = _core.version_refusal(prepared, self.id, self._library.major,
                                        self._library.minor)
        if refusal is not None:
            return _core.LayerSupport(False, refusal)
        request = _core.wire_layer(prepared)
        self._require("LayerSupport")
        _, status, outcome, payload = self._call("layer_support", payload=request)
        message = reply_message(outcome, payload)
        if status == 0:
            return _core.LayerSupport(True, "")
        return _core.LayerSupport(False, wire.text(message) or f"status {status}")

    def create_memory_manager(self):
        from loader.host.objects import HostMemoryManager
        self._require("MemoryManager")
        handle, status, outcome, payload = self._call("create_memory_manager")
        if outcome == wire.OUTCOME_MALFORMED:
            raise BackendInternalError(wire.text(wire.message(payload)))
        check_status(status, reply_message(outcome, payload), "create_memory_manager")
        return HostMemoryManager(self._library, handle)

    def create_workload_factory(self, memory_manager=None):
        from loader.host.objects import HostMemoryManager, HostWorkloadFactory
        self._require("WorkloadFactory")
        manager = 0
        if memory_manager is not None:
            if not isinstance(memory_manager, (HostMemoryManager, _core.MemoryManager)):
                raise TypeError(f"Argument 'memory_manager' has incorrect type (expected a "
                                f"MemoryManager, got {type(memory_manager).__name__})")
            if not isinstance(memory_manager, HostMemoryManager) \
                    or memory_manager._host is not self._host:
                owner = (f"backend {memory_manager._library.backend_id!r} from "
                         f"{memory_manager._library.path}"
                         if isinstance(memory_manager, HostMemoryManager)
                         else "a backend loaded in this process")
                raise InvalidArgumentError(
                    f"create_workload_factory: the memory manager was created by {owner}, not "
                    f"by this one ({self.id!r} from {self.file})")
            manager = memory_manager._require()
        handle, status, outcome, payload = self._call("create_workload_factory",
                                                      payload=wire.u64(manager))
        if outcome == wire.OUTCOME_MALFORMED:
            raise BackendInternalError(wire.text(wire.message(payload)))
        check_status(status, reply_message(outcome, payload), "create_workload_factory")
        return HostWorkloadFactory(self._library, handle, memory_manager)

    def create_backend_context(self):
        from loader.host.objects import HostBackendContext
        self._require("BackendContext")
        handle, status, outcome, payload = self._call("create_context")
        if outcome == wire.OUTCOME_MALFORMED:
            raise BackendInternalError(wire.text(wire.message(payload)))
        check_status(status, reply_message(outcome, payload), "create_backend_context")
        return HostBackendContext(self._library, handle) if handle else None

    def supports_custom_allocator(self):
        self._enter()
        if not self._provides("CustomMemoryAllocator"):
            return _core.LayerSupport(False, "the backend does not implement use_custom_allocator")
        _, status, outcome, payload = self._call("custom_allocator")
        message = reply_message(outcome, payload)
        if status == 0:
            return _core.LayerSupport(True, "")
        return _core.LayerSupport(False, wire.text(message))

    def execute(self, layer, inputs, descriptor=None):
        """Run one layer on NumPy arrays, as ``loader.Backend.execute`` does."""
        name = _layers.layer_type(layer).name
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"{name}: inputs must be a list, not {type(inputs).__name__}")
        arrays = [_layers.input_array(name, i, v) for i, v in enumerate(inputs)]
        prepared = _layers.prepare(name, arrays, descriptor)
        outputs = [_layers.new_output(prepared)]
        support = self.query_layer_support(prepared)
        if not support:
            raise LayerNotSupportedError(f"backend {self.id!r} cannot run {name}: "
                                         f"{support.reason}")
        manager = self.create_memory_manager() if self._provides("MemoryManager") else None
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

    # -- what loader._core hands to a hosted backend (networks) ----------------------------

    def _query_availability(self):
        if not self._provides("Availability"):
            return True, ""
        self._require("Availability")
        _, status, outcome, payload = self._call("availability")
        message = reply_message(outcome, payload)
        if status == 0:
            return True, ""
        return False, wire.text(message) if message else f"status {status}"

    def _optimize_subgraph(self, spec, prepared_layers, constants):
        from loader.host.objects import optimize_subgraph
        return optimize_subgraph(self, spec, prepared_layers, constants)

    def _create_profiling_context(self):
        from loader.host.objects import create_profiling_context
        return create_profiling_context(self)

    def _load_compiled_subgraph(self, data):
        from loader.host.objects import load_compiled_subgraph
        return load_compiled_subgraph(self, data)

    def __repr__(self):
        state = "closed" if self.closed else "live"
        return f"<Backend {self.id!r} {self.version} from {self.file!r} {state}, in a host process>"
