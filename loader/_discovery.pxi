# Discovery (docs/loading.md, Discovery): identity of files and the directory scan, included into
# _core.pyx.

from posix.stat cimport S_ISDIR, S_ISFIFO, S_ISSOCK, S_ISCHR, S_ISBLK

# ---------------------------------------------------------------------------------------------
# Identity of files: a set of (device, inode) pairs, usable without the GIL.
# ---------------------------------------------------------------------------------------------

cdef struct _FileKey:
    uint64_t dev
    uint64_t ino
    Py_ssize_t value        # index of the first file seen with this identity; -1 marks a free slot


cdef class FileSet:
    """Open-addressing hash set keyed by (st_dev, st_ino); remembers who came first.
    ``duplicates`` counts the identities added again."""
    cdef _FileKey *slots
    cdef size_t capacity
    cdef size_t count
    cdef readonly size_t duplicates

    def __cinit__(self):
        self.capacity = 64
        self.count = 0
        self.slots = <_FileKey *>malloc(self.capacity * sizeof(_FileKey))
        if self.slots == NULL:
            raise MemoryError()
        self._clear_slots(self.slots, self.capacity)

    def __dealloc__(self):
        free(self.slots)
        self.slots = NULL

    def __len__(self):
        return self.count

    cdef void _clear_slots(self, _FileKey *slots, size_t capacity) noexcept nogil:
        cdef size_t i
        for i in range(capacity):
            slots[i].value = -1

    cdef inline size_t _home(self, uint64_t dev, uint64_t ino, size_t capacity) noexcept nogil:
        cdef uint64_t h = (ino * <uint64_t>0x9E3779B97F4A7C15) ^ (dev * <uint64_t>0xC2B2AE3D27D4EB4F)
        return <size_t>(h ^ (h >> 29)) & (capacity - 1)

    cdef int _grow(self) noexcept nogil:
        cdef size_t new_capacity = self.capacity * 2, i, j
        cdef _FileKey *new_slots = <_FileKey *>malloc(new_capacity * sizeof(_FileKey))
        if new_slots == NULL:
            return -1
        self._clear_slots(new_slots, new_capacity)
        for i in range(self.capacity):
            if self.slots[i].value >= 0:
                j = self._home(self.slots[i].dev, self.slots[i].ino, new_capacity)
                while new_slots[j].value >= 0:
                    j = (j + 1) & (new_capacity - 1)
                new_slots[j] = self.slots[i]
        free(self.slots)
        self.slots = new_slots
        self.capacity = new_capacity
        return 0

    cdef Py_ssize_t add(self, uint64_t dev, uint64_t ino, Py_ssize_t value) noexcept nogil:
        """Insert; return the earlier value if the identity was present, -1 if it was new,
        -2 if memory ran out (the caller then treats the file as new)."""
        cdef size_t j
        if 2 * (self.count + 1) > self.capacity and self._grow() != 0:
            return -2
        j = self._home(dev, ino, self.capacity)
        while self.slots[j].value >= 0:
            if self.slots[j].dev == dev and self.slots[j].ino == ino:
                self.duplicates += 1
                return self.slots[j].value
            j = (j + 1) & (self.capacity - 1)
        self.slots[j].dev = dev
        self.slots[j].ino = ino
        self.slots[j].value = value
        self.count += 1
        return -1


# ---------------------------------------------------------------------------------------------
# Discovery (docs/loading.md, Discovery): list one directory, classify every entry without
# opening it.
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# Entries: what became of one directory entry (loader.loading.Entry). The scan makes one per
# directory entry and registration fills them in, so they are created in C, and they stay out of
# the cyclic garbage collector: an entry refers only to strings, numbers, enum members and tuples
# of them, never to a container that could lead back to it.
# ---------------------------------------------------------------------------------------------

REGISTERED = "registered"
SKIPPED = "skipped"

cdef object _log = None                  # logging.getLogger("loader"), on first use
cdef object _paths_module = None         # loader.paths, on first use (it imports this module)


cdef object _entry_paths():
    global _paths_module
    if _paths_module is None:
        from loader import paths as _paths_module
    return _paths_module


cdef enum:
    _LOG_DEBUG = 10     # logging.DEBUG, logging.INFO, logging.WARNING
    _LOG_INFO = 20
    _LOG_WARNING = 30


