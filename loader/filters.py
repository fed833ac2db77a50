"""Which backends an operator allows (contract section 6, ``filtered-out``): decided from the file
name alone, before any file is opened.

``DYNAMIC_BACKEND_SELECT``: comma-separated globs on ``<vendor>_<name>``; when set and not empty,
only matching backends are considered. ``DYNAMIC_BACKEND_DISABLE``: globs of backends never
considered. Disable wins over select.
"""
import fnmatch
import os
from typing import Iterable, Optional, Sequence

SELECT_VARIABLE = "DYNAMIC_BACKEND_SELECT"
DISABLE_VARIABLE = "DYNAMIC_BACKEND_DISABLE"
_SUFFIX = "_backend.so"


def _globs(value) -> Sequence[str]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    return tuple(g.strip() for g in value if g and g.strip())


class BackendFilter:
    """Callable on a backend file name: whether the operator allows it."""

    def __init__(self, select: Iterable[str] = (), disable: Iterable[str] = ()):
        self.select = _globs(select)
        self.disable = _globs(disable)

    def __bool__(self) -> bool:
        return bool(self.select or self.disable)

    def __call__(self, file_name: str) -> bool:
        stem = file_name[:file_name.index(_SUFFIX)] if _SUFFIX in file_name else file_name
        if any(fnmatch.fnmatchcase(stem, g) for g in self.disable):
            return False
        return not self.select or any(fnmatch.fnmatchcase(stem, g) for g in self.select)


def backend_filter(select=None, disable=None, environ=None) -> Optional[BackendFilter]:
    """The filter from arguments, or else the environment; None when nothing is filtered."""
    environ = os.environ if environ is None else environ
    result = BackendFilter(select if select is not None else environ.get(SELECT_VARIABLE),
                           disable if disable is not None else environ.get(DISABLE_VARIABLE))
    return result if result else None
