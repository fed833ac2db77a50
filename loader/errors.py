"""Exceptions the loader raises. Every one derives from ``BackendError``; where a builtin fits,
it derives from that too, so ``except KeyError`` and friends keep working."""


class BackendError(Exception):
    """Base of every exception the loader raises."""


class BackendNotFoundError(BackendError, KeyError):
    """No backend with that id is registered in the runtime."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class MissingBackendsError(BackendError, LookupError):
    """Backends a runtime was told to require did not register. ``reasons`` maps each missing
    id to why."""

    def __init__(self, missing, reasons):
        self.missing = list(missing)
        self.reasons = dict(reasons)
        super().__init__("required backends not registered: " + "; ".join(
            f"{backend_id}: {self.reasons[backend_id]}" for backend_id in self.missing))


class BackendCreationError(BackendError, RuntimeError):
    """BackendFactory did not produce a usable instance."""


class RuntimeClosedError(BackendError, RuntimeError):
    """The runtime was closed; it can no longer create backends."""


class LibraryClosedError(BackendError, RuntimeError):
    """The library was closed."""


class InvalidSearchPathError(BackendError, TypeError):
    """A search path argument has the wrong type."""


class InvalidLayerError(BackendError, ValueError):
    """A layer call is malformed whatever the backend: a descriptor key or value, or input shapes
    that do not fit together."""


class UnknownLayerError(InvalidLayerError):
    """No layer has that name."""


class LayerNotSupportedError(BackendError):
    """The backend said it cannot run this layer; the message carries its reason."""


class FeatureNotAvailableError(BackendError, NotImplementedError):
    """The backend does not implement an optional part of the Backend API, or was built against
    a minor version that predates it."""


class BackendCrashedError(BackendError):
    """A backend running out of process (``Runtime(backend_host="process")``) crashed, exited or
    was killed during a call, or an object it created was lost that way. ``backend`` is its id,
    ``call`` the Backend API call in progress, ``signal`` the signal's name (``"SIGSEGV"``) or
    ``exit_status`` the status it exited with, ``output`` the last lines its process printed."""

    def __init__(self, message, backend=None, call=None, signal=None, exit_status=None,
                 output=""):
        super().__init__(message)
        self.backend = backend
        self.call = call
        self.signal = signal
        self.exit_status = exit_status
        self.output = output


class BackendTimeoutError(BackendCrashedError):
    """A call into a backend running out of process took longer than the runtime's
    ``call_timeout``; its host process was killed."""


class BackendStatusError(BackendError):
    """A backend call failed; ``status`` is its BACKEND_STATUS_* code."""

    status = None


class InvalidArgumentError(BackendStatusError, ValueError):
    """BACKEND_STATUS_INVALID_ARGUMENT from a backend, or an argument the runtime refuses before
    it reaches one (a value out of its C type's range, another library's object)."""

    status = 1


class BackendUnsupportedError(BackendStatusError):
    status = 2


class BackendOutOfMemoryError(BackendStatusError, MemoryError):
    status = 3


class InvalidStateError(BackendStatusError, RuntimeError):
    status = 4


class BackendInternalError(BackendStatusError, RuntimeError):
    status = 5


#: BACKEND_STATUS_* code -> the exception it becomes.
STATUS_ERRORS = {cls.status: cls for cls in (InvalidArgumentError, BackendUnsupportedError,
                                             BackendOutOfMemoryError, InvalidStateError,
                                             BackendInternalError)}


# -- networks (docs/networks.md) -------------------------------------------------------------

class NetworkError(BackendError, ValueError):
    """A network is malformed (unknown tensor, cycle, duplicate name, shapes or descriptor that
    do not fit, inputs at ``execute`` that do not match); raised before any backend is called."""


class NoBackendForLayerError(BackendError, LookupError):
    """No backend of the preference list takes a layer; the message names the layer and each
    backend's reason, ``reasons`` maps backend id -> reason."""

    def __init__(self, layer, reasons):
        self.layer = layer
        self.reasons = dict(reasons)
        detail = "; ".join(f"{b}: {r}" for b, r in self.reasons.items()) or "no backends"
        super().__init__(f"no backend takes layer {layer!r} ({detail})")

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidOptimizationError(BackendError):
    """A backend's answer to optimize_subgraph does not cover the sub-graph it was offered
    exactly, or a substitution's boundary is not the tensors that cross it."""

    def __init__(self, backend, problems):
        self.backend = backend
        self.problems = list(problems)
        super().__init__(f"backend {backend!r} returned invalid optimization views: "
                         + "; ".join(self.problems))


class CompiledNetworkError(BackendError, ValueError):
    """A compiled network file (rule 12.8) that cannot be loaded here: unreadable, truncated,
    corrupt, or made for a backend that is missing, of another Backend API version, or that
    cannot load compiled sub-graphs; or a network that cannot be exported."""