@cython.no_gc
cdef class Entry:
    """One directory entry of one search path, and what became of it.

    file        the path as found: search path + entry name
    canonical   the fully resolved path, when it resolved
    reason      None while it is still a candidate, or registered; else why it was skipped
    detail      what the reason's words alone do not say ("" when nothing)
    backend_id, version   as read from the library (or the backend cache), once known
    registered  it provides a registered backend
    deferred    registered from the backend cache, without loading (loaded at first use)
    identity    a candidate's identity when the cache lacks it, to record it under
    known       a candidate the backend cache knows (its backend_id and version are the
                cache's), or False
    """
    cdef public object file
    cdef public object canonical
    cdef public object reason
    cdef public object detail
    cdef public object backend_id
    cdef public object version
    cdef public bint registered
    cdef public bint deferred
    cdef public object identity
    cdef public bint known

    def __cinit__(self, *args, **kwargs):
        self.detail = ""

    def __init__(self, file, canonical=None, reason=None, detail="", backend_id=None,
                 version=None, bint registered=False, bint deferred=False):
        self.file = file
        self.canonical = canonical
        self.reason = reason
        self.detail = detail
        self.backend_id = backend_id
        self.version = version
        self.registered = registered
        self.deferred = deferred

    def __repr__(self):
        return (f"Entry(file={self.file!r}, canonical={self.canonical!r}, status={self.status!r}, "
                f"reason={self.reason!r}, backend_id={self.backend_id!r})")

    @property
    def status(self):
        return REGISTERED if self.registered else SKIPPED

    def skip(self, reason, str detail):
        self.reason = reason
        self.detail = detail

    cdef int level(self):
        """The level of this entry's log line: INFO for a registration and for a file left out
        because the caller asked for it (``filtered-out``: select, disable, backends), DEBUG for
        a name that is not a backend's, WARNING for any other skip."""
        if self.registered or self.reason is Reason.FILTERED_OUT:
            return _LOG_INFO
        if self.reason is Reason.INVALID_FILENAME:
            return _LOG_DEBUG
        return _LOG_WARNING

    def log(self):
        """One line for the log, at the entry's level (see ``level``)."""
        global _log
        if _log is None:
            import logging
            _log = logging.getLogger("loader")
        cdef int level = self.level()
        if not _log.isEnabledFor(level):
            return
        paths = _entry_paths()
        if self.registered:
            _log.log(level, "registered backend %r (Backend API %s) from %s%s", self.backend_id,
                     self.version, self.canonical,
                     " (deferred: loaded at first use)" if self.deferred else "")
        elif level == _LOG_DEBUG:
            _log.log(level, "skipped %s: %s", paths.text(self.file), self.reason.value)
        else:
            _log.log(level, "skipped %s: %s (%s)", paths.text(self.file), self.reason.value,
                     paths.text(self.detail))

    def to_json(self):
        """The report entry. Every string is valid UTF-8; a path that was not is also given
        exactly, base64-encoded, as ``file_base64`` / ``canonical_base64``."""
        paths = _entry_paths()
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


cdef inline Entry _new_entry(str file, canonical):
    cdef Entry made = Entry.__new__(Entry)
    made.file = file
    made.canonical = canonical
    return made


cdef enum EntryState:
    ENTRY_INVALID_NAME
    ENTRY_FILTERED
    ENTRY_UNTRUSTED
    ENTRY_CANDIDATE
    ENTRY_DANGLING
    ENTRY_LOOP
    ENTRY_NOT_REGULAR
    ENTRY_UNREADABLE
    ENTRY_DUPLICATE

cdef struct _Entry:
    char *name
    char *canonical         # malloc'd, NULL unless the entry resolved to a regular file
    int state
    int error               # errno behind ENTRY_UNREADABLE
    Py_ssize_t first        # ENTRY_DUPLICATE: index of the first candidate with this identity
    uint64_t dev, ino, size # ENTRY_CANDIDATE: the file's identity, for the backend cache
    int64_t mtime_ns, ctime_ns
    bint linked             # reached through a symbolic link


cdef int _compare_names(const void *a, const void *b) noexcept nogil:
    return strcmp((<_Entry *>a).name, (<_Entry *>b).name)


cdef char *_join(const char *directory, size_t dir_len, const char *name) noexcept nogil:
    """directory + '/' + name in a new buffer; NULL when out of memory."""
    cdef size_t name_len = strlen(name)
    cdef bint root = dir_len == 1 and directory[0] == b'/'
    cdef char *out = <char *>malloc(dir_len + name_len + 2)
    cdef size_t at = dir_len
    if out == NULL:
        return NULL
    memcpy(out, directory, dir_len)
    if not root:
        out[at] = b'/'
        at += 1
    memcpy(out + at, name, name_len + 1)
    return out


