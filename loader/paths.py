"""Search paths (docs/loading.md, Search paths): which directories a runtime scans, and why
others are not.

Precedence, highest first:

1. the override ``Runtime(dynamic_backends_path=P)`` / ``--path P``: one path, never split;
   it replaces everything below, ``DYNAMIC_BACKEND_ADD_PATHS`` included;
2. ``DYNAMIC_BACKEND_ADD_PATHS`` (colon-separated), scanned first, then
3. ``DYNAMIC_BACKEND_PATHS`` in the environment (colon-separated; set but empty empties this
   list) or, when it is unset, the list compiled in at build time (by default, the directory of
   the bundled reference backend).

Both variables are ignored in a secure-execution process. Each path records where it came from
(``source``): ``override``, ``environment-add``, ``environment`` or ``compiled-in``.
"""
import logging
import os
import stat
from dataclasses import dataclass
from typing import List, Optional, Sequence

from loader import _core, environment
from loader.errors import InvalidSearchPathError
from loader.reasons import PathReason

ENVIRONMENT_VARIABLE = environment.PATHS
ADD_VARIABLE = environment.ADD_PATHS

# Where a search path came from.
OVERRIDE = "override"
ENVIRONMENT_ADD = "environment-add"
ENVIRONMENT = "environment"
COMPILED_IN = "compiled-in"

log = logging.getLogger("loader")


@dataclass(frozen=True)
class SearchPath:
    """One path of the effective list, valid or not."""

    path: str
    reason: Optional[PathReason] = None
    detail: str = ""
    canonical: Optional[str] = None  # canonical directory, for valid paths
    source: str = COMPILED_IN          # override, environment-add, environment or compiled-in

    @property
    def valid(self) -> bool:
        return self.reason is None

    def to_json(self) -> dict:
        result = {"path": text(self.path), "valid": self.valid,
                  "reason": None if self.reason is None else self.reason.value,
                  "detail": text(self.detail), "source": self.source}
        if not is_exact_text(self.path):
            result["path_base64"] = base64_of(self.path)
        return result


# -- paths in JSON ------------------------------------------------------------------------------
# File names are bytes; Python decodes the undecodable ones to lone surrogates, which strict
# JSON parsers refuse. The report keeps every string valid UTF-8 (undecodable bytes shown as
# \xNN) and carries the exact bytes, base64-encoded, beside each path that needed it.

def text(value: str) -> str:
    """``value`` as valid UTF-8 text: bytes that were not UTF-8 are written ``\\xNN``."""
    if is_exact_text(value):
        return value
    return _raw(value).decode("utf-8", "backslashreplace")


def one_line(value) -> str:
    """A file name, path or message (str or bytes) as text for a line of a human-readable
    listing: bytes that are not UTF-8 written ``\\xNN`` (as in the report), and every character
    that is not printable (a newline, a tab, an escape) escaped as Python writes it, so that one
    name is always one line."""
    if isinstance(value, str):
        if value.isascii() and value.isprintable():
            return value
        value = _raw(value)
    shown = value.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown)


def _raw(value: str) -> bytes:
    """The bytes behind a path: what os.fsencode gives, or, for a surrogate that no file name
    decodes to (passed in by a caller), its UTF-8 form."""
    try:
        return os.fsencode(value)
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")


def is_exact_text(value: str) -> bool:
    """Whether ``value`` holds no lone surrogate (the trace of a byte that was not UTF-8)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def base64_of(value: str) -> str:
    """The exact bytes of a file name or path, base64 (``base64.b64decode`` gives them back)."""
    import base64
    return base64.b64encode(_raw(value)).decode("ascii")


# -- the compiled-in list -----------------------------------------------------------------------

def build_time_paths() -> Optional[str]:
    """``DYNAMIC_BACKEND_PATHS`` as setup.py saw it at build time, or None when it was unset."""
    try:
        from loader._build_config import COMPILED_IN_PATHS
    except ImportError:  # running from a tree that was built in place
        return None
    return COMPILED_IN_PATHS


def compiled_in_paths() -> str:
    """The colon-separated list fixed when the package was built."""
    paths = build_time_paths()
    if paths is not None:
        return paths
    import reference_backend
    return str(reference_backend.LIBRARY_DIR)


def compiled_in_note() -> Optional[str]:
    """A warning for the report when the compiled-in list was set at build time and leaves out
    the bundled reference backend's directory; None otherwise."""
    paths = build_time_paths()
    if paths is None:
        return None
    import reference_backend
    bundled = os.path.realpath(reference_backend.LIBRARY_DIR)
    if any(os.path.realpath(p) == bundled for p in _split(paths) if os.path.isabs(p)):
        return None
    return (f"the compiled-in search path list {paths!r} was taken from {ENVIRONMENT_VARIABLE} "
            f"at build time and does not include the bundled reference backend's directory "
            f"({reference_backend.LIBRARY_DIR}): {reference_backend.BACKEND_ID} is not found "
            f"unless a search path holds it")


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
    if type(override) is str:  # the common case first: the PathLike check is slow the first time
        return override
    if isinstance(override, os.PathLike):
        override = os.fspath(override)
    if isinstance(override, bytes):
        override = os.fsdecode(override)
    if not isinstance(override, str):
        raise InvalidSearchPathError(
            f"dynamic_backends_path must be a str or path-like, not {type(override).__name__}")
    return override


