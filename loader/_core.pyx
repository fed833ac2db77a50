# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Native core of the loader: file-name rule, directory discovery, dlopen and backend handles.

Everything here calls libc directly. The Python modules around it (paths, loading, runtime)
decide policy; this module only observes the filesystem and the dynamic linker and reports
what it saw, never raising for a filesystem problem.
"""
from libc.errno cimport errno, ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG
from libc.stdint cimport int64_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free, qsort
from libc.string cimport memcpy, memset, strcmp, strlen
from posix.dlfcn cimport dlopen, dlsym, dlclose, dlerror, RTLD_NOW, RTLD_LOCAL
from posix.fcntl cimport open as c_open, O_RDONLY, O_NONBLOCK, O_NOCTTY, AT_SYMLINK_NOFOLLOW
from posix.stat cimport struct_stat, stat as c_stat, fstat, fstatat, S_ISREG, S_ISLNK, S_IWGRP, S_IWOTH
from posix.types cimport dev_t, ino_t, uid_t
from posix.unistd cimport close as c_close, pread, getuid

cimport backend_api as abi
from loader cimport _posix

import os
import threading

from loader.reasons import Reason

cdef extern from "Python.h":
    str PyUnicode_DecodeFSDefault(const char *s)


cdef extern from "<dlfcn.h>" nogil:
    enum:
        RTLD_NOLOAD
        RTLD_LAZY


cdef extern from "<fcntl.h>" nogil:
    enum:
        O_DIRECTORY
        O_CLOEXEC
        O_NOFOLLOW


API_VERSION_MAJOR = abi.BACKEND_API_VERSION_MAJOR
API_VERSION_MINOR = abi.BACKEND_API_VERSION_MINOR
BACKEND_ID_MAX_LENGTH = abi.BACKEND_ID_MAX_LENGTH

# Size of BackendInstance at each minor version of the current major, indexed by minor.
cdef size_t[2] INSTANCE_SIZE_BY_MINOR = [abi.BACKEND_INSTANCE_SIZE_1_0, abi.BACKEND_INSTANCE_SIZE_1_1]


# ---------------------------------------------------------------------------------------------
# File names (contract section 2): <vendor>_<name>_backend.so[.digits]*
# ---------------------------------------------------------------------------------------------

cdef inline bint _is_ascii_alnum(unsigned char c) noexcept nogil:
    return (b'a' <= c <= b'z') or (b'A' <= c <= b'Z') or (b'0' <= c <= b'9')


cdef inline bint _is_ascii_digit(unsigned char c) noexcept nogil:
    return b'0' <= c <= b'9'


cdef bint match_backend_filename(const unsigned char *s, size_t n) noexcept nogil:
    """True iff s[0:n] is a whole valid backend file name."""
    cdef const char *literal = b"_backend.so"
    cdef size_t literal_len = 11
    cdef size_t i = 0, start, k
    # <vendor>_
    start = i
    while i < n and _is_ascii_alnum(s[i]):
        i += 1
    if i == start or i >= n or s[i] != b'_':
        return False
    i += 1
    # <name>
    start = i
    while i < n and _is_ascii_alnum(s[i]):
        i += 1
    if i == start:
        return False
    # _backend.so
    if n - i < literal_len:
        return False
    for k in range(literal_len):
        if s[i + k] != <unsigned char>literal[k]:
            return False
    i += literal_len
    # (.digits)*
    while i < n:
        if s[i] != b'.':
            return False
        i += 1
        start = i
        while i < n and _is_ascii_digit(s[i]):
            i += 1
        if i == start:
            return False
    return True


def is_valid_backend_filename(name):
    """Whether ``name`` (str, bytes or path-like) is a valid backend file name. Never raises."""
    cdef const unsigned char[:] view
    try:
        if isinstance(name, os.PathLike):
            name = os.fspath(name)
        if isinstance(name, str):
            if not name.isascii():
                return False
            name = name.encode("ascii")
        if not isinstance(name, (bytes, bytearray)):
            return False
        if len(name) == 0:
            return False
        view = name
        return match_backend_filename(&view[0], <size_t>view.shape[0])
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
# Identity of files: a set of (device, inode) pairs, usable without the GIL.
# ---------------------------------------------------------------------------------------------

cdef struct _FileKey:
    uint64_t dev
    uint64_t ino
    Py_ssize_t value        # index of the first file seen with this identity; -1 marks a free slot


cdef class FileSet:
    """Open-addressing hash set keyed by (st_dev, st_ino); remembers who came first."""
    cdef _FileKey *slots
    cdef size_t capacity
    cdef size_t count

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
                return self.slots[j].value
            j = (j + 1) & (self.capacity - 1)
        self.slots[j].dev = dev
        self.slots[j].ino = ino
        self.slots[j].value = value
        self.count += 1
        return -1


# ---------------------------------------------------------------------------------------------
# Discovery (contract section 4): list one directory, classify every entry without opening it.
# ---------------------------------------------------------------------------------------------

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
        return
    if _untrusted(&st, trust):
        entry.state = ENTRY_UNTRUSTED
        entry.error = st.st_mode
        entry.first = st.st_uid
        free(entry.canonical)
        entry.canonical = NULL
        return
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


cdef tuple _entry_outcome(_Entry *entry, list accepted_paths):
    """(reason or None, canonical or None, detail) for one classified entry."""
    cdef str canonical
    if entry.state == ENTRY_CANDIDATE:
        canonical = PyUnicode_DecodeFSDefault(entry.canonical)
        accepted_paths.append(canonical)
        return None, canonical, ""
    if entry.state == ENTRY_INVALID_NAME:
        return Reason.INVALID_FILENAME, None, "name does not match <vendor>_<name>_backend.so[.version]"
    if entry.state == ENTRY_FILTERED:
        return Reason.FILTERED_OUT, None, "excluded by DYNAMIC_BACKEND_SELECT or DYNAMIC_BACKEND_DISABLE"
    if entry.state == ENTRY_UNTRUSTED:
        return (Reason.UNTRUSTED_PERMISSIONS, None,
                f"mode {entry.error & 0o7777:04o}, owner uid {entry.first}: writable by others "
                f"or owned by neither root nor the current user")
    if entry.state == ENTRY_DANGLING:
        return Reason.DANGLING_SYMLINK, None, "symlink points to nothing"
    if entry.state == ENTRY_LOOP:
        return Reason.DANGLING_SYMLINK, None, "symlink chain loops or is too long"
    if entry.state == ENTRY_NOT_REGULAR:
        return Reason.NOT_A_REGULAR_FILE, None, "not a regular file (directory, FIFO, socket or device)"
    if entry.state == ENTRY_DUPLICATE:
        canonical = accepted_paths[entry.first]
        return Reason.DUPLICATE_FILE, canonical, f"same file as {canonical}, already a candidate"
    if entry.error == ENAMETOOLONG:
        return Reason.UNREADABLE, None, "path too long"
    if entry.error == ENOENT:
        return Reason.UNREADABLE, None, "entry vanished during the scan"
    return Reason.UNREADABLE, None, _strerror(entry.error)


def scan_directory(bytes directory, FileSet seen, list accepted_paths, bint include_invalid=True,
                   name_filter=None, bint strict_permissions=False, bint candidates_only=False):
    """List ``directory`` (canonical, absolute) in byte-wise order and classify each entry.

    Returns ``(entries, error)``: ``entries`` is a list of ``(name_bytes, reason, canonical,
    detail)`` with ``reason`` None for a new candidate; entries with invalid names are left out
    unless ``include_invalid``. ``error`` is None, or a string when the directory itself could
    not be read. ``seen`` and ``accepted_paths`` carry de-duplication across directories: each
    new candidate's canonical path is appended to ``accepted_paths``. ``name_filter``, when
    given, is called with each candidate's name (str) before anything else is done with it and
    returns whether to keep it. ``strict_permissions`` refuses files that others may write to or
    that belong to a third user. ``candidates_only`` skips building ``entries`` (it comes back
    empty): for callers that need only ``accepted_paths``.
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
    cdef _Trust trust
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
                entries[count].state = (
                    ENTRY_CANDIDATE if match_backend_filename(<const unsigned char *>ent.d_name, name_len)
                    else ENTRY_INVALID_NAME)
                count += 1
            if count > 1:
                qsort(entries, count, sizeof(_Entry), _compare_names)

    try:
        if name_filter is not None and dirp != NULL:
            for i in range(count):
                if entries[i].state == ENTRY_CANDIDATE and \
                        not name_filter(entries[i].name.decode("ascii")):
                    entries[i].state = ENTRY_FILTERED
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
            result.append((<bytes>entries[i].name,) + _entry_outcome(&entries[i], accepted_paths))
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


