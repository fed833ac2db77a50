"""Discovery and loading (docs/loading.md): from search paths to checked libraries.

The checks run in the documented order and the first failure is the reason:

    file checks (name, filters, links, regular file, trust, duplicate)  -> loader._core.scan_directory
    ELF header and segments, needed libraries, isolated probe (when
    asked), dlopen, entry points, backend id, version, factory probe,
    availability                                                        -> loader._core.load_backend
    requested ids, duplicate id                                         -> loader._core.register_candidates

``load_backend`` runs a candidate's checks in one call, in C but for the rare steps that need
Python (a needed library not loaded yet, the isolated probe).
"""
import logging
import os
from dataclasses import replace
from typing import Dict, List, Optional, Tuple

from loader import _core, dependencies, paths  # noqa: F401 (load_backend asks dependencies)
from loader.paths import SearchPath, validate_paths
from loader.reasons import PathReason, Reason

log = logging.getLogger("loader")

Entry = _core.Entry  # one directory entry and what became of it (its docstring has the fields)


def discover(search_paths: List[SearchPath], include_invalid: bool = True, name_filter=None,
             strict_permissions: bool = False, cache=None) -> List[Entry]:
    """Every entry of every valid search path, in scan order. Entries whose ``reason`` is None
    are the candidates to load, each a distinct file. With a backend ``cache`` (its
    ``_core.CacheRecords``), each candidate comes with what the cache knows of it (``known``,
    ``backend_id``, ``version``) or, when it knows nothing, the identity to record it under
    (``identity``)."""
    seen = _core.FileSet()
    accepted: List[str] = []
    entries: List[Entry] = []
    for index, search_path in enumerate(search_paths):
        if not search_path.valid:
            continue
        prefix = search_path.path if search_path.path.endswith("/") else search_path.path + "/"
        scanned, error = _core.scan_directory(os.fsencode(search_path.canonical), seen, accepted,
                                              include_invalid, name_filter, strict_permissions,
                                              prefix=prefix, cache=cache)
        if error is not None:
            log.warning("search path %r could not be listed: %s", search_path.path, error)
            search_paths[index] = replace(search_path, reason=PathReason.UNREADABLE, detail=error)
        entries += scanned
    if seen.duplicates:
        _name_first_files(entries)
    return entries


def _name_first_files(entries: List[Entry]) -> None:
    """A duplicate-file entry names the file that won (the first candidate that is the same
    file), not its own target."""
    first_file: Dict[str, str] = {}  # canonical path of each candidate -> the file that was it
    for entry in entries:
        if entry.reason is None:
            first_file.setdefault(entry.canonical, entry.file)
        elif entry.reason is Reason.DUPLICATE_FILE and entry.canonical in first_file:
            entry.detail = f"same file as {first_file[entry.canonical]}, already a candidate"


def get_shared_objects(paths) -> List[str]:
    """Canonical paths of the distinct backend files found in ``paths``, in load order.
    Invalid paths are ignored; nothing is opened."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    search_paths = [SearchPath(os.fsdecode(os.fspath(p))) for p in paths]
    seen = _core.FileSet()
    accepted: List[str] = []
    for search_path in validate_paths(search_paths, warn=False):
        if search_path.valid:
            _core.scan_directory(os.fsencode(search_path.canonical), seen, accepted,
                                 include_invalid=False, candidates_only=True)
    return accepted


def check_backend_id(raw: Optional[bytes]) -> Tuple[Optional[str], str]:
    """(id, "") for a valid id, else (None, what is wrong with it); None stands for
    GetBackendId returning NULL (the rule is _core._checked_backend_id)."""
    return _core.check_backend_id(raw)


def load_candidate(entry: Entry, probe_timeout: Optional[float] = None,
                   secure: Optional[bool] = None) -> Optional["_core.Library"]:
    """Open and check one candidate file. Returns the library (accepted, still open) or None with
    ``entry`` marked skipped; a skipped library is already closed. With ``probe_timeout``, the
    file is first loaded in a child process (isolated probing) and skipped if that goes wrong.
    ``secure``: whether the process runs in secure-execution mode (asked when None)."""
    return _core.load_entry(entry, probe_timeout,
                            paths.is_secure_execution() if secure is None else secure,
                            announcer(entry) if log.isEnabledFor(logging.DEBUG) else None)


def announcer(entry: Entry):
    """What load_backend calls just before dlopen: the DEBUG line naming the file."""
    path = (entry.canonical if entry.file == entry.canonical
            else f"{entry.file} -> {entry.canonical}")
    return lambda: log.debug("loading %s", paths.text(path))
