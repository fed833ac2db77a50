# The backend cache's records and the reading of its file, included into _core.pyx
# (loader.cache keeps the policy: where the file lives, when it is used, atomic writes).
# Reading, the trust checks, parsing, lookup by file identity and writing are in C, so opening
# the cache and a deferred scan do no per-file Python work for it.
#
# The file is untrusted input: every count, length and string in it is bounded and checked
# before use, and any problem refuses the whole file (ValueError naming it).
#
# Layout, every integer little-endian:
#
#     "DBKCACHE"  format u32  count u32  loader_length u32  loader bytes
#     count records, each:
#         dev u64  ino u64  size u64  mtime_ns i64  ctime_ns i64
#         major u32  minor u32  path_length u32  id_length u32
#         path bytes (absolute, no NUL)  id bytes (a valid backend id)

cdef enum:
    CACHE_FORMAT = 2
    CACHE_HEADER_BYTES = 20             # magic, format, count, loader_length
    CACHE_RECORD_BYTES = 56             # the fixed part of a record
    CACHE_MAX_LOADER = 256
    CACHE_MAX_PATH = 4096

cdef bytes _CACHE_MAGIC = b"DBKCACHE"


cdef struct _CacheRecord:
    uint64_t dev
    uint64_t ino
    uint64_t size
    int64_t mtime_ns
    int64_t ctime_ns
    uint32_t major
    uint32_t minor
    char *path                  # NUL-terminated, in the arena or (owned) malloc'd
    char *backend_id            # NUL-terminated, likewise
    bint owned                  # the strings are the record's own (stored, not parsed)
    bint alive                  # False once forgotten or replaced


cdef inline uint64_t _le64(const unsigned char *p) noexcept nogil:
    return (<uint64_t>p[0] | <uint64_t>p[1] << 8 | <uint64_t>p[2] << 16 | <uint64_t>p[3] << 24
            | <uint64_t>p[4] << 32 | <uint64_t>p[5] << 40 | <uint64_t>p[6] << 48
            | <uint64_t>p[7] << 56)


cdef inline uint32_t _le32(const unsigned char *p) noexcept nogil:
    return <uint32_t>p[0] | <uint32_t>p[1] << 8 | <uint32_t>p[2] << 16 | <uint32_t>p[3] << 24


