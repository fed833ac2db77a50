"""Find, check and load dynamic backends: shared objects named
``<vendor>_<name>_backend.so[.version]`` that export ``GetBackendId``, ``GetVersion`` and
``BackendFactory`` (see abi/backend_api.h).

    import loader
    with loader.Runtime() as rt:
        print(rt.backend_ids)
        backend = rt.create_backend("CpuRef")
"""
import os as _os

from loader._core import (
    Backend,
    BackendContext,
    Capabilities,
    LayerSupport,
    Library,
    MemoryManager,
    Workload,
    WorkloadFactory,
    is_valid_backend_filename,
)
from loader.errors import (
    BackendCreationError,
    BackendError,
    BackendInternalError,
    BackendNotFoundError,
    BackendOutOfMemoryError,
    BackendStatusError,
    BackendUnsupportedError,
    FeatureNotAvailableError,
    InvalidArgumentError,
    InvalidLayerError,
    InvalidSearchPathError,
    InvalidStateError,
    LayerNotSupportedError,
    LibraryClosedError,
    MissingBackendsError,
    RuntimeClosedError,
    UnknownLayerError,
)
from loader.loading import get_shared_objects
from loader.paths import ENVIRONMENT_VARIABLE, get_backend_paths
from loader.reasons import PathReason, Reason
from loader.runtime import Runtime
from loader.versions import BACKEND_API_VERSION, BackendVersion, is_backend_compatible

__version__ = "0.1.0"


def __getattr__(name):
    # The layer table needs NumPy; import it only when asked for.
    if name == "LAYERS":
        from loader.layers import LAYERS
        return LAYERS
    raise AttributeError(f"module 'loader' has no attribute {name!r}")


def get_include() -> str:
    """Directory holding ``backend_api.h``, for compiling a backend against this runtime."""
    return _os.path.join(_os.path.dirname(__file__), "include")


__all__ = [
    "BACKEND_API_VERSION",
    "ENVIRONMENT_VARIABLE",
    "LAYERS",
    "Backend",
    "BackendContext",
    "BackendCreationError",
    "BackendError",
    "BackendInternalError",
    "BackendNotFoundError",
    "BackendOutOfMemoryError",
    "BackendStatusError",
    "BackendUnsupportedError",
    "BackendVersion",
    "Capabilities",
    "FeatureNotAvailableError",
    "InvalidArgumentError",
    "InvalidLayerError",
    "InvalidSearchPathError",
    "InvalidStateError",
    "LayerNotSupportedError",
    "LayerSupport",
    "Library",
    "LibraryClosedError",
    "MemoryManager",
    "MissingBackendsError",
    "PathReason",
    "Reason",
    "Runtime",
    "RuntimeClosedError",
    "UnknownLayerError",
    "Workload",
    "WorkloadFactory",
    "get_backend_paths",
    "get_include",
    "get_shared_objects",
    "is_backend_compatible",
    "is_valid_backend_filename",
]
