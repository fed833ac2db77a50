"""Discovery and loading (contract sections 4 and 5): from search paths to checked libraries.

The checks run in the contract's order and the first failure is the reason:

    file checks (name, filters, links, regular file, trust, duplicate)  -> loader._core.scan_directory
    ELF header and segments, needed libraries                           -> _core.inspect_elf_file, dependencies
    isolated probe (when asked)                                         -> loader.isolation.probe
    dlopen, entry points                                                -> loader._core.Library.open
    backend id                                                          -> check_backend_id
    version                                                             -> loader.versions.is_backend_compatible
    factory probe                                                       -> Library.probe_factory
    availability                                                        -> Library.unavailable_reason
    duplicate id                                                        -> loader.runtime.Runtime
"""
import logging
import os
import re
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from loader import _core, dependencies, isolation, paths
from loader.paths import SearchPath, validate_paths
from loader.reasons import PathReason, Reason
from loader.versions import BACKEND_API_VERSION, BackendVersion, is_backend_compatible

log = logging.getLogger("loader")

REGISTERED = "registered"
SKIPPED = "skipped"


@dataclass
class Entry:
    """One directory entry of one search path, and what became of it."""

    file: str                                # the path as found: search path + entry name
    canonical: Optional[str] = None          # fully resolved path, when it resolved
    reason: Optional[Reason] = None          # None while it is still a candidate, or registered
    detail: str = ""
    backend_id: Optional[str] = None
    version: Optional[BackendVersion] = None
    registered: bool = False
    deferred: bool = False                   # registered from the backend cache, without loading

    @property
    def status(self) -> str:
        return REGISTERED if self.registered else SKIPPED

    def skip(self, reason: Reason, detail: str) -> None:
        self.reason = reason
        self.detail = detail

    def log(self) -> None:
        """One line for the log: WARNING for a skipped candidate, INFO for a registration."""
        if self.registered:
            log.info("registered backend %r (Backend API %s) from %s%s", self.backend_id,
                     self.version, self.canonical,
                     " (deferred: loaded at first use)" if self.deferred else "")
        elif self.reason is Reason.INVALID_FILENAME:
            log.debug("skipped %s: %s", paths.text(self.file), self.reason.value)
        else:
            log.warning("skipped %s: %s (%s)", paths.text(self.file), self.reason.value,
                        paths.text(self.detail))

    def to_json(self) -> dict:
        """The report entry. Every string is valid UTF-8; a path that was not is also given
        exactly, base64-encoded, as ``file_base64`` / ``canonical_base64``."""
        result = {
            "file": self.file,
            "canonical": self.canonical,
            "status": self.status,
            "reason": None if self.reason is None else self.reason.value,
            "detail": paths.text(self.detail),
            "backend_id": self.backend_id,
            "version": None if self.version is None else str(self.version),
            "deferred": self.deferred,
        }
        for key in ("file", "canonical"):
            value = result[key]
            if value is not None and not paths.is_exact_text(value):
                result[key] = paths.text(value)
                result[key + "_base64"] = paths.base64_of(value)
        return result


def discover(search_paths: List[SearchPath], include_invalid: bool = True, name_filter=None,
             strict_permissions: bool = False) -> List[Entry]:
    """Every entry of every valid search path, in scan order. Entries whose ``reason`` is None
    are the candidates to load, each a distinct file."""
    seen = _core.FileSet()
    accepted: List[str] = []
    first_file: Dict[str, str] = {}  # canonical path of each candidate -> the file that was it
    entries: List[Entry] = []
    for index, search_path in enumerate(search_paths):
        if not search_path.valid:
            continue
        scanned, error = _core.scan_directory(os.fsencode(search_path.canonical), seen, accepted,
                                              include_invalid, name_filter, strict_permissions)
        if error is not None:
            log.warning("search path %r could not be listed: %s", search_path.path, error)
            search_paths[index] = replace(search_path, reason=PathReason.UNREADABLE, detail=error)
        for name, reason, canonical, detail in scanned:
            entry = Entry(file=os.path.join(search_path.path, os.fsdecode(name)), canonical=canonical)
            if reason is None:
                first_file.setdefault(canonical, entry.file)
            elif reason is Reason.DUPLICATE_FILE and canonical in first_file:
                # Name the other file, the one that won, not this one's own target.
                entry.skip(reason, f"same file as {first_file[canonical]}, already a candidate")
            else:
                entry.skip(reason, detail)
            entries.append(entry)
    return entries


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


