"""The backend cache behind deferred loading: what each backend file is, without loading it.

One file per user (``$XDG_CACHE_HOME/dynamic-backends/backends.cache``, else
``~/.cache/dynamic-backends/backends.cache``) records, for every backend file that passed every
loading check, its canonical path, its identity (device, inode, size, modification and change
times in ns) and what loading found (backend id, version). A record is used only while the
file's identity is unchanged and the cache was written by this loader version for this Backend
API; a file that changed or has no record is loaded eagerly and recorded again.

The records are binary, with a fixed-size part each (``loader/_cache.pxi`` has the layout), so
that a deferred scan matches every file it finds against them in C, with the identity its own
stat just read: registering a cached backend costs no system call of its own.

The cache is only a hint for *when* to load: a deferred backend is still loaded and fully checked
before its first use. Even so it is trusted only as far as a file the user controls: it is never
read or written in a secure-execution process or in strict-permissions mode, and it is refused
when its directory is a symbolic link or not a directory, when the file is a symbolic link or not
a regular file, and when either is not owned by the current user or is writable by others. A
missing directory or file is an empty cache. A refused directory is neither read nor written,
with a WARNING; a cache file that cannot be read, is refused, corrupt, truncated, too large or
malformed is ignored with a WARNING (and replaced at the next write). It is written atomically
(a private temporary file renamed over it).

These rules are applied in C, each in one place (``loader/_cache.pxi``): ``_core.CacheRecords.
read_file`` opens the directory itself, checks it, opens the file relative to it (never through
a symbolic link, never waiting on a FIFO), checks it, reads it bounded and parses it; writing
checks the directory with ``_core.untrusted_cache_directory``, the same rule.
"""
import logging
import os
import tempfile
from typing import List, Optional, Tuple

from loader import _core, environment, paths
from loader.versions import BACKEND_API_VERSION, BackendVersion

log = logging.getLogger("loader")

FILE_NAME = "backends.cache"
MAX_BYTES = 8 << 20        # a cache larger than this is not read
MAX_RECORDS = 20000        # records beyond this are not kept (the oldest go first)

Identity = Tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns


def identity_of(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def file_identity(path: str) -> Optional[Identity]:
    """The identity of the file at ``path`` (following links), or None if it cannot be stat-ed."""
    try:
        return identity_of(os.stat(path))
    except (OSError, ValueError):
        return None


def loader_version() -> str:
    """What a cache must have been written by: this loader, for this Backend API."""
    from loader import __version__
    return f"{__version__}/api-{BACKEND_API_VERSION}"


class BackendCache:
    """The records of one cache file (``records``, a ``_core.CacheRecords``); ``usable`` is
    False when the cache must not be used at all (then nothing is read or written)."""

    def __init__(self, directory: Optional[str]):
        self.directory = directory
        self.path = None if directory is None else os.path.join(directory, FILE_NAME)
        self.records = _core.CacheRecords()
        self._replace = False      # the file on disk is unreadable: write it again

    @property
    def usable(self) -> bool:
        return self.directory is not None

    def lookup(self, canonical: str, identity: Optional[Identity]
               ) -> Optional[Tuple[str, BackendVersion]]:
        """(backend_id, version) recorded for ``canonical`` with exactly ``identity``, or None."""
        hit = self.records.lookup(canonical, identity)
        return None if hit is None else hit[:2]

    def store(self, canonical: str, identity: Optional[Identity], backend_id: str,
              version: BackendVersion) -> None:
        if self.usable and identity is not None:
            self.records.store(canonical, identity, backend_id, version.major, version.minor)

    def forget(self, canonical: str) -> None:
        self.records.forget(canonical)

    def entries(self) -> List[Tuple[str, Identity, str, BackendVersion]]:
        """Every record: (canonical path, identity, backend id, version), oldest first."""
        return [(path, identity, backend_id, BackendVersion._from_checked(*version))
                for path, identity, backend_id, version in self.records.items()]

    # -- reading -------------------------------------------------------------------------------

    def read(self) -> None:
        """Load the records from the cache file; a missing directory or file is an empty
        cache, anything wrong with either a WARNING and an empty cache."""
        if not self.usable:
            return
        records, directory_problem, file_problem = _core.CacheRecords.read_file(
            self.directory, FILE_NAME, loader_version(), MAX_RECORDS, MAX_BYTES)
        if directory_problem is not None:
            log.warning("backend cache %s not used: %s", paths.text(self.directory),
                        directory_problem)
            self.directory = self.path = None
        elif file_problem is not None:
            log.warning("backend cache %s ignored: %s", paths.text(self.path), file_problem)
            self._replace = True
        elif records is not None:
            self.records = records

    # -- writing -------------------------------------------------------------------------------

    def write(self) -> None:
        """Write the records if they changed: a private temporary file in the cache directory,
        renamed over the cache. Failures are logged, never raised."""
        if not self.usable or not (self.records.changed or self._replace):
            return
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            problem = _core.untrusted_cache_directory(self.directory)
            if problem:
                log.warning("backend cache %s not written: %s", paths.text(self.directory),
                            problem)
                return
            data = self.records.serialize(loader_version(), MAX_RECORDS)
            fd, tmp = tempfile.mkstemp(prefix=".backends.", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "wb") as f:  # mkstemp: mode 0600
                    f.write(data)
                os.replace(tmp, self.path)
                tmp = None
            finally:
                if tmp is not None:
                    os.unlink(tmp)
            self.records.mark_written()
            self._replace = False
        except (OSError, ValueError) as error:
            log.warning("backend cache %s not written: %s", paths.text(self.path), error)


def open_cache(strict_permissions: bool, environ=None) -> BackendCache:
    """The current user's cache, read; unusable in secure execution and strict mode."""
    if paths.is_secure_execution():
        log.info("backend cache not used: secure execution")
        return BackendCache(None)
    if strict_permissions:
        log.info("backend cache not used: strict permissions")
        return BackendCache(None)
    directory = environment.cache_directory(environ)
    if directory is None:
        log.info("backend cache not used: no cache directory (XDG_CACHE_HOME and HOME unset)")
        return BackendCache(None)
    cache = BackendCache(directory)
    cache.read()
    return cache