# ---------------------------------------------------------------------------------------------
# ELF pre-check: refuse what the dynamic linker would refuse (or crash on), with a precise reason.
# A truncated library is the important case: its segments are mapped past the end of the file
# and the first touch of such a page kills the process with SIGBUS inside dlopen.
# ---------------------------------------------------------------------------------------------

cdef extern from *:
    """
    #include <link.h>
    typedef ElfW(Ehdr) dbk_Ehdr;
    typedef ElfW(Phdr) dbk_Phdr;
    typedef ElfW(Dyn) dbk_Dyn;
    #define dbk_dyn_value(d) ((uint64_t)(d)->d_un.d_val)
    """
    ctypedef struct dbk_Ehdr:
        unsigned char e_ident[16]
        uint16_t e_type
        uint16_t e_machine
        uint64_t e_phoff
        uint16_t e_phentsize
        uint16_t e_phnum

    ctypedef struct dbk_Phdr:
        uint32_t p_type
        uint64_t p_offset
        uint64_t p_vaddr
        uint64_t p_filesz

    ctypedef struct dbk_Dyn:
        int64_t d_tag

    uint64_t dbk_dyn_value(const dbk_Dyn *d)

    enum:
        PT_LOAD
        PT_DYNAMIC
        DT_NULL
        DT_NEEDED
        DT_STRTAB
        DT_STRSZ
        DT_RPATH
        DT_RUNPATH


