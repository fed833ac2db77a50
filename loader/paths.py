"""Search paths (contract section 3): which directories a runtime scans, and why others are not.

Precedence, highest first:

1. the override ``Runtime(dynamic_backends_path=P)`` / ``--path P``: one path, never split;
2. ``DYNAMIC_BACKEND_PATHS`` in the environment (colon-separated; set but empty disables
   dynamic loading; ignored in a secure-execution process);
3. the list compiled in at build time (by default, the directory of the bundled reference
   backend).
"""
import logging
import os
import stat
from dataclasses import dataclass
from typing import List, Optional, Sequence

from loader import _core
from loader.errors import InvalidSearchPathError
from loader.reasons import PathReason

ENVIRONMENT_VARIABLE = "DYNAMIC_BACKEND_PATHS"

log = logging.getLogger("loader")


@dataclass(frozen=True)
class SearchPath:
    """One path of the effective list, valid or not."""

    path: str
    reason: Optional[PathReason] = None
    detail: str = ""
    canonical: Optional[str] = None  # canonical directory, for valid paths

    @property
    def valid(self) -> bool:
        return self.reason is None

    def to_json(self) -> dict:
        return {"path": self.path, "valid": self.valid,
                "reason": None if self.reason is None else self.reason.value,
                "detail": self.detail}


def compiled_in_paths() -> str:
    """The colon-separated list fixed when the package was built."""
    try:
        from loader._build_config import COMPILED_IN_PATHS
    except ImportError:  # running from a tree that was built in place
        COMPILED_IN_PATHS = None
    if COMPILED_IN_PATHS is not None:
        return COMPILED_IN_PATHS
    import reference_backend
    return str(reference_backend.LIBRARY_DIR)


# A test hook: lets the suite exercise the secure-execution branch without a setuid binary.
_force_secure_execution: Optional[bool] = None


def is_secure_execution() -> bool:
    """Whether this process runs in secure-execution mode (setuid/setgid), as the dynamic
    linker judges it. In that mode the environment must not choose code to load."""
    if _force_secure_execution is not None:
        return _force_secure_execution
    return _core.is_secure_execution()


def _split(path_list: str) -> List[str]:
    return [p for p in path_list.split(":") if p]


def _coerce_override(override) -> str:
    if isinstance(override, os.PathLike):
        override = os.fspath(override)
    if isinstance(override, bytes):
        override = os.fsdecode(override)
    if not isinstance(override, str):
        raise InvalidSearchPathError(
            f"dynamic_backends_path must be a str or path-like, not {type(override).__name__}")
    return override


def requested_paths(override=None, environ=None) -> List[SearchPath]:
    """The raw path list before validation, plus a note if the environment was ignored.

    Returns SearchPath objects whose ``reason`` is set only for the environment variable
    ignored under secure execution; every other item still has to be validated."""
    if override is not None:
        return [SearchPath(_coerce_override(override))]
    environ = os.environ if environ is None else environ
    value = environ.get(ENVIRONMENT_VARIABLE)
    if value is not None:
        if not is_secure_execution():
            return [SearchPath(p) for p in _split(value)]
        log.warning("%s ignored: %s (secure-execution process)", ENVIRONMENT_VARIABLE,
                    PathReason.IGNORED_SECURE_EXECUTION.value)
        ignored = SearchPath(value, PathReason.IGNORED_SECURE_EXECUTION,
                             f"{ENVIRONMENT_VARIABLE} is ignored in a setuid/setgid process")
        return [ignored] + [SearchPath(p) for p in _split(compiled_in_paths())]
    return [SearchPath(p) for p in _split(compiled_in_paths())]


def _untrusted(st: os.stat_result) -> Optional[str]:
    """Why a directory is not trusted to hold code in strict mode, or None."""
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"mode {stat.S_IMODE(st.st_mode):04o}: writable by others than its owner"
    if st.st_uid not in (0, os.getuid()):
        return f"owned by uid {st.st_uid}, neither root nor the current user"
    return None


def _check(path: str, seen: dict, position: int, strict: bool = False) -> SearchPath:
    """Validate one path: non-empty, exists, directory, absolute, not already listed."""
    if path == "":
        return SearchPath(path, PathReason.EMPTY, "empty path")
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return SearchPath(path, PathReason.NOT_FOUND, "no such directory")
    except OSError as error:
        return SearchPath(path, PathReason.UNREADABLE, error.strerror or str(error))
    except ValueError as error:  # embedded NUL
        return SearchPath(path, PathReason.NOT_FOUND, str(error))
    if not stat.S_ISDIR(st.st_mode):
        return SearchPath(path, PathReason.NOT_A_DIRECTORY, "not a directory")
    if not os.path.isabs(path):
        return SearchPath(path, PathReason.NOT_ABSOLUTE, "not an absolute path")
    if not os.access(path, os.R_OK | os.X_OK):
        return SearchPath(path, PathReason.UNREADABLE, "directory cannot be listed")
    why = _untrusted(st) if strict else None
    if why:
        return SearchPath(path, PathReason.UNTRUSTED_PERMISSIONS, why)
    canonical = os.path.realpath(path)
    first_position, first = seen.setdefault((st.st_dev, st.st_ino), (position, path))
    if first_position != position:
        return SearchPath(path, PathReason.DUPLICATE_PATH, f"same directory as {first}",
                          canonical)
    return SearchPath(path, None, "", canonical)


def validate_paths(paths: Sequence[SearchPath], warn: bool = True,
                   strict_permissions: bool = False) -> List[SearchPath]:
    """Validate each path in order; invalid ones keep their place with a reason."""
    seen: dict = {}
    result = []
    for position, item in enumerate(paths):
        checked = item if item.reason is not None else _check(item.path, seen, position,
                                                              strict_permissions)
        if warn and checked.reason is not None and item.reason is None:
            log.warning("search path %r dropped: %s (%s)", checked.path, checked.reason.value,
                        checked.detail)
        result.append(checked)
    return result


def resolve_search_paths(override=None, strict_permissions: bool = False) -> List[SearchPath]:
    """The effective search paths, each with its verdict."""
    return validate_paths(requested_paths(override), strict_permissions=strict_permissions)


def get_backend_paths(override=None) -> List[str]:
    """The valid search paths, in order."""
    return [p.path for p in resolve_search_paths(override) if p.valid]
