"""Which backends an operator allows (``filtered-out``; docs/loading.md, Hardening): decided
from the file name alone, before any file is opened.

``DYNAMIC_BACKEND_SELECT``: comma-separated globs; when set and not empty, only matching backend
files are considered. ``DYNAMIC_BACKEND_DISABLE``: globs of backend files never considered.
Disable wins over select. ``Runtime(select=..., disable=...)`` replace the variables.

A pattern is a shell glob (``*``, ``?``, ``[...]``) matched, ignoring ASCII case, against two
keys of the file name ``Acme_Npu_backend.so.2``: its ``<vendor>_<name>`` (``Acme_Npu``) and
the whole name. The backend id (what ``GetBackendId`` returns) is not known before the file is
opened, so it never matches: ``AcmeNpu`` selects nothing.
"""
import fnmatch
import logging
from typing import Dict, List, Optional, Sequence, Tuple

from loader import environment

SELECT_VARIABLE = environment.SELECT
DISABLE_VARIABLE = environment.DISABLE
_SUFFIX = "_backend.so"

log = logging.getLogger("loader")


def _globs(value, what: str) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    elif not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(f"{what} must be a comma-separated string or a list of glob patterns, "
                        f"not {type(value).__name__}")
    result = []
    for glob in value:
        if not isinstance(glob, str):
            raise TypeError(f"{what} patterns must be strings, not {type(glob).__name__}")
        if glob.strip():
            result.append(glob.strip())
    return tuple(result)


def filter_keys(file_name: str) -> Tuple[str, str]:
    """What the patterns are matched against: ``<vendor>_<name>`` and the whole file name."""
    stem = file_name[:file_name.index(_SUFFIX)] if _SUFFIX in file_name else file_name
    return stem, file_name


def _first_match(keys: Sequence[str], patterns: Sequence[str]) -> Optional[Tuple[str, str]]:
    """(pattern, key) of the first pattern matching a key, ignoring ASCII case; or None."""
    lowered = [k.lower() for k in keys]
    for pattern in patterns:
        for key, low in zip(keys, lowered):
            if fnmatch.fnmatchcase(low, pattern.lower()):
                return pattern, key
    return None


class BackendFilter:
    """Callable on a backend file name: None when the operator allows it, else the detail of its
    ``filtered-out`` skip (which setting, which pattern, which key)."""

    def __init__(self, select=(), disable=(), select_source: str = SELECT_VARIABLE,
                 disable_source: str = DISABLE_VARIABLE):
        self.select = _globs(select, "select")
        self.disable = _globs(disable, "disable")
        self.select_source = select_source
        self.disable_source = disable_source
        self._matched_select: Dict[str, int] = {p: 0 for p in self.select}

    def __bool__(self) -> bool:
        return bool(self.select or self.disable)

    def __call__(self, file_name: str) -> Optional[str]:
        keys = filter_keys(file_name)
        disabled = _first_match(keys, self.disable)
        if disabled is not None:
            pattern, key = disabled
            return f"excluded by {self.disable_source} pattern {pattern!r} (matched {key!r})"
        if not self.select:
            return None
        selected = _first_match(keys, self.select)
        if selected is None:
            return (f"not selected by {self.select_source}={','.join(self.select)!r}: no pattern "
                    f"matches {keys[0]!r} or {keys[1]!r} (patterns match <vendor>_<name> or "
                    f"the file name, not the backend id)")
        self._matched_select[selected[0]] += 1
        return None

    def unmatched_select(self) -> List[str]:
        """Select patterns that matched no candidate so far."""
        return [p for p, count in self._matched_select.items() if count == 0]

    def warn_unmatched(self) -> None:
        for pattern in self.unmatched_select():
            log.warning("%s pattern %r matches no backend file: patterns are globs on "
                        "<vendor>_<name> (e.g. 'Acme_Npu') or the file name, ignoring case; "
                        "the backend id is not known before a file is opened",
                        self.select_source, pattern)

    def to_json(self) -> dict:
        """The active filters, for the scan report."""
        return {
            "select": list(self.select), "select_source": self.select_source if self.select else None,
            "disable": list(self.disable),
            "disable_source": self.disable_source if self.disable else None,
            "unmatched_select": self.unmatched_select(),
        }


def backend_filter(select=None, disable=None, environ=None) -> BackendFilter:
    """The filter from arguments, or else the environment (false when nothing is filtered)."""
    environ = environment._environ(environ)
    result = BackendFilter(
        select if select is not None else environ.get(SELECT_VARIABLE),
        disable if disable is not None else environ.get(DISABLE_VARIABLE),
        select_source="Runtime(select=...)" if select is not None else SELECT_VARIABLE,
        disable_source="Runtime(disable=...)" if disable is not None else DISABLE_VARIABLE)
    return result