cdef enum ElfVerdict:
    ELF_OK
    ELF_OPEN_FAILED         # detail: errno
    ELF_NOT_REGULAR
    ELF_NOT_ELF
    ELF_TRUNCATED_HEADER
    ELF_WRONG_CLASS         # detail: the file's class
    ELF_WRONG_BYTE_ORDER    # detail: the file's byte order
    ELF_WRONG_TYPE          # detail: e_type
    ELF_WRONG_MACHINE       # detail: e_machine
    ELF_BAD_PROGRAM_HEADERS
    ELF_TRUNCATED           # detail: bytes the segments need; file size in *size

cdef enum:
    MAX_PROGRAM_HEADERS = 512

cdef unsigned char _own_class = 0, _own_data = 0
cdef unsigned int _own_machine = 0


cdef enum:
    FIRST_PAGE_WORDS = 512      # the first 4 KiB of a file: ELF and program headers usually fit


cdef int _check_elf(const char *path, uint64_t *detail, uint64_t *size, int *keep_fd,
                    uint64_t *page, ssize_t *page_bytes) noexcept nogil:
    """Check the ELF header and that every loadable segment lies inside the file. With
    ``keep_fd`` and a passing file, the open descriptor is handed over instead of closed; with
    ``page`` (FIRST_PAGE_WORDS words), the file's first bytes are left there for the caller."""
    cdef int fd = c_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
    cdef struct_stat st
    cdef dbk_Ehdr header
    cdef uint64_t local_page[FIRST_PAGE_WORDS]
    cdef const dbk_Phdr *segments = NULL
    cdef dbk_Phdr *allocated = NULL
    cdef ssize_t got
    cdef uint64_t end, needed = 0
    cdef size_t table_size
    cdef int i, verdict = ELF_OK
    if page == NULL:
        page = local_page
    if fd < 0:
        detail[0] = errno
        return ELF_OPEN_FAILED
    if fstat(fd, &st) != 0 or not S_ISREG(st.st_mode):
        c_close(fd)
        return ELF_NOT_REGULAR
    size[0] = <uint64_t>st.st_size
    got = pread(fd, page, FIRST_PAGE_WORDS * sizeof(uint64_t), 0)
    if page_bytes != NULL:
        page_bytes[0] = got
    memset(&header, 0, sizeof(header))
    if got > 0:
        memcpy(&header, page, <size_t>got if <size_t>got < sizeof(header) else sizeof(header))
    if got < 4 or header.e_ident[0] != 0x7f or header.e_ident[1] != b'E' \
            or header.e_ident[2] != b'L' or header.e_ident[3] != b'F':
        verdict = ELF_NOT_ELF
    elif got < 6:
        verdict = ELF_TRUNCATED_HEADER
    elif header.e_ident[4] != _own_class:
        detail[0] = header.e_ident[4]
        verdict = ELF_WRONG_CLASS
    elif header.e_ident[5] != _own_data:
        detail[0] = header.e_ident[5]
        verdict = ELF_WRONG_BYTE_ORDER
    elif got < <ssize_t>sizeof(header):
        verdict = ELF_TRUNCATED_HEADER
    elif header.e_type != 3:  # ET_DYN
        detail[0] = header.e_type
        verdict = ELF_WRONG_TYPE
    elif header.e_machine != _own_machine:
        detail[0] = header.e_machine
        verdict = ELF_WRONG_MACHINE
    elif header.e_phentsize != sizeof(dbk_Phdr) or header.e_phnum == 0 \
            or header.e_phnum > MAX_PROGRAM_HEADERS:
        verdict = ELF_BAD_PROGRAM_HEADERS
    else:
        table_size = header.e_phnum * sizeof(dbk_Phdr)
        if header.e_phoff + table_size > size[0]:
            detail[0] = header.e_phoff + table_size
            verdict = ELF_TRUNCATED
        else:
            if header.e_phoff + table_size <= <uint64_t>got and header.e_phoff % 8 == 0:
                segments = <const dbk_Phdr *>(<const char *>page + header.e_phoff)
            else:
                allocated = <dbk_Phdr *>malloc(table_size)
                if allocated != NULL and \
                        pread(fd, allocated, table_size, header.e_phoff) == <ssize_t>table_size:
                    segments = allocated
            if segments == NULL:
                verdict = ELF_BAD_PROGRAM_HEADERS
            else:
                for i in range(header.e_phnum):
                    if segments[i].p_type == PT_LOAD or segments[i].p_type == PT_DYNAMIC:
                        end = segments[i].p_offset + segments[i].p_filesz
                        if end < segments[i].p_offset:  # wrapped around
                            end = <uint64_t>-1
                        if end > needed:
                            needed = end
                if needed > size[0]:
                    detail[0] = needed
                    verdict = ELF_TRUNCATED
            free(allocated)
    if keep_fd != NULL and verdict == ELF_OK:
        keep_fd[0] = fd
    else:
        c_close(fd)
    return verdict