def real_path(str path):
    """realpath(3) of an existing ``path`` (every link resolved, no "." or ".." left), or None
    when it cannot be resolved."""
    cdef bytes encoded = os.fsencode(path)
    cdef char *resolved
    if b"\0" in encoded:
        return None
    resolved = _posix.realpath(encoded, NULL)
    if resolved == NULL:
        return None
    try:
        return PyUnicode_DecodeFSDefault(resolved)
    finally:
        free(resolved)


cdef struct _Trust:
    bint strict             # refuse files others can write to, or owned by a third user
    uid_t uid               # the current user (root is always trusted)


cdef inline bint _untrusted(const struct_stat *st, const _Trust *trust) noexcept nogil:
    return trust.strict and ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0
                             or (st.st_uid != 0 and st.st_uid != trust.uid))


cdef void _classify(_Entry *entry, int dir_fd, const char *directory, size_t dir_len,
                    FileSet seen, Py_ssize_t *accepted, const _Trust *trust) noexcept nogil:
    """Resolve one candidate entry to a regular file, or say why it is not one."""
    cdef struct_stat st
    cdef char *path
    cdef char *resolved
    cdef Py_ssize_t first
    if fstatat(dir_fd, entry.name, &st, AT_SYMLINK_NOFOLLOW) != 0:
        entry.state = ENTRY_UNREADABLE
        entry.error = errno
        return
    if S_ISLNK(st.st_mode):
        entry.linked = True
        path = _join(directory, dir_len, entry.name)
        if path == NULL:
            entry.state = ENTRY_UNREADABLE
            entry.error = 12  # ENOMEM
            return
        resolved = _posix.realpath(path, NULL)
        if resolved == NULL:
            entry.error = errno
            free(path)
            if entry.error == ENOENT or entry.error == ENOTDIR:
                entry.state = ENTRY_DANGLING
            elif entry.error == ELOOP:
                entry.state = ENTRY_LOOP
            else:
                entry.state = ENTRY_UNREADABLE
            return
        free(path)
        if c_stat(resolved, &st) != 0:
            entry.error = errno
            entry.state = ENTRY_DANGLING if entry.error == ENOENT else ENTRY_UNREADABLE
            free(resolved)
            return
        if not S_ISREG(st.st_mode):
            entry.state = ENTRY_NOT_REGULAR
            entry.error = st.st_mode
            free(resolved)
            return
        entry.canonical = resolved
    elif S_ISREG(st.st_mode):
        # The directory is canonical and the entry is not a link: no resolution needed.
        entry.canonical = _join(directory, dir_len, entry.name)
        if entry.canonical == NULL:
            entry.state = ENTRY_UNREADABLE
            entry.error = 12  # ENOMEM
            return
    else:
        entry.state = ENTRY_NOT_REGULAR
        entry.error = st.st_mode
        return
    if _untrusted(&st, trust):
        entry.state = ENTRY_UNTRUSTED
        entry.error = st.st_mode
        entry.first = st.st_uid
        free(entry.canonical)
        entry.canonical = NULL
        return
    entry.dev, entry.ino, entry.size = <uint64_t>st.st_dev, <uint64_t>st.st_ino, <uint64_t>st.st_size
    entry.mtime_ns = <int64_t>st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec
    entry.ctime_ns = <int64_t>st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec
    first = seen.add(<uint64_t>st.st_dev, <uint64_t>st.st_ino, accepted[0])
    if first >= 0:
        entry.state = ENTRY_DUPLICATE
        entry.first = first
        free(entry.canonical)
        entry.canonical = NULL
    else:
        entry.state = ENTRY_CANDIDATE
        accepted[0] += 1


cdef str _strerror(int error):
    return (<bytes>_posix.strerror(error)).decode("utf-8", "replace")


cdef str _file_kind(int mode):
    """What a non-regular file is, in words."""
    if S_ISDIR(mode):
        return "a directory"
    if S_ISFIFO(mode):
        return "a FIFO"
    if S_ISSOCK(mode):
        return "a socket"
    if S_ISCHR(mode):
        return "a character device"
    if S_ISBLK(mode):
        return "a block device"
    return f"of unknown type (mode {mode:o})"