cdef inline void _put64(unsigned char *p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[i] = <unsigned char>(v >> (8 * i))


cdef inline void _put32(unsigned char *p, uint32_t v) noexcept nogil:
    cdef int i
    for i in range(4):
        p[i] = <unsigned char>(v >> (8 * i))


cdef char *_copy_string(const unsigned char *data, size_t length) noexcept nogil:
    cdef char *out = <char *>malloc(length + 1)
    if out != NULL:
        memcpy(out, data, length)
        out[length] = 0
    return out


cdef class CacheRecords:
    """What the backend cache knows: per canonical path, the file's identity (device, inode,
    size, modification and change times) and the backend id and version loading found. Looked
    up by identity (a hash on device and inode), then the path compared."""
    cdef _CacheRecord *records
    cdef size_t count               # records used, alive or not
    cdef size_t capacity
    cdef Py_ssize_t *slots          # open addressing on (dev, ino): record index, -1 free
    cdef size_t slot_count          # a power of two, at least twice count
    cdef readonly bint changed      # a record was added, replaced or forgotten since parsing
    cdef dict _by_path              # path bytes -> indexes of its alive records, built on demand
    cdef char *arena                # the parsed file, its strings moved to its front
    cdef size_t arena_used, arena_size

    def __cinit__(self):
        self.records = NULL
        self.slots = NULL
        self.arena = NULL

    def __dealloc__(self):
        self._clear()

    cdef void _clear(self) noexcept:
        cdef size_t i
        for i in range(self.count):
            if self.records[i].owned:
                free(self.records[i].path)
                free(self.records[i].backend_id)
        free(self.records)
        free(self.slots)
        free(self.arena)
        self.records = NULL
        self.slots = NULL
        self.arena = NULL
        self.count = self.capacity = self.slot_count = 0

    def __len__(self):
        cdef size_t i, alive = 0
        for i in range(self.count):
            alive += self.records[i].alive
        return alive

    cdef inline size_t _home(self, uint64_t dev, uint64_t ino) noexcept nogil:
        cdef uint64_t h = (ino * <uint64_t>0x9E3779B97F4A7C15) ^ (dev * <uint64_t>0xC2B2AE3D27D4EB4F)
        return <size_t>(h ^ (h >> 29)) & (self.slot_count - 1)

    cdef int _index(self) except -1:
        """(Re)build the hash of every alive record."""
        cdef size_t wanted = 16, i, j
        while wanted < 2 * self.count + 2:
            wanted *= 2
        free(self.slots)
        self.slots = <Py_ssize_t *>malloc(wanted * sizeof(Py_ssize_t))
        if self.slots == NULL:
            self.slot_count = 0
            raise MemoryError()
        self.slot_count = wanted
        for i in range(wanted):
            self.slots[i] = -1
        for i in range(self.count):
            if self.records[i].alive:
                j = self._home(self.records[i].dev, self.records[i].ino)
                while self.slots[j] >= 0:
                    j = (j + 1) & (wanted - 1)
                self.slots[j] = <Py_ssize_t>i
        return 0

    cdef Py_ssize_t find(self, uint64_t dev, uint64_t ino, uint64_t size, int64_t mtime_ns,
                         int64_t ctime_ns, const char *path) noexcept nogil:
        """The record of ``path`` with exactly this identity, or -1."""
        cdef size_t j
        cdef _CacheRecord *r
        if self.slot_count == 0:
            return -1
        j = self._home(dev, ino)
        while self.slots[j] >= 0:
            r = &self.records[self.slots[j]]
            if r.alive and r.dev == dev and r.ino == ino and r.size == size \
                    and r.mtime_ns == mtime_ns and r.ctime_ns == ctime_ns \
                    and strcmp(r.path, path) == 0:
                return self.slots[j]
            j = (j + 1) & (self.slot_count - 1)
        return -1

    cdef dict _paths(self):
        cdef size_t i
        if self._by_path is None:
            self._by_path = {}
            for i in range(self.count):
                if self.records[i].alive:
                    self._by_path.setdefault(<bytes>self.records[i].path, []).append(i)
        return self._by_path

    cdef tuple hit(self, Py_ssize_t index):
        """(backend_id, version, skew detail) of a record find returned: the id, the
        loader.BackendVersion and what that version lacks (skew_detail), as loading would
        give them."""
        cdef _CacheRecord *r = &self.records[index]
        return (PyUnicode_DecodeASCII(r.backend_id, strlen(r.backend_id), NULL),
                _backend_version(r.major, r.minor), skew_detail(r.minor))

    cdef int _append(self, uint64_t dev, uint64_t ino, uint64_t size, int64_t mtime_ns,
                     int64_t ctime_ns, uint32_t major, uint32_t minor,
                     const unsigned char *path, size_t path_length,
                     const unsigned char *backend_id, size_t id_length) except -1:
        cdef size_t capacity
        cdef _CacheRecord *grown
        cdef _CacheRecord *r
        if self.count == self.capacity:
            capacity = 16 if self.capacity == 0 else 2 * self.capacity
            grown = <_CacheRecord *>realloc(self.records, capacity * sizeof(_CacheRecord))
            if grown == NULL:
                raise MemoryError()
            self.records = grown
            self.capacity = capacity
        r = &self.records[self.count]
        if self.arena != NULL and path_length + id_length + 2 <= self.arena_size - self.arena_used:
            r.owned = False
            r.path = self.arena + self.arena_used
            memmove(r.path, path, path_length)      # the strings may lie further on in the arena
            r.path[path_length] = 0
            r.backend_id = r.path + path_length + 1
            memmove(r.backend_id, backend_id, id_length)
            r.backend_id[id_length] = 0
            self.arena_used += path_length + id_length + 2
        else:
            r.owned = True
            r.path = _copy_string(path, path_length)
            r.backend_id = _copy_string(backend_id, id_length)
            if r.path == NULL or r.backend_id == NULL:
                free(r.path)
                free(r.backend_id)
                raise MemoryError()
        r.dev, r.ino, r.size, r.mtime_ns, r.ctime_ns = dev, ino, size, mtime_ns, ctime_ns
        r.major, r.minor, r.alive = major, minor, True
        self.count += 1
        return 0

    # -- the file ---------------------------------------------------------------------------

    @staticmethod
    def parse(bytes data, str loader_version, Py_ssize_t max_records):
        """The records of a cache file's bytes; ValueError naming the first problem. Records
        of a version this runtime cannot load are dropped (they would fail their checks). Two
        records for one path are harmless: a lookup needs the path and the exact identity."""
        cdef size_t n = len(data)
        cdef char *copy = <char *>malloc(n + 1)
        if copy == NULL:
            raise MemoryError()
        memcpy(copy, <const char *>data, n)
        return _parse_cache(copy, n, loader_version, max_records)

    @staticmethod
    def read_file(str directory, str file_name, str loader_version, Py_ssize_t max_records,
                  Py_ssize_t max_bytes):
        """Read and parse ``directory``/``file_name`` if both may be trusted (the rules of
        ``loader.cache``): (records, directory_problem, file_problem). A missing directory or
        file gives (None, None, None): nothing to read, nothing wrong. A directory that must not
        hold the cache gives (None, why, None); a file that cannot be read, is untrusted, larger
        than ``max_bytes`` or malformed gives (None, None, why)."""
        cdef bytes raw_directory, raw_name
        cdef const char *c_directory
        cdef const char *c_name
        cdef _CacheFile f
        cdef _CacheStep step
        cdef char *data
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        try:
            raw_directory, raw_name = _fs_path(directory), _fs_path(file_name)
        except ValueError as error:
            return None, str(error), None
        c_directory, c_name = raw_directory, raw_name
        with nogil:
            step = _read_cache_file(c_directory, c_name, <size_t>max_bytes, &f)
        try:
            if step == CACHE_READ:
                data, f.data = f.data, NULL        # the records' arena from now on
                try:
                    return _parse_cache(data, f.size, loader_version, max_records), None, None
                except ValueError as error:
                    return None, None, str(error)
            if step == CACHE_NO_DIRECTORY or step == CACHE_NO_FILE:
                return None, None, None
            if step == CACHE_DIRECTORY_UNOPENED:
                # why it could not be opened, as the rule judges the path (a symbolic link,
                # not a directory), else the error itself
                problem = untrusted_cache_directory(directory)
                if problem == "missing":
                    return None, None, None
                return None, problem or str(OSError(f.error, _strerror(f.error), directory)), None
            if step == CACHE_DIRECTORY_UNSTATED:
                return None, str(OSError(f.error, _strerror(f.error), directory)), None
            if step == CACHE_DIRECTORY_UNTRUSTED:
                return None, _trust_problem(&f.st, True), None
            path = os.path.join(directory, file_name)
            if step == CACHE_FILE_UNOPENED or step == CACHE_FILE_UNSTATED:
                return None, None, str(OSError(f.error, _strerror(f.error), path))
            if step == CACHE_FILE_UNTRUSTED:
                return None, None, _trust_problem(&f.st, False)
            if step == CACHE_FILE_TOO_LARGE:
                return None, None, (f"{f.st.st_size} bytes, more than the {max_bytes} a cache "
                                    f"may have")
            if step == CACHE_FILE_GREW:
                return None, None, f"more than the {max_bytes} bytes a cache may have"
            if step == CACHE_FILE_UNREAD:
                return None, None, str(OSError(f.error, _strerror(f.error)))
            raise MemoryError()
        finally:
            free(f.data)

    def serialize(self, str loader_version, Py_ssize_t max_records):
        """The bytes of a cache file holding the alive records (the newest ``max_records``)."""
        cdef bytes written_by = loader_version.encode("utf-8")[:CACHE_MAX_LOADER]
        cdef size_t i, total, first = 0, kept = 0, at, path_length, id_length
        cdef Py_ssize_t alive = len(self)
        cdef bytearray out
        cdef unsigned char *q
        cdef _CacheRecord *r
        # the oldest alive records beyond max_records are left out
        while alive > max_records and first < self.count:
            alive -= self.records[first].alive
            first += 1
        total = CACHE_HEADER_BYTES + len(written_by)
        for i in range(first, self.count):
            if self.records[i].alive:
                total += CACHE_RECORD_BYTES + strlen(self.records[i].path) \
                    + strlen(self.records[i].backend_id)
                kept += 1
        out = bytearray(total)
        q = out
        memcpy(q, <const char *>_CACHE_MAGIC, 8)
        _put32(q + 8, CACHE_FORMAT)
        _put32(q + 12, <uint32_t>kept)
        _put32(q + 16, <uint32_t>len(written_by))
        memcpy(q + CACHE_HEADER_BYTES, <const char *>written_by, len(written_by))
        at = CACHE_HEADER_BYTES + len(written_by)
        for i in range(first, self.count):
            r = &self.records[i]
            if not r.alive:
                continue
            path_length, id_length = strlen(r.path), strlen(r.backend_id)
            _put64(q + at, r.dev)
            _put64(q + at + 8, r.ino)
            _put64(q + at + 16, r.size)
            _put64(q + at + 24, <uint64_t>r.mtime_ns)
            _put64(q + at + 32, <uint64_t>r.ctime_ns)
            _put32(q + at + 40, r.major)
            _put32(q + at + 44, r.minor)
            _put32(q + at + 48, <uint32_t>path_length)
            _put32(q + at + 52, <uint32_t>id_length)
            memcpy(q + at + CACHE_RECORD_BYTES, r.path, path_length)
            memcpy(q + at + CACHE_RECORD_BYTES + path_length, r.backend_id, id_length)
            at += CACHE_RECORD_BYTES + path_length + id_length
        return bytes(out)

    # -- Python-level access (stores, tests, tools) -----------------------------------------

    def lookup(self, str canonical, identity):
        """(backend_id, version, skew detail) recorded for ``canonical`` with exactly
        ``identity`` (dev, ino, size, mtime_ns, ctime_ns), or None."""
        cdef bytes path
        cdef Py_ssize_t index
        try:
            path = os.fsencode(canonical)
        except UnicodeError:            # no file has this name: nothing is recorded for it
            return None
        if identity is None or b"\0" in path:
            return None
        dev, ino, size, mtime_ns, ctime_ns = identity
        index = self.find(dev, ino, size, mtime_ns, ctime_ns, path)
        return None if index < 0 else self.hit(index)

    def store(self, str canonical, identity, str backend_id, uint32_t major, uint32_t minor):
        """Record what loading found for ``canonical`` (replacing an older record)."""
        cdef bytes path
        cdef bytes raw_id = backend_id.encode("ascii")
        cdef size_t j
        try:
            path = os.fsencode(canonical)
        except UnicodeError:            # not a name a file can have: not recorded
            return
        dev, ino, size, mtime_ns, ctime_ns = identity
        known = self.lookup(canonical, identity)
        if known is not None and known[0] == backend_id and known[1] == (major, minor):
            return
        if not path.startswith(b"/") or b"\0" in path or len(path) > CACHE_MAX_PATH:
            return                      # not something a cache file can hold
        self.forget(canonical)
        self._append(dev, ino, size, mtime_ns, ctime_ns, major, minor, path, len(path),
                     raw_id, len(raw_id))
        self._paths()[path] = [self.count - 1]
        if 2 * self.count + 2 > self.slot_count:
            self._index()
        else:                           # room left: hash the new record only
            j = self._home(dev, ino)
            while self.slots[j] >= 0:
                j = (j + 1) & (self.slot_count - 1)
            self.slots[j] = <Py_ssize_t>(self.count - 1)
        self.changed = True

    def forget(self, str canonical):
        """Drop the record of ``canonical``, if any."""
        cdef size_t index
        try:
            path = os.fsencode(canonical)
        except UnicodeError:
            return
        for index in self._paths().pop(path, ()):
            self.records[index].alive = False
            self.changed = True

    def mark_written(self):
        """The records are now what the file holds."""
        self.changed = False

    def items(self):
        """[(canonical, (dev, ino, size, mtime_ns, ctime_ns), backend_id, (major, minor))] of
        the alive records, oldest first."""
        cdef size_t i
        cdef _CacheRecord *r
        result = []
        for i in range(self.count):
            r = &self.records[i]
            if r.alive:
                result.append((os.fsdecode(<bytes>r.path), (r.dev, r.ino, r.size, r.mtime_ns,
                                                            r.ctime_ns),
                               (<bytes>r.backend_id).decode("ascii"), (r.major, r.minor)))
        return result


cdef CacheRecords _parse_cache(char *data, size_t n, str loader_version, Py_ssize_t max_records):
    """CacheRecords.parse of the ``n`` bytes at ``data``, a malloc'd buffer this takes over:
    it becomes the arena of the records' strings, each moved, NUL-terminated, to the front
    (over fixed parts already read: a record's strings take 54 bytes less than the record, so
    nothing not yet read is overwritten)."""
    cdef CacheRecords result
    cdef const unsigned char *p = <const unsigned char *>data
    cdef size_t at, count, i, path_length, id_length, loader_length
    cdef bytes expected_loader
    cdef uint32_t major, minor
    cdef const unsigned char *path
    try:
        result = CacheRecords()
    except BaseException:
        free(data)
        raise
    result.arena, result.arena_size, result.arena_used = data, n, 0
    expected_loader = loader_version.encode("utf-8")
    if n < CACHE_HEADER_BYTES or memcmp(p, <const char *>_CACHE_MAGIC, 8) != 0:
        raise ValueError("not a dynamic-backends cache file")
    if _le32(p + 8) != CACHE_FORMAT:
        raise ValueError(f"cache format {_le32(p + 8)}, this loader reads {CACHE_FORMAT}")
    count = _le32(p + 12)
    loader_length = _le32(p + 16)
    if count > <size_t>max_records:
        raise ValueError(f"{count} records, more than the {max_records} a cache may have")
    if loader_length > CACHE_MAX_LOADER or loader_length > n - CACHE_HEADER_BYTES:
        raise ValueError("truncated or malformed header")
    if loader_length != <size_t>len(expected_loader) or memcmp(
            p + CACHE_HEADER_BYTES, <const char *>expected_loader, loader_length) != 0:
        written_by = (<const char *>p)[CACHE_HEADER_BYTES:
                                       CACHE_HEADER_BYTES + min(loader_length, <size_t>40)]
        raise ValueError(f"written by loader {written_by.decode('utf-8', 'replace')!r}, "
                         f"this is {loader_version!r}")
    at = CACHE_HEADER_BYTES + loader_length
    # room for every record at once, as many as the header says if the bytes left can hold them
    result.capacity = min(count, (n - at) // CACHE_RECORD_BYTES)
    if result.capacity > 0:
        result.records = <_CacheRecord *>malloc(result.capacity * sizeof(_CacheRecord))
        if result.records == NULL:
            result.capacity = 0
            raise MemoryError()
    for i in range(count):
        if n - at < CACHE_RECORD_BYTES:
            raise ValueError(f"truncated: record {i} of {count} is missing")
        major, minor = _le32(p + at + 40), _le32(p + at + 44)
        path_length, id_length = _le32(p + at + 48), _le32(p + at + 52)
        if path_length == 0 or path_length > CACHE_MAX_PATH \
                or id_length > abi.BACKEND_ID_MAX_LENGTH \
                or path_length + id_length > n - at - CACHE_RECORD_BYTES:
            raise ValueError(f"truncated or malformed record {i}")
        path = p + at + CACHE_RECORD_BYTES
        if path[0] != b'/' or memchr(path, 0, path_length) != NULL:
            raise ValueError(f"record {i}: the path is not absolute or holds a NUL byte")
        if _id_fault(<const char *>(path + path_length), id_length) != ID_OK:
            raise ValueError(f"record {i}: " + _checked_backend_id(
                <const char *>(path + path_length), id_length)[1])
        if _compatible(major, minor, abi.BACKEND_API_VERSION_MAJOR, abi.BACKEND_API_VERSION_MINOR):
            result._append(_le64(p + at), _le64(p + at + 8), _le64(p + at + 16),
                           <int64_t>_le64(p + at + 24), <int64_t>_le64(p + at + 32),
                           major, minor, path, path_length, path + path_length, id_length)
        at += CACHE_RECORD_BYTES + path_length + id_length
    if at != n:
        raise ValueError(f"{n - at} bytes after the last record")
    result._index()
    return result


# -- the file: opened relative to its trusted directory, read bounded ---------------------------

cdef enum _CacheTrust:
    CACHE_TRUSTED
    CACHE_WRONG_TYPE            # not a directory, or not a regular file
    CACHE_FOREIGN_OWNER         # not owned by the effective user
    CACHE_OTHERS_WRITE          # writable by its group or by others


cdef _CacheTrust _trust_fault(const struct_stat *st, bint directory, uid_t euid) noexcept nogil:
    """Whether the cache file (``directory`` False) or its directory, with this status, may
    be trusted by the effective user ``euid``, else the first rule it breaks (``_trust_problem``
    words it)."""
    if not (S_ISDIR(st.st_mode) if directory else S_ISREG(st.st_mode)):
        return CACHE_WRONG_TYPE
    if st.st_uid != euid:
        return CACHE_FOREIGN_OWNER
    if st.st_mode & (S_IWGRP | S_IWOTH):
        return CACHE_OTHERS_WRITE
    return CACHE_TRUSTED


cdef str _trust_problem(const struct_stat *st, bint directory):
    """Why a cache file or directory with this status must not be used, or None."""
    cdef _CacheTrust fault = _trust_fault(st, directory, geteuid())
    if fault == CACHE_WRONG_TYPE:
        return "not a directory (or a symbolic link)" if directory else "not a regular file"
    if fault == CACHE_FOREIGN_OWNER:
        return f"owned by uid {st.st_uid}, not by the current user"
    if fault == CACHE_OTHERS_WRITE:
        return f"writable by others (mode {st.st_mode & 0o7777:o})"
    return None


cdef bytes _fs_path(str path):
    """``path`` as the bytes the system call takes; ValueError as os.stat would raise it."""
    cdef bytes raw = PyUnicode_EncodeFSDefault(path)
    if memchr(<const char *>raw, 0, len(raw)) != NULL:
        raise ValueError("embedded null byte")
    return raw


def untrusted_cache_directory(str directory):
    """Why ``directory`` must not hold the backend cache (the rules of ``loader.cache``),
    "missing" if it does not exist, else None. The path itself is judged: a symbolic link is
    refused."""
    cdef struct_stat st
    cdef bytes raw
    cdef int failed
    try:
        raw = _fs_path(directory)
    except ValueError as error:
        return str(error)
    if lstat(raw, &st) != 0:
        failed = errno
        if failed == ENOENT:
            return "missing"
        return str(OSError(failed, _strerror(failed), directory))
    return _trust_problem(&st, True)


cdef enum _CacheStep:
    CACHE_READ                  # data and size hold the file's bytes
    CACHE_NO_DIRECTORY          # missing: an empty cache
    CACHE_NO_FILE               # missing: an empty cache
    CACHE_DIRECTORY_UNOPENED    # error
    CACHE_DIRECTORY_UNSTATED    # error
    CACHE_DIRECTORY_UNTRUSTED   # st is the directory's
    CACHE_FILE_UNOPENED         # error
    CACHE_FILE_UNSTATED         # error
    CACHE_FILE_UNTRUSTED        # st is the file's
    CACHE_FILE_TOO_LARGE        # st is the file's
    CACHE_FILE_GREW             # past max_bytes while being read
    CACHE_FILE_UNREAD           # error
    CACHE_NO_MEMORY


cdef struct _CacheFile:
    struct_stat st
    int error                   # errno of the step that failed
    char *data                  # malloc'd (the caller frees it), whatever the step
    size_t size


cdef int _open_retrying(int dir_fd, const char *path, int flags) noexcept nogil:
    cdef int fd = openat(dir_fd, path, flags)
    while fd < 0 and errno == EINTR:
        fd = openat(dir_fd, path, flags)
    return fd


cdef _CacheStep _read_cache_file(const char *directory, const char *name, size_t max_bytes,
                                 _CacheFile *f) noexcept nogil:
    """Open ``directory`` (itself, not a symbolic link; O_PATH needs no read permission),
    check it, open ``name`` in it (not through a symbolic link, never blocking on a FIFO),
    check it and read at most ``max_bytes`` of it."""
    cdef int dir_fd, fd
    cdef _CacheStep step
    cdef uid_t euid = geteuid()
    f.data, f.size, f.error = NULL, 0, 0
    dir_fd = _open_retrying(AT_FDCWD, directory,
                            _posix.O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    if dir_fd < 0:
        f.error = errno
        return CACHE_NO_DIRECTORY if f.error == ENOENT else CACHE_DIRECTORY_UNOPENED
    if fstat(dir_fd, &f.st) != 0:
        step, f.error = CACHE_DIRECTORY_UNSTATED, errno
    elif _trust_fault(&f.st, True, euid) != CACHE_TRUSTED:
        step = CACHE_DIRECTORY_UNTRUSTED
    else:
        fd = _open_retrying(dir_fd, name,
                            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        if fd < 0:
            f.error = errno
            step = CACHE_NO_FILE if f.error == ENOENT else CACHE_FILE_UNOPENED
        else:
            step = _read_checked(fd, max_bytes, euid, f)
            c_close(fd)
    c_close(dir_fd)
    return step


cdef _CacheStep _read_checked(int fd, size_t max_bytes, uid_t euid, _CacheFile *f) noexcept nogil:
    """Check the open cache file, then read it."""
    cdef int failed
    if fstat(fd, &f.st) != 0:
        f.error = errno
        return CACHE_FILE_UNSTATED
    if _trust_fault(&f.st, False, euid) != CACHE_TRUSTED:
        return CACHE_FILE_UNTRUSTED
    if f.st.st_size < 0 or <uint64_t>f.st.st_size > max_bytes:
        return CACHE_FILE_TOO_LARGE
    failed = _read_bounded(fd, <size_t>f.st.st_size + 1, max_bytes, &f.data, &f.size)
    if failed == READ_TOO_LARGE:
        return CACHE_FILE_GREW
    if failed == READ_NO_MEMORY:
        return CACHE_NO_MEMORY
    if failed != 0:
        f.error = failed
        return CACHE_FILE_UNREAD
    return CACHE_READ