def _learn_own_elf_identity(str module_path):
    """This process's ELF class, byte order and machine, read from this very extension module."""
    global _own_class, _own_data, _own_machine
    cdef dbk_Ehdr header
    cdef bytes path = os.fsencode(module_path)
    cdef int fd = c_open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0:
        raise OSError(errno, "cannot read own ELF header", module_path)
    got = pread(fd, &header, sizeof(header), 0)
    c_close(fd)
    if got != sizeof(header):
        raise OSError("cannot read own ELF header", module_path)
    _own_class = header.e_ident[4]
    _own_data = header.e_ident[5]
    _own_machine = header.e_machine


_learn_own_elf_identity(__file__)

_ELF_CLASS_NAMES = {1: "32-bit", 2: "64-bit"}
_ELF_DATA_NAMES = {1: "little-endian", 2: "big-endian"}
_ELF_TYPE_NAMES = {0: "of no type", 1: "a relocatable object", 2: "an executable", 4: "a core file"}


cdef tuple _check_elf_file(bytes path):
    """(reason, detail) when the file cannot be a shared object for this process, else None."""
    cdef uint64_t detail = 0, size = 0
    cdef int verdict
    cdef const char *c_path = path
    with nogil:
        verdict = _check_elf(c_path, &detail, &size, NULL, NULL, NULL)
    if verdict == ELF_OK:
        return None
    return _elf_verdict(verdict, detail, size)


