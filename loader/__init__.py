"""Find, check and load dynamic backends: shared objects named
``<vendor>_<name>_backend.so[.version]`` that export ``GetBackendId``, ``GetVersion`` and
``BackendFactory`` (see abi/backend_api.h).

    import loader
    with loader.Runtime() as rt:
        print(rt.backend_ids)
        backend = rt.create_backend("CpuRef")
"""
import os as _os


def _core_built(package_dir):
    """Whether ``package_dir`` holds a compiled loader._core this Python can import."""
    from importlib.machinery import EXTENSION_SUFFIXES
    return any(_os.path.isfile(_os.path.join(package_dir, "_core" + suffix))
               for suffix in EXTENSION_SUFFIXES)


def _unbuilt_checkout_error(package_dir):
    """The ImportError for a source checkout imported before its compiled core was built: the
    checkout shadows any installed copy whenever its root is on sys.path (``python`` or
    ``python -m loader`` started in it)."""
    import sys
    from importlib.machinery import PathFinder

    root = _os.path.dirname(package_dir)
    real_root, real_package = _os.path.realpath(root), _os.path.realpath(package_dir)
    installed = None
    others = [p for p in sys.path if _os.path.realpath(p or _os.curdir) != real_root]
    finders = [lambda: PathFinder.find_spec(__name__, others)] + [
        (lambda f=f: f.find_spec(__name__, None)) for f in sys.meta_path
        if f is not PathFinder and hasattr(f, "find_spec")]
    for find in finders:
        try:
            spec = find()
        except Exception:  # a third-party finder's failure only means "not found there"
            continue
        for location in (spec and spec.submodule_search_locations) or ():
            if _os.path.realpath(location) != real_package and _core_built(location):
                installed = location
                break
        if installed:
            break
    try:
        cwd = " (the current directory)" if _os.path.realpath(_os.getcwd()) == real_root else ""
    except OSError:  # the current directory was removed
        cwd = ""
    message = (f"cannot import loader from the source checkout {package_dir}: its compiled core "
               f"(loader._core) is not built for this Python ({sys.implementation.cache_tag}). "
               f"Python found this checkout before any installed copy because its root, {root}, "
               f"is on sys.path{cwd}. ")
    if installed:
        message += (f"An installed copy is at {installed}: run Python from another directory "
                    f"(cd elsewhere) to use it, or build the checkout in place with "
                    f"`pip install -e .` in {root} to use the checkout.")
    else:
        message += (f"No installed copy was found: build the checkout in place with "
                    f"`pip install -e .` in {root}, or install it with `pip install .` and run "
                    f"Python from another directory.")
    return ImportError(message, name=__name__, path=package_dir)


# A source checkout (it holds _core.pyx, which installed copies do not) must have its own
# compiled core; otherwise say why it cannot be imported and what to do.
_HERE = _os.path.dirname(_os.path.abspath(__file__))
if _os.path.isfile(_os.path.join(_HERE, "_core.pyx")) and not _core_built(_HERE):
    raise _unbuilt_checkout_error(_HERE)
del _HERE, _core_built, _unbuilt_checkout_error

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
    BackendCrashedError,
    BackendCreationError,
    BackendError,
    BackendInternalError,
    BackendNotFoundError,
    BackendOutOfMemoryError,
    BackendStatusError,
    BackendTimeoutError,
    BackendUnsupportedError,
    CompiledNetworkError,
    FeatureNotAvailableError,
    InvalidArgumentError,
    InvalidLayerError,
    InvalidOptimizationError,
    InvalidSearchPathError,
    InvalidStateError,
    LayerNotSupportedError,
    LibraryClosedError,
    MissingBackendsError,
    NetworkError,
    NoBackendForLayerError,
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
    if name in ("Network", "LoadedNetwork"):
        from loader import networks
        return getattr(networks, name)
    if name == "shared_array":
        from loader.host.shared import shared_array
        return shared_array
    raise AttributeError(f"module 'loader' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"LAYERS", "LoadedNetwork", "Network", "shared_array"})


def get_include() -> str:
    """Directory holding ``backend_api.h``, for compiling a backend against this runtime."""
    return _os.path.join(_os.path.dirname(__file__), "include")


__all__ = [
    "BACKEND_API_VERSION",
    "ENVIRONMENT_VARIABLE",
    "LAYERS",
    "Backend",
    "BackendContext",
    "BackendCrashedError",
    "BackendCreationError",
    "BackendError",
    "BackendInternalError",
    "CompiledNetworkError",
    "BackendNotFoundError",
    "BackendOutOfMemoryError",
    "BackendStatusError",
    "BackendTimeoutError",
    "BackendUnsupportedError",
    "BackendVersion",
    "Capabilities",
    "FeatureNotAvailableError",
    "InvalidArgumentError",
    "InvalidLayerError",
    "InvalidOptimizationError",
    "InvalidSearchPathError",
    "InvalidStateError",
    "LayerNotSupportedError",
    "LayerSupport",
    "Library",
    "LibraryClosedError",
    "LoadedNetwork",
    "MemoryManager",
    "MissingBackendsError",
    "Network",
    "NetworkError",
    "NoBackendForLayerError",
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
    "shared_array",
]
