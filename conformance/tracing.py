"""Which backend function a worker is in, so a crash or a hang can be named by the call that
caused it (``is_layer_supported``, ``create_workload``, ``execute``, ...), not only by its case.

The worker notes each call just before it reaches the backend, in a small buffer it shares
with the controller (a memory-mapped file): a note costs no system call, and it survives the
worker's death. Cases never note calls themselves: every backend object they get is wrapped
in ``Traced``, which knows the Backend API function behind each method.
"""
import mmap
from typing import Optional, Tuple

SIZE = 256

# Python API name -> Backend API function, per object (loader/_core.pyi, abi/backend_api.h).
CALLS = {
    "Library": {"read_backend_id": "GetBackendId", "read_version": "GetVersion",
                "probe_factory": "BackendFactory", "create_backend": "BackendFactory",
                "close": "dlclose"},
    "Backend": {"get_id": "get_id", "capabilities": "get_capabilities",
                "is_layer_supported": "is_layer_supported",
                "query_layer_support": "is_layer_supported",
                "create_memory_manager": "create_memory_manager",
                "create_workload_factory": "create_workload_factory",
                "create_backend_context": "create_backend_context",
                "supports_custom_allocator": "use_custom_allocator",
                "close": "destroy (instance)"},
    "WorkloadFactory": {"create_workload": "create_workload",
                        "create_workload_prepared": "create_workload",
                        "close": "destroy (workload factory)"},
    "Workload": {"execute": "execute", "close": "destroy (workload)"},
    "MemoryManager": {"acquire": "acquire", "release": "release",
                      "close": "destroy (memory manager)"},
    "BackendContext": {"before_load_network": "before_load_network",
                       "after_load_network": "after_load_network",
                       "before_unload_network": "before_unload_network",
                       "after_unload_network": "after_unload_network",
                       "close": "destroy (backend context)"},
}


# A backend in a host process (backend-conformance run --backend-host process) is used through
# loader.host's objects, whose methods are those of their loader._core counterparts.
for _name in ("Backend", "WorkloadFactory", "Workload", "MemoryManager", "BackendContext"):
    CALLS["Host" + _name] = CALLS[_name]
CALLS["HostedSubjectLibrary"] = CALLS["Library"]
del _name


class CallRecord:
    """The call in progress and the layer case it serves. ``fd``: the shared file (worker
    side); without it, a private buffer (a run in the kit's own process)."""

    def __init__(self, fd: Optional[int] = None):
        self.buffer = mmap.mmap(fd, SIZE) if fd is not None else bytearray(SIZE)
        self.layer = ""  # the layer case (layer_cases.yaml id) the current work is for
        self._encoded = {}  # (call, layer) -> bytes: a note is a dictionary lookup and a copy

    def note(self, call: str):
        key = (call, self.layer)
        data = self._encoded.get(key)
        if data is None:
            data = f"{call}\t{self.layer}".encode("utf-8", "replace")[:SIZE - 1] + b"\0"
            self._encoded[key] = data
        self.buffer[:len(data)] = data

    def clear(self):
        self.layer = ""
        self.buffer[:1] = b"\0"


def read(data: bytes) -> Tuple[Optional[str], Optional[str]]:
    """``(call, layer case)`` from the shared buffer's bytes; None for what was not noted."""
    text = data.split(b"\0", 1)[0].decode("utf-8", "replace")
    call, _, layer = text.partition("\t")
    return call or None, layer or None


_PROPERTIES = {"capabilities"}  # the calls above that are properties, not methods


def _unwrap(value):
    return value._target if isinstance(value, Traced) else value


class Traced:
    """A loader object (library, backend, factory, workload, memory manager, context) whose
    backend calls are noted in ``record`` before they are made; objects it returns are wrapped
    the same way."""

    __slots__ = ("_target", "_record", "_calls")

    def __init__(self, target, record: CallRecord):
        self._target = target
        self._record = record
        self._calls = CALLS[type(target).__name__]

    def __getattr__(self, name):
        call = self._calls.get(name)
        record = self._record
        if call is not None and name in _PROPERTIES:
            record.note(call)  # the backend is called right here, by the property
        value = getattr(self._target, name)
        if call is None or name in _PROPERTIES:
            return wrap(value, record)

        def traced(*args, **kwargs):
            record.note(call)
            if kwargs:
                kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
            result = value(*[_unwrap(a) for a in args], **kwargs) if args else value(**kwargs)
            return wrap(result, record)
        return traced

    def __enter__(self):
        self._record.note(self._calls.get("acquire", "__enter__"))
        self._target.__enter__()
        return self

    def __exit__(self, *exc_info):
        self._record.note(self._calls.get("release", "__exit__"))
        return self._target.__exit__(*exc_info)

    def __repr__(self):
        return repr(self._target)


def wrap(value, record: CallRecord):
    """``value`` wrapped in Traced when it is a loader object that calls into a backend."""
    kind = type(value)
    if kind.__name__ in CALLS and kind.__module__.startswith("loader"):
        return Traced(value, record)
    return value