cdef tuple _elf_verdict(int verdict, uint64_t detail, uint64_t size):
    """(reason, detail) for a failed _check_elf."""
    if verdict == ELF_OPEN_FAILED:
        return Reason.UNREADABLE, _strerror(<int>detail)
    if verdict == ELF_NOT_REGULAR:
        return Reason.NOT_A_REGULAR_FILE, "no longer a regular file"
    if verdict == ELF_NOT_ELF:
        return Reason.NOT_A_SHARED_OBJECT, "not an ELF file"
    if verdict == ELF_TRUNCATED_HEADER:
        return Reason.NOT_A_SHARED_OBJECT, "truncated ELF header"
    if verdict == ELF_WRONG_CLASS:
        return (Reason.WRONG_ARCHITECTURE, f"ELF class is {_ELF_CLASS_NAMES.get(detail, detail)}, "
                f"this process is {_ELF_CLASS_NAMES.get(_own_class, _own_class)}")
    if verdict == ELF_WRONG_BYTE_ORDER:
        return (Reason.WRONG_ARCHITECTURE, f"{_ELF_DATA_NAMES.get(detail, detail)} ELF file, "
                f"this process is {_ELF_DATA_NAMES.get(_own_data, _own_data)}")
    if verdict == ELF_WRONG_TYPE:
        return Reason.NOT_A_SHARED_OBJECT, f"ELF file is {_ELF_TYPE_NAMES.get(detail, detail)}"
    if verdict == ELF_WRONG_MACHINE:
        return (Reason.WRONG_ARCHITECTURE,
                f"ELF machine is {detail}, this process is ELF machine {_own_machine}")
    if verdict == ELF_TRUNCATED:
        return (Reason.NOT_A_SHARED_OBJECT,
                f"truncated: its segments need {detail} bytes, the file has {size}")
    return Reason.NOT_A_SHARED_OBJECT, "malformed ELF program headers"


_CANNOT_OPEN = ": cannot open shared object file"


cdef tuple _classify_dlopen_error(str path, str message):
    """Map the dynamic linker's message to a reason code."""
    cdef Py_ssize_t at = message.find(_CANNOT_OPEN)
    if at > 0 and message[:at] != path:
        return Reason.MISSING_DEPENDENCY, f"needs {message[:at]}, which the dynamic linker cannot find"
    if ("invalid ELF header" in message or "file too short" in message
            or "position-independent executable" in message or "not a shared object" in message.lower()):
        return Reason.NOT_A_SHARED_OBJECT, message
    if "wrong ELF class" in message:
        return Reason.WRONG_ARCHITECTURE, message
    return Reason.DLOPEN_FAILED, message


# ---------------------------------------------------------------------------------------------
# Libraries and backend instances (contract section 5)
# ---------------------------------------------------------------------------------------------

ENTRY_POINTS = ("GetBackendId", "GetVersion", "BackendFactory")

# What a C++ compiler emits for the entry points when extern "C" was forgotten.
_MANGLED_ENTRY_POINTS = {
    "GetBackendId": b"_Z12GetBackendIdv",
    "GetVersion": b"_Z10GetVersionPjS_",
    "BackendFactory": b"_Z14BackendFactoryv",
}


include "_features.pxi"


