# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Native core of the loader: file-name rule, directory discovery, dlopen and backend handles.

Everything here calls libc directly. The Python modules around it (paths, loading, runtime)
decide policy; this module only observes the filesystem and the dynamic linker and reports
what it saw, never raising for a filesystem problem.
"""
cimport cython
from libc.errno cimport errno, EINTR, ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG
from libc.stdint cimport int64_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free, qsort
from libc.string cimport memchr, memcmp, memcpy, memmove, memset, strcmp, strlen, strncmp
from posix.dlfcn cimport dlopen, dlsym, dlclose, dlerror, RTLD_NOW, RTLD_LOCAL
from posix.fcntl cimport (open as c_open, openat, O_RDONLY, O_NONBLOCK, O_NOCTTY, AT_FDCWD,
                          AT_SYMLINK_NOFOLLOW)
from posix.stat cimport (struct_stat, stat as c_stat, fstat, fstatat, lstat, S_ISDIR, S_ISREG,
                         S_ISLNK, S_IWGRP, S_IWOTH)
from posix.types cimport dev_t, ino_t, uid_t
from posix.unistd cimport close as c_close, pread, read as c_read, getuid, geteuid

cimport backend_api as abi
cimport elf_reader
cimport link_map
from loader cimport _posix

import os
import threading

from loader.reasons import Reason

cdef extern from "Python.h":
    str PyUnicode_DecodeFSDefault(const char *s)
    bytes PyUnicode_EncodeFSDefault(object unicode)


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
cdef size_t[4] INSTANCE_SIZE_BY_MINOR = [abi.BACKEND_INSTANCE_SIZE_1_0, abi.BACKEND_INSTANCE_SIZE_1_1,
                                         abi.BACKEND_INSTANCE_SIZE_1_2, abi.BACKEND_INSTANCE_SIZE_1_3]


include "_crash_note.pxi"
include "_names.pxi"
include "_cache.pxi"
include "_discovery.pxi"
include "_elf.pxi"
include "_link_map.pxi"
include "_library.pxi"
include "_registration.pxi"
include "networks/_subgraphs.pxi"
include "networks/_profiling.pxi"
include "networks/_executor.pxi"
include "host/_segment.pxi"
include "host/_channel.pxi"


# ---------------------------------------------------------------------------------------------
# Reading a whole file, bounded
# ---------------------------------------------------------------------------------------------

cdef enum:
    READ_TOO_LARGE = -1
    READ_NO_MEMORY = -2


cdef int _read_bounded(int fd, size_t capacity, size_t max_bytes, char **data,
                       size_t *size) noexcept nogil:
    """Read ``fd`` to its end into ``*data`` (malloc'd; the caller frees it whatever the
    outcome), ``*size`` bytes: 0, an errno, READ_TOO_LARGE past ``max_bytes`` (below SIZE_MAX)
    or READ_NO_MEMORY. The buffer starts at ``capacity`` bytes (one more than the expected size
    sees the end without growing) and doubles while more comes."""
    cdef ssize_t got
    cdef char *grown
    data[0], size[0] = NULL, 0
    capacity = 1 if capacity == 0 else min(capacity, max_bytes + 1)
    data[0] = <char *>malloc(capacity)
    if data[0] == NULL:
        return READ_NO_MEMORY
    while True:
        if size[0] == capacity:
            if capacity > max_bytes:
                return READ_TOO_LARGE
            capacity = max_bytes + 1 if capacity > max_bytes // 2 else 2 * capacity
            grown = <char *>realloc(data[0], capacity)
            if grown == NULL:
                return READ_NO_MEMORY
            data[0] = grown
        got = c_read(fd, data[0] + size[0], capacity - size[0])
        if got == 0:
            return 0
        if got < 0:
            if errno == EINTR:
                continue
            return errno
        size[0] += <size_t>got


# ---------------------------------------------------------------------------------------------
# Secure execution (docs/loading.md, Hardening)
# ---------------------------------------------------------------------------------------------

cdef enum:
    _MAX_ENVIRONMENT_BYTES = 1 << 26   # far beyond ARG_MAX: a larger one is not an environment


def is_secure_execution():
    """Whether the kernel marked this process for secure execution (setuid/setgid, capabilities),
    the same test the dynamic linker uses to ignore LD_LIBRARY_PATH."""
    return _posix.getauxval(_posix.AT_SECURE) != 0


def startup_environment_value(bytes name):
    """The value ``name`` had in the environment this process started with (bytes), or None
    when it was not set; read from /proc/self/environ, which later changes to the environment
    do not touch. Raises OSError when that file cannot be read."""
    cdef int fd = c_open(b"/proc/self/environ", O_RDONLY | O_CLOEXEC)
    cdef size_t used = 0, at, end, key_length = len(name)
    cdef int failed
    cdef char *data = NULL
    cdef const char *key = name
    if fd < 0:
        raise OSError(errno, _strerror(errno), "/proc/self/environ")
    failed = _read_bounded(fd, 16384, _MAX_ENVIRONMENT_BYTES, &data, &used)
    c_close(fd)
    try:
        if failed == READ_NO_MEMORY:
            raise MemoryError()
        if failed == READ_TOO_LARGE:
            raise OSError(0, "the start-up environment is larger than "
                             f"{_MAX_ENVIRONMENT_BYTES} bytes", "/proc/self/environ")
        if failed != 0:
            raise OSError(failed, _strerror(failed), "/proc/self/environ")
        at = 0
        while at < used:  # NUL-separated NAME=value items; the last may lack its NUL
            end = at
            while end < used and data[end] != 0:
                end += 1
            if end - at > key_length and data[at + key_length] == b"=" \
                    and memcmp(data + at, key, key_length) == 0:
                return data[at + key_length + 1:end]
            at = end + 1
        return None
    finally:
        free(data)
