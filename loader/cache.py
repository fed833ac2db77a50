"""The backend cache behind deferred loading: what each backend file is, without loading it.

One JSON file per user (``$XDG_CACHE_HOME/dynamic-backends/backends.json``, else
``~/.cache/dynamic-backends/backends.json``) maps the canonical path of every backend file that
passed every loading check to the file's identity (device, inode, size, modification and change
times in ns) and what loading found (backend id, version). A record is used only while the file's
identity is unchanged and the cache was written by this loader version for this Backend API; a
file that changed or has no record is loaded eagerly and recorded again.

The cache is only a hint for *when* to load: a deferred backend is still loaded and fully checked
before its first use. Even so it is trusted only as far as a file the user controls: it is never
read or written in a secure-execution process or in strict-permissions mode, and it is refused
when it or its directory is not owned by the current user or is writable by others. A cache that
cannot be read, is corrupt, truncated, too large or malformed is ignored with a WARNING (and
replaced at the next write); it is written atomically (a private temporary file renamed over it).
"""
import json
import logging
import os
import stat
import tempfile
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from loader import environment, paths
from loader.versions import BACKEND_API_VERSION, BackendVersion, is_backend_compatible

log = logging.getLogger("loader")

FORMAT = "dynamic-backends-cache/1"
FILE_NAME = "backends.json"
MAX_BYTES = 8 << 20        # a cache larger than this is not read
MAX_RECORDS = 20000        # records beyond this are not kept
_U64 = (1 << 64) - 1
_U32 = (1 << 32) - 1
_I64 = (1 << 63) - 1

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


@dataclass(frozen=True)
class Record:
    identity: Identity
    backend_id: str
    version: BackendVersion

    def to_json(self) -> dict:
        dev, ino, size, mtime_ns, ctime_ns = self.identity
        return {"dev": dev, "ino": ino, "size": size, "mtime_ns": mtime_ns, "ctime_ns": ctime_ns,
                "backend_id": self.backend_id,
                "version": [self.version.major, self.version.minor]}


class BackendCache:
    """The records of one cache file; ``usable`` is False when the cache must not be used at all
    (then nothing is read or written)."""

    def __init__(self, directory: Optional[str]):
        self.directory = directory
        self.path = None if directory is None else os.path.join(directory, FILE_NAME)
        self.records: Dict[str, Record] = {}
        self.changed = False

    @property
    def usable(self) -> bool:
        return self.directory is not None

    def lookup(self, canonical: str, identity: Optional[Identity]) -> Optional[Record]:
        record = self.records.get(canonical)
        if record is None or identity is None or record.identity != identity:
            return None
        return record

    def store(self, canonical: str, identity: Optional[Identity], backend_id: str,
              version: BackendVersion) -> None:
        if not self.usable or identity is None:
            return
        record = Record(identity, backend_id, version)
        if self.records.get(canonical) != record:
            self.records[canonical] = record
            self.changed = True

    def forget(self, canonical: str) -> None:
        if self.records.pop(canonical, None) is not None:
            self.changed = True

    # -- reading -------------------------------------------------------------------------------

    def read(self) -> None:
        """Load the records from the cache file; a missing file is an empty cache, anything
        wrong with it a WARNING and an empty cache."""
        if not self.usable:
            return
        problem = _untrusted_directory(self.directory)
        if problem == "missing":
            return
        if problem:
            log.warning("backend cache %s not used: %s", paths.text(self.directory), problem)
            self.directory = self.path = None
            return
        try:
            data = _read_bounded(self.path)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as error:
            log.warning("backend cache %s ignored: %s", paths.text(self.path), error)
            self.changed = True  # replace it
            return
        try:
            self.records = _parse(data)
        except (ValueError, TypeError, KeyError, RecursionError) as error:
            log.warning("backend cache %s ignored: %s", paths.text(self.path), error)
            self.records = {}
            self.changed = True

    # -- writing -------------------------------------------------------------------------------

    def write(self) -> None:
        """Write the records if they changed: a private temporary file in the cache directory,
        renamed over the cache. Failures are logged, never raised."""
        if not self.usable or not self.changed:
            return
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            problem = _untrusted_directory(self.directory)
            if problem:
                log.warning("backend cache %s not written: %s", paths.text(self.directory),
                            problem)
                return
            records = dict(list(self.records.items())[-MAX_RECORDS:])
            text = json.dumps({"format": FORMAT, "loader": loader_version(),
                               "files": {k: r.to_json() for k, r in records.items()}},
                              separators=(",", ":"))
            fd, tmp = tempfile.mkstemp(prefix=".backends.", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 0600
                    f.write(text)
                os.replace(tmp, self.path)
                tmp = None
            finally:
                if tmp is not None:
                    os.unlink(tmp)
            self.changed = False
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


def _untrusted_directory(directory: str) -> Optional[str]:
    """Why ``directory`` must not hold the cache, "missing" if it does not exist, else None."""
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as error:
        return str(error)
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory (or a symbolic link)"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}, not by the current user"
    if st.st_mode & 0o022:
        return f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _read_bounded(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_uid != os.geteuid():
            raise ValueError(f"owned by uid {st.st_uid}, not by the current user")
        if st.st_mode & 0o022:
            raise ValueError(f"writable by others (mode {stat.S_IMODE(st.st_mode):o})")
        if st.st_size > MAX_BYTES:
            raise ValueError(f"{st.st_size} bytes, more than the {MAX_BYTES} a cache may have")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_BYTES:
                raise ValueError(f"more than the {MAX_BYTES} bytes a cache may have")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _parse(data: bytes) -> Dict[str, Record]:
    """The records of a cache file; ValueError naming the first problem. Records for a version
    this runtime cannot load are dropped (they would fail their checks anyway)."""
    from loader.loading import check_backend_id
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg} at byte {error.pos})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} file")
    if document.get("loader") != loader_version():
        raise ValueError(f"written by loader {str(document.get('loader'))[:40]!r}, "
                         f"this is {loader_version()!r}")
    files = document.get("files")
    if not isinstance(files, dict) or len(files) > MAX_RECORDS:
        raise ValueError("'files' is not an object of at most %d records" % MAX_RECORDS)
    records: Dict[str, Record] = {}
    for canonical, raw in files.items():
        # json gives int for numbers (bool is its own type): exact type checks are enough
        try:
            if type(raw) is not dict or not canonical.startswith("/") or "\0" in canonical:
                raise ValueError
            identity = (raw["dev"], raw["ino"], raw["size"], raw["mtime_ns"], raw["ctime_ns"])
            backend_id, (major, minor) = raw["backend_id"], raw["version"]
            if not (type(identity[0]) is type(identity[1]) is type(identity[2]) is int
                    and type(identity[3]) is type(identity[4]) is int
                    and 0 <= identity[0] <= _U64 and 0 <= identity[1] <= _U64
                    and 0 <= identity[2] <= _U64 and -_I64 - 1 <= identity[3] <= _I64
                    and -_I64 - 1 <= identity[4] <= _I64
                    and type(major) is type(minor) is int
                    and 0 <= major <= _U32 and 0 <= minor <= _U32
                    and type(backend_id) is str and backend_id.isascii()):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"malformed record for {canonical[:200]!r}") from None
        checked, problem = check_backend_id(backend_id.encode("ascii"))
        if checked is None:
            raise ValueError(f"record for {canonical[:200]!r}: {problem}")
        version = BackendVersion._from_checked(major, minor)
        if is_backend_compatible(version):
            records[canonical] = Record(identity, checked, version)
    return records