cdef str _instance_problem(abi.BackendInstance *instance, bytes expected_id,
                           uint32_t major, uint32_t minor):
    """Why ``instance`` does not have a well-formed header for version major.minor, or None.

    Only the header every version shares is required here (size, version, get_id, destroy, the
    same id). Members beyond it are read only where struct_size covers them and count as absent
    otherwise; whether a backend provides everything its version promises is the conformance
    kit's question (ABI-1, ABI-2), not a reason to refuse loading it."""
    cdef const char *instance_id
    if instance == NULL:
        return "BackendFactory returned NULL"
    if major != API_VERSION_MAJOR:
        return f"no instance layout is known for version {major}.{minor}"
    if instance.struct_size < abi.BACKEND_INSTANCE_SIZE_1_0:
        return (f"struct_size is {instance.struct_size}, smaller than the instance header "
                f"({abi.BACKEND_INSTANCE_SIZE_1_0})")
    if instance.api_major != major or instance.api_minor != minor:
        return (f"instance declares version {instance.api_major}.{instance.api_minor}, "
                f"GetVersion reported {major}.{minor}")
    if instance.destroy == NULL:
        return "destroy is NULL"
    if instance.get_id == NULL:
        return "get_id is NULL"
    instance_id = instance.get_id(instance)
    if instance_id == NULL:
        return "get_id returned NULL"
    if _posix.strnlen(instance_id, abi.BACKEND_ID_MAX_LENGTH + 1) != <size_t>len(expected_id) \
            or strcmp(instance_id, expected_id) != 0:
        return f"get_id returned a different id than GetBackendId ({expected_id.decode('ascii')!r})"
    return None


def instance_size(uint32_t minor):
    """Size of BackendInstance at version <major>.<minor> of the current major, or None."""
    if minor >= sizeof(INSTANCE_SIZE_BY_MINOR) // sizeof(size_t):
        return None
    return INSTANCE_SIZE_BY_MINOR[minor]


cdef class Library:
    """One dlopen'ed backend library. dlclose runs when the last reference goes away, so any
    Backend created from it keeps it mapped."""
    cdef void *_handle
    cdef abi.GetBackendIdFunction _get_backend_id
    cdef abi.GetVersionFunction _get_version
    cdef abi.BackendFactoryFunction _backend_factory
    cdef readonly str path
    cdef readonly str backend_id
    cdef readonly uint32_t major
    cdef readonly uint32_t minor
    cdef object __weakref__

    def __dealloc__(self):
        self._close()

    cdef void _close(self) noexcept:
        cdef void *handle = self._handle
        self._handle = NULL
        if handle != NULL:
            dlclose(handle)

    def close(self):
        """Drop this reference to the library (the dynamic linker unmaps it with the last one)."""
        self._close()

    @property
    def closed(self):
        return self._handle == NULL

    @staticmethod
    def open(str path, bint elf_checked=False):
        """dlopen ``path`` (after the ELF pre-check, unless ``elf_checked`` says the caller just
        made it) and look up the entry points.

        Returns ``(library, None, "")`` or ``(None, reason, detail)``; never raises for a bad
        file. The library is closed again before a failure is returned.
        """
        cdef bytes path_bytes = os.fsencode(path)
        cdef const char *c_path = path_bytes
        cdef void *handle
        cdef const char *error
        cdef str message
        cdef Library library
        cdef list missing, mangled
        cdef void *symbol
        if not elf_checked:
            failure = _check_elf_file(path_bytes)
            if failure is not None:
                return (None,) + failure
        with nogil:
            handle = dlopen(c_path, RTLD_NOW | RTLD_LOCAL)
            error = dlerror() if handle == NULL else NULL
        if handle == NULL:
            message = (<bytes>error).decode("utf-8", "replace") if error != NULL else "dlopen failed"
            return (None,) + _classify_dlopen_error(path, message)

        library = Library.__new__(Library)
        library._handle = handle
        library.path = path
        library._get_backend_id = <abi.GetBackendIdFunction>dlsym(handle, b"GetBackendId")
        library._get_version = <abi.GetVersionFunction>dlsym(handle, b"GetVersion")
        library._backend_factory = <abi.BackendFactoryFunction>dlsym(handle, b"BackendFactory")
        missing = []
        if library._get_backend_id == NULL:
            missing.append("GetBackendId")
        if library._get_version == NULL:
            missing.append("GetVersion")
        if library._backend_factory == NULL:
            missing.append("BackendFactory")
        if missing:
            mangled = [name for name in missing
                       if dlsym(handle, _MANGLED_ENTRY_POINTS[name]) != NULL]
            detail = "does not export " + ", ".join(missing)
            if mangled:
                detail += (f" (found C++-mangled {', '.join(mangled)}: declare the entry points "
                           f"extern \"C\")")
            library._close()
            return None, Reason.MISSING_SYMBOL, detail
        return library, None, ""

    def read_backend_id(self):
        """GetBackendId() as bytes (at most BACKEND_ID_MAX_LENGTH + 1 of them), or None for NULL."""
        cdef const char *raw
        self._require_open()
        raw = self._get_backend_id()
        if raw == NULL:
            return None
        return raw[:_posix.strnlen(raw, abi.BACKEND_ID_MAX_LENGTH + 1)]

    def read_version(self):
        """GetVersion() as a (major, minor) tuple."""
        cdef uint32_t major = 0xFFFFFFFF, minor = 0xFFFFFFFF
        self._require_open()
        self._get_version(&major, &minor)
        return major, minor

    def accept(self, str backend_id, uint32_t major, uint32_t minor):
        """Record the id and version the loading checks accepted."""
        self.backend_id = backend_id
        self.major = major
        self.minor = minor

    def probe_factory(self):
        """Create and destroy one instance; the problem with it as a string, or None."""
        cdef abi.BackendInstance *instance
        cdef str problem
        self._require_accepted()
        instance = <abi.BackendInstance *>self._backend_factory()
        problem = _instance_problem(instance, self.backend_id.encode("ascii"), self.major, self.minor)
        _destroy_instance(instance)
        return problem

    def create_backend(self):
        """A new Backend from BackendFactory()."""
        cdef abi.BackendInstance *instance
        cdef str problem
        cdef Backend backend
        self._require_accepted()
        instance = <abi.BackendInstance *>self._backend_factory()
        problem = _instance_problem(instance, self.backend_id.encode("ascii"), self.major, self.minor)
        if problem is not None:
            _destroy_instance(instance)
            from loader.errors import BackendCreationError
            raise BackendCreationError(f"backend {self.backend_id!r} ({self.path}): {problem}")
        backend = Backend.__new__(Backend)
        backend._instance = instance
        backend._library = self
        return backend

    cdef _require_open(self):
        if self._handle == NULL:
            from loader.errors import LibraryClosedError
            raise LibraryClosedError(f"library {self.path} is closed")

    cdef _require_accepted(self):
        self._require_open()
        if self.backend_id is None:
            raise RuntimeError("library has not passed the loading checks")

    def __repr__(self):
        state = "closed" if self._handle == NULL else "open"
        return f"<Library {self.path!r} id={self.backend_id!r} {state}>"