def _from_variable(variable: str, value: str, source: str) -> List[SearchPath]:
    """The paths of one environment variable, or one item saying it was ignored."""
    if not is_secure_execution():
        return [SearchPath(p, source=source) for p in _split(value)]
    log.warning("%s ignored: %s (secure-execution process)", variable,
                PathReason.IGNORED_SECURE_EXECUTION.value)
    return [SearchPath(value, PathReason.IGNORED_SECURE_EXECUTION,
                       f"{variable} is ignored in a setuid/setgid process", source=source)]


def requested_paths(override=None, environ=None) -> List[SearchPath]:
    """The raw path list before validation, plus a note for each variable that was ignored.

    Returns SearchPath objects whose ``reason`` is set only for an environment variable
    ignored under secure execution; every other item still has to be validated."""
    if override is not None:
        return [SearchPath(_coerce_override(override), source=OVERRIDE)]
    environ = os.environ if environ is None else environ
    result = []
    added = environ.get(ADD_VARIABLE)
    if added is not None:
        result += _from_variable(ADD_VARIABLE, added, ENVIRONMENT_ADD)
    value = environ.get(ENVIRONMENT_VARIABLE)
    if value is not None:
        result += _from_variable(ENVIRONMENT_VARIABLE, value, ENVIRONMENT)
        if not is_secure_execution():  # the variable replaces the compiled-in list
            return result
    return result + [SearchPath(p, source=COMPILED_IN) for p in _split(compiled_in_paths())]


def _untrusted(st: os.stat_result) -> Optional[str]:
    """Why a directory is not trusted to hold code in strict mode, or None."""
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"mode {stat.S_IMODE(st.st_mode):04o}: writable by others than its owner"
    if st.st_uid not in (0, os.getuid()):
        return f"owned by uid {st.st_uid}, neither root nor the current user"
    return None


def _check(item: SearchPath, seen: dict, position: int, strict: bool = False) -> SearchPath:
    """Validate one path: non-empty, absolute, exists, directory, not already listed. A
    relative path is refused whatever it names from the current directory, so the same entry
    gets the same reason in every list and from every directory."""
    path = item.path

    def refuse(reason: PathReason, detail: str, canonical: Optional[str] = None) -> SearchPath:
        return SearchPath(path=path, reason=reason, detail=detail, canonical=canonical,
                          source=item.source)

    if path == "":
        return refuse(PathReason.EMPTY, "empty path")
    if not os.path.isabs(path):
        return refuse(PathReason.NOT_ABSOLUTE, "not an absolute path")
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return refuse(PathReason.NOT_FOUND, "no such directory" + _list_hint(item))
    except OSError as error:
        return refuse(PathReason.UNREADABLE, error.strerror or str(error))
    except ValueError as error:  # embedded NUL, or a surrogate no file name can hold
        return refuse(PathReason.NOT_FOUND, str(error))
    if not stat.S_ISDIR(st.st_mode):
        return refuse(PathReason.NOT_A_DIRECTORY, "not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        return refuse(PathReason.UNREADABLE, "directory cannot be listed")
    why = _untrusted(st) if strict else None
    if why:
        return refuse(PathReason.UNTRUSTED_PERMISSIONS, why)
    canonical = _core.real_path(path) or os.path.realpath(path)
    first_position, first = seen.setdefault((st.st_dev, st.st_ino), (position, path))
    if first_position != position:
        return refuse(PathReason.DUPLICATE_PATH, f"same directory as {first}", canonical)
    return SearchPath(path=path, canonical=canonical, source=item.source)


def _list_hint(item: SearchPath) -> str:
    """For an override that looks like a colon-separated list of existing directories: say that
    the override is one directory and how to give a list."""
    if item.source != OVERRIDE or ":" not in item.path:
        return ""
    parts = _split(item.path)
    if not parts or not all(os.path.isdir(p) for p in parts):
        return ""
    return (f" (the override, --path or dynamic_backends_path, is one directory and is never "
            f"split on ':'; {', '.join(parts)} exist: to scan several directories, list them "
            f"in {ENVIRONMENT_VARIABLE} or {ADD_VARIABLE})")


def validate_paths(paths: Sequence[SearchPath], warn: bool = True,
                   strict_permissions: bool = False) -> List[SearchPath]:
    """Validate each path in order; invalid ones keep their place with a reason."""
    seen: dict = {}
    result = []
    for position, item in enumerate(paths):
        checked = item if item.reason is not None else _check(item, seen, position,
                                                              strict_permissions)
        if warn and checked.reason is not None and item.reason is None:
            log.warning("search path %r (%s) dropped: %s (%s)", checked.path, checked.source,
                        checked.reason.value, checked.detail)
        result.append(checked)
    return result


def command_line_path(path: str) -> str:
    """A directory the user typed on the command line (``--path``), made absolute against the
    current directory, as a shell user expects (the environment variables keep their
    absolute-only rule, as the dynamic linker's own do). Raises InvalidSearchPathError with the
    reason when it is not a usable directory: a path named explicitly that cannot be scanned is
    the user's mistake, not a scan that found nothing."""
    absolute = os.path.abspath(path) if path else path
    [checked] = validate_paths([SearchPath(absolute, source=OVERRIDE)], warn=False)
    if not checked.valid:
        shown = one_line(path) if path else "''"
        raise InvalidSearchPathError(f"--path {shown}: {checked.reason.value} "
                                     f"({one_line(checked.detail)})")
    return absolute


def resolve_search_paths(override=None, strict_permissions: bool = False) -> List[SearchPath]:
    """The effective search paths, each with its verdict."""
    return validate_paths(requested_paths(override), strict_permissions=strict_permissions)


def get_backend_paths(override=None) -> List[str]:
    """The valid search paths, in order."""
    return [p.path for p in resolve_search_paths(override) if p.valid]