cdef tuple _entry_outcome(_Entry *entry, list accepted_paths, str filter_detail):
    """(reason or None, canonical or None, detail) for one classified entry."""
    cdef str canonical
    if entry.state == ENTRY_CANDIDATE:
        canonical = PyUnicode_DecodeFSDefault(entry.canonical)
        accepted_paths.append(canonical)
        return None, canonical, ""
    if entry.state == ENTRY_INVALID_NAME:
        return Reason.INVALID_FILENAME, None, "name does not match <vendor>_<name>_backend.so[.version]"
    if entry.state == ENTRY_FILTERED:
        return Reason.FILTERED_OUT, None, filter_detail
    if entry.state == ENTRY_UNTRUSTED:
        return (Reason.UNTRUSTED_PERMISSIONS, None,
                f"mode {entry.error & 0o7777:04o}, owner uid {entry.first}: writable by others "
                f"or owned by neither root nor the current user")
    if entry.state == ENTRY_DANGLING:
        return Reason.DANGLING_SYMLINK, None, "symlink points to nothing"
    if entry.state == ENTRY_LOOP:
        return Reason.DANGLING_SYMLINK, None, "symlink chain loops or is too long"
    if entry.state == ENTRY_NOT_REGULAR:
        if entry.linked:
            return (Reason.NOT_A_REGULAR_FILE, None,
                    f"symlink to {_file_kind(entry.error)}, not a regular file")
        return Reason.NOT_A_REGULAR_FILE, None, f"{_file_kind(entry.error)}, not a regular file"
    if entry.state == ENTRY_DUPLICATE:
        canonical = accepted_paths[entry.first]
        return Reason.DUPLICATE_FILE, canonical, f"same file as {canonical}, already a candidate"
    if entry.error == ENAMETOOLONG:
        return Reason.UNREADABLE, None, "path too long"
    if entry.error == ENOENT:
        return Reason.UNREADABLE, None, "entry vanished during the scan"
    return Reason.UNREADABLE, None, _strerror(entry.error)


cdef inline void _fill_known(Entry entry, const _CacheRecord *record):
    """What a matching cache record says of a candidate."""
    entry.known = True
    entry.backend_id = PyUnicode_DecodeASCII(record.backend_id, strlen(record.backend_id), NULL)
    entry.version = _backend_version(record.major, record.minor)


cdef Entry _make_entry(str prefix, bint prefix_is_directory, _Entry *entry, list accepted_paths,
                       dict filtered, size_t index, CacheRecords cache):
    """scan_directory's entry object for one classified entry: ``file`` is ``prefix`` + its
    name; ``prefix_is_directory`` says that ``prefix`` is the canonical directory, so that a
    candidate reached without a link is its own canonical path (one string for both)."""
    cdef str canonical
    cdef Py_ssize_t hit
    cdef Entry made
    if entry.state == ENTRY_CANDIDATE:      # the common case: no tuple on the way
        canonical = PyUnicode_DecodeFSDefault(entry.canonical)
        accepted_paths.append(canonical)
        made = _new_entry(canonical if prefix_is_directory and not entry.linked
                          else prefix + PyUnicode_DecodeFSDefault(entry.name), canonical)
        if cache is not None:
            hit = cache.find(entry.dev, entry.ino, entry.size, entry.mtime_ns, entry.ctime_ns,
                             entry.canonical)
            if hit >= 0:
                _fill_known(made, &cache.records[hit])
            else:
                made.identity = (entry.dev, entry.ino, entry.size, entry.mtime_ns,
                                 entry.ctime_ns)
        return made
    reason, canonical, detail = _entry_outcome(entry, accepted_paths, filtered.get(index))
    made = _new_entry(prefix + PyUnicode_DecodeFSDefault(entry.name), canonical)
    made.reason = reason
    made.detail = detail
    return made