_PRINTABLE_ID = re.compile(rb"[\x21-\x7e]+")


def check_backend_id(raw: Optional[bytes]) -> Tuple[Optional[str], str]:
    """(id, "") for a valid id, else (None, what is wrong with it). Contract section 5.3."""
    if raw is None:
        return None, "GetBackendId returned NULL"
    if raw == b"":
        return None, "GetBackendId returned an empty id"
    if raw == b"Unknown":
        return None, "GetBackendId returned the reserved id 'Unknown'"
    if len(raw) > _core.BACKEND_ID_MAX_LENGTH:
        return None, f"backend id is longer than {_core.BACKEND_ID_MAX_LENGTH} bytes"
    bad = None if _PRINTABLE_ID.fullmatch(raw) else next(b for b in raw if not 0x21 <= b <= 0x7E)
    if bad is not None:
        shown = raw.decode("ascii", "backslashreplace")
        return None, (f"backend id {shown!r} contains {chr(bad)!r}: "
                      f"only printable ASCII without spaces is allowed")
    return raw.decode("ascii"), ""


def load_candidate(entry: Entry, probe_timeout: Optional[float] = None) -> Optional["_core.Library"]:
    """Open and check one candidate file. Returns the library (accepted, still open) or None with
    ``entry`` marked skipped; a skipped library is already closed. With ``probe_timeout``, the
    file is first loaded in a child process (isolated probing) and skipped if that goes wrong."""
    # Everything that can be decided from the file alone, before any of its code runs.
    reason, detail, needed = _core.inspect_elf_file(entry.canonical)
    if reason is None and needed is not None and (needed[0] or needed[3]):
        problem = dependencies.dependency_problem(entry.canonical, paths.is_secure_execution(),
                                                  needed)
        if problem is not None:
            reason, detail = Reason.MISSING_DEPENDENCY, problem
    if reason is None and probe_timeout is not None:
        reason, detail = isolation.probe(entry.canonical, probe_timeout) or (None, "")
    if reason is not None:
        entry.skip(reason, detail)
        return None
    if log.isEnabledFor(logging.DEBUG):
        log.debug("loading %s", paths.text(entry.canonical if entry.file == entry.canonical
                                           else f"{entry.file} -> {entry.canonical}"))
    library, reason, detail = _core.Library.open(entry.canonical, elf_checked=True)
    if library is None:
        entry.skip(reason, detail)
        return None
    try:
        backend_id, problem = check_backend_id(library.read_backend_id())
        if backend_id is None:
            entry.skip(Reason.INVALID_BACKEND_ID, problem)
            return None
        entry.backend_id = backend_id
        entry.version = BackendVersion._from_checked(*library.read_version())  # two uint32
        if not is_backend_compatible(entry.version, BACKEND_API_VERSION):
            entry.skip(Reason.INCOMPATIBLE_VERSION,
                       f"backend built against Backend API {entry.version}, "
                       f"this runtime implements {BACKEND_API_VERSION}")
            return None
        library.accept(backend_id, entry.version.major, entry.version.minor)
        problem = library.probe_factory()
        if problem is not None:
            entry.skip(Reason.FACTORY_FAILED, problem)
            return None
        problem = library.unavailable_reason()          # rule 12.6
        if problem is not None:
            entry.skip(Reason.BACKEND_UNAVAILABLE, problem)
            return None
        entry.detail = _core.skew_detail(entry.version.minor)  # features an older minor lacks
        accepted, library = library, None
        return accepted
    finally:
        if library is not None:
            library.close()