cdef void _destroy_instance(abi.BackendInstance *instance) noexcept:
    """Release an instance if it can be released at all (a NULL destroy leaks it)."""
    if instance != NULL and instance.struct_size >= abi.BACKEND_INSTANCE_SIZE_1_0 \
            and instance.destroy != NULL:
        instance.destroy(instance)


include "_backend.pxi"


# ---------------------------------------------------------------------------------------------
# Secure execution (contract section 3.2)
# ---------------------------------------------------------------------------------------------

def is_secure_execution():
    """Whether the kernel marked this process for secure execution (setuid/setgid, capabilities),
    the same test the dynamic linker uses to ignore LD_LIBRARY_PATH."""
    return _posix.getauxval(_posix.AT_SECURE) != 0


cdef bytes _pread_bytes(int fd, uint64_t offset, uint64_t size):
    """Exactly ``size`` bytes at ``offset``, or None."""
    cdef bytes buffer
    cdef ssize_t got
    if size > (16 << 20):
        return None
    buffer = bytes(size)
    got = pread(fd, <char *>buffer, size, offset)
    return buffer if got == <ssize_t>size else None


cdef object _dynamic_dependencies(int fd, const uint64_t *page, ssize_t page_bytes):
    """``(needed, rpath, runpath)`` from the dynamic segment of the ELF file open as ``fd`` (of
    this process's class; found through the program headers, so stripped files work too), with
    every needed library already loaded into this process left out. None if unreadable."""
    cdef dbk_Ehdr header
    cdef const dbk_Phdr *segments
    cdef const dbk_Dyn *dynamic
    cdef bytes table, entries, strings
    cdef int i, j, n
    cdef uint64_t strtab = 0, strsz = 0, offset
    cdef void *handle
    try:
        # The ELF check has verified the header and found the program headers in the file.
        memcpy(&header, page, sizeof(header))
        if header.e_phoff + header.e_phnum * sizeof(dbk_Phdr) <= <uint64_t>page_bytes \
                and header.e_phoff % 8 == 0:
            segments = <const dbk_Phdr *>(<const char *>page + header.e_phoff)
        else:
            table = _pread_bytes(fd, header.e_phoff, header.e_phnum * sizeof(dbk_Phdr))
            if table is None:
                return None
            segments = <const dbk_Phdr *><const char *>table
        entries = None
        for i in range(header.e_phnum):
            if segments[i].p_type == PT_DYNAMIC:
                entries = _pread_bytes(fd, segments[i].p_offset, segments[i].p_filesz)
        if entries is None:
            return [], None, None
        dynamic = <const dbk_Dyn *><const char *>entries
        n = len(entries) // sizeof(dbk_Dyn)
        for i in range(n):
            if dynamic[i].d_tag == DT_NULL:
                n = i
                break
            if dynamic[i].d_tag == DT_STRTAB:
                strtab = dbk_dyn_value(&dynamic[i])
            elif dynamic[i].d_tag == DT_STRSZ:
                strsz = dbk_dyn_value(&dynamic[i])
        # DT_STRTAB is an address: find the loadable segment that maps it.
        strings = None
        for j in range(header.e_phnum):
            if segments[j].p_type == PT_LOAD and segments[j].p_vaddr <= strtab < \
                    segments[j].p_vaddr + segments[j].p_filesz:
                offset = strtab - segments[j].p_vaddr + segments[j].p_offset
                strings = _pread_bytes(fd, offset, strsz)
                break
        if strings is None:
            return None
        needed, rpath, runpath = [], None, None
        for i in range(n):
            if dbk_dyn_value(&dynamic[i]) >= strsz:
                continue
            if dynamic[i].d_tag == DT_NEEDED:
                name = strings[dbk_dyn_value(&dynamic[i]):strings.index(b"\0", dbk_dyn_value(&dynamic[i]))]
                handle = dlopen(name, RTLD_NOLOAD | RTLD_LAZY)
                if handle != NULL:
                    dlclose(handle)
                else:
                    dlerror()
                    needed.append(os.fsdecode(name))
            elif dynamic[i].d_tag == DT_RPATH or dynamic[i].d_tag == DT_RUNPATH:
                value = os.fsdecode(strings[dbk_dyn_value(&dynamic[i]):
                                            strings.index(b"\0", dbk_dyn_value(&dynamic[i]))])
                if dynamic[i].d_tag == DT_RPATH:
                    rpath = value
                else:
                    runpath = value
        return needed, rpath, runpath
    except ValueError:  # a string without its terminating NUL
        return None


def inspect_elf_file(str path):
    """The pre-dlopen look at a file: ``(reason, detail, dependencies)``. ``reason`` and
    ``detail`` as check_elf_file gives them; ``dependencies`` is, for a file that passed,
    ``(needed libraries not yet loaded, rpath, runpath)`` or None if the dynamic segment could
    not be read."""
    cdef bytes encoded = os.fsencode(path)
    cdef const char *c_path = encoded
    cdef uint64_t detail = 0, size = 0
    cdef uint64_t page[FIRST_PAGE_WORDS]
    cdef ssize_t page_bytes = 0
    cdef int fd = -1, verdict
    with nogil:
        verdict = _check_elf(c_path, &detail, &size, &fd, page, &page_bytes)
    if verdict != ELF_OK:
        return _elf_verdict(verdict, detail, size) + (None,)
    try:
        return None, "", _dynamic_dependencies(fd, page, page_bytes)
    finally:
        c_close(fd)


def check_elf_file(path):
    """``(reason, detail)`` when ``path`` cannot be a shared object for this process, else
    ``(None, "")``. Reads the file; never loads it."""
    failure = _check_elf_file(os.fsencode(path))
    return (None, "") if failure is None else failure