def scan_directory(bytes directory, FileSet seen, list accepted_paths, bint include_invalid=True,
                   name_filter=None, bint strict_permissions=False, bint candidates_only=False,
                   str prefix="", CacheRecords cache=None):
    """List ``directory`` (canonical, absolute) in byte-wise order and classify each entry.

    Returns ``(entries, error)``: ``entries`` is a list of Entry objects, ``file`` being ``prefix`` + the decoded name (the path as
    found), with ``reason`` and ``detail`` set for those that are not candidates. Entries with
    invalid names are left out unless ``include_invalid``. ``error`` is None, or a string when
    the directory itself could not be read. ``seen`` and ``accepted_paths`` carry
    de-duplication across directories: each new candidate's canonical path is appended to
    ``accepted_paths``. ``name_filter``, when given, is called with each candidate's name (str)
    before anything else is done with it and returns None to keep it, or the detail of its
    ``filtered-out`` skip. ``strict_permissions`` refuses files that others may write to or
    that belong to a third user. ``candidates_only`` builds no entries (the list comes back
    empty): for callers that need only ``accepted_paths``.

    With a backend ``cache``, a candidate whose path and identity a record matches is ``known``,
    with the record's ``backend_id`` and ``version``; else its ``identity`` is ``(dev, ino, size, mtime_ns, ctime_ns)`` as the scan's stat
    found it, to record it under once loaded.
    """
    cdef const char *dir_path = directory
    cdef size_t dir_len = len(directory)
    cdef int fd, open_error = 0
    cdef _posix.DIR *dirp = NULL
    cdef _posix.dirent *ent
    cdef _Entry *entries = NULL
    cdef _Entry *grown
    cdef size_t count = 0, capacity = 0, i, name_len
    cdef Py_ssize_t accepted = len(accepted_paths)
    cdef bint out_of_memory = False
    cdef list result = []
    cdef dict filtered = {}     # entry index -> detail of its filtered-out skip
    cdef _Trust trust
    cdef str decoded_directory = PyUnicode_DecodeFSDefault(dir_path)
    cdef bint prefix_is_directory = prefix == (decoded_directory if decoded_directory == "/"
                                               else decoded_directory + "/")
    trust.strict = strict_permissions
    trust.uid = getuid()

    with nogil:
        fd = c_open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0:
            open_error = errno
        else:
            dirp = _posix.fdopendir(fd)
            if dirp == NULL:
                open_error = errno
                c_close(fd)
        if dirp != NULL:
            while True:
                ent = _posix.readdir(dirp)
                if ent == NULL:
                    break
                if ent.d_name[0] == b'.' and (ent.d_name[1] == 0 or
                                              (ent.d_name[1] == b'.' and ent.d_name[2] == 0)):
                    continue
                if count == capacity:
                    capacity = 64 if capacity == 0 else capacity * 2
                    grown = <_Entry *>realloc(entries, capacity * sizeof(_Entry))
                    if grown == NULL:
                        out_of_memory = True
                        break
                    entries = grown
                name_len = strlen(ent.d_name)
                entries[count].name = <char *>malloc(name_len + 1)
                if entries[count].name == NULL:
                    out_of_memory = True
                    break
                memcpy(entries[count].name, ent.d_name, name_len + 1)
                entries[count].canonical = NULL
                entries[count].error = 0
                entries[count].first = -1
                entries[count].linked = False
                entries[count].state = (
                    ENTRY_CANDIDATE if match_backend_filename(<const unsigned char *>ent.d_name, name_len)
                    else ENTRY_INVALID_NAME)
                count += 1
            if count > 1:
                qsort(entries, count, sizeof(_Entry), _compare_names)

    try:
        if name_filter is not None and dirp != NULL:
            for i in range(count):
                if entries[i].state == ENTRY_CANDIDATE:
                    why = name_filter(entries[i].name.decode("ascii"))
                    if why is not None:
                        entries[i].state = ENTRY_FILTERED
                        filtered[i] = why
    finally:
        with nogil:
            if dirp != NULL:
                for i in range(count):
                    if entries[i].state == ENTRY_CANDIDATE:
                        _classify(&entries[i], _posix.dirfd(dirp), dir_path, dir_len, seen,
                                  &accepted, &trust)
                _posix.closedir(dirp)

    try:
        for i in range(count):
            if candidates_only:
                if entries[i].state == ENTRY_CANDIDATE:
                    accepted_paths.append(PyUnicode_DecodeFSDefault(entries[i].canonical))
                continue
            if entries[i].state == ENTRY_INVALID_NAME and not include_invalid:
                continue
            result.append(_make_entry(prefix, prefix_is_directory, &entries[i], accepted_paths,
                                      filtered, i, cache))
    finally:
        for i in range(count):
            free(entries[i].name)
            free(entries[i].canonical)
        free(entries)

    if open_error:
        return result, _strerror(open_error)
    if out_of_memory:
        return result, "out of memory while listing the directory"
    return result, None
