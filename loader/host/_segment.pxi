# Shared-memory segments for backend hosts (memfd files both processes map), included into
# _core.pyx before host/_channel.pxi: the segments the runtime copies tensors through, hands to
# hosts for constants and arenas, and exports as loader.shared_array's memory; and where a
# buffer lies in one, for a request that names it instead of copying it.

from cpython.buffer cimport PyBuffer_FillInfo
from cpython.bytes cimport PyBytes_FromStringAndSize

cimport protocol as wire
from loader._posix cimport (PROT_READ, PROT_WRITE, MAP_SHARED, MFD_CLOEXEC, MFD_ALLOW_SEALING,
                            MAP_FAILED, mmap, munmap, memfd_create, F_ADD_SEALS, F_SEAL_SEAL,
                            F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE, fcntl, ftruncate)

cdef enum:
    _ALIGNMENT = 64                  # tensors in a segment start on a cache line


cdef inline uint64_t _aligned(uint64_t n) noexcept nogil:
    return (n + _ALIGNMENT - 1) & ~(<uint64_t>_ALIGNMENT - 1)


# ---------------------------------------------------------------------------------------------
# Segments: memfd files both processes map
# ---------------------------------------------------------------------------------------------

cdef class Segment:
    """``size`` bytes of shared memory (a memfd, sealed against shrinking and growing, so the
    host can never make the runtime's mapping fault), mapped read-write here until
    ``seal_read_only``. The runtime copies tensors in and out; the segments behind
    loader.shared_array also export their memory (the buffer protocol), and are not unmapped
    while an export lives."""
    cdef readonly int fd
    cdef readonly uint64_t size
    cdef readonly bint read_only
    cdef char *base
    cdef Py_ssize_t exports
    cdef object __weakref__

    def __cinit__(self, uint64_t size):
        cdef void *mapped
        self.fd = -1
        if size == 0 or size > <uint64_t>(1) << 46:
            raise ValueError(f"a segment of {size} bytes")
        self.fd = memfd_create(b"dynamic-backends", MFD_CLOEXEC | MFD_ALLOW_SEALING)
        if self.fd < 0:
            raise OSError(errno, _strerror(errno), "memfd_create")
        if ftruncate(self.fd, <long>size) != 0:
            error = errno
            self.close()
            raise OSError(error, _strerror(error), "ftruncate")
        fcntl(self.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)
        mapped = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, self.fd, 0)
        if mapped == MAP_FAILED:
            error = errno
            self.close()
            raise OSError(error, _strerror(error), "mmap")
        self.base = <char *>mapped
        self.size = size

    def __dealloc__(self):
        self.close()

    def __getbuffer__(self, Py_buffer *view, int flags):
        if self.base == NULL:
            raise BufferError("the segment is closed")
        PyBuffer_FillInfo(view, self, self.base, <Py_ssize_t>self.size, self.read_only, flags)
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self.exports -= 1

    def close(self):
        """Unmap and close (idempotent); hosts keep their own mappings until told. A segment
        whose memory is exported (an array lies in it) is closed when the last export goes."""
        if self.exports > 0:
            raise BufferError("arrays still lie in the segment")
        if self.base != NULL:
            munmap(self.base, self.size)
            self.base = NULL
        if self.fd >= 0:
            c_close(self.fd)
            self.fd = -1

    @property
    def closed(self):
        return self.base == NULL

    def seal_read_only(self):
        """From now on nobody writes it: mapped read-only here, sealed against writes (hosts
        can map it only read-only)."""
        cdef void *mapped
        if self.base == NULL or self.read_only:
            return
        if self.exports > 0:
            raise BufferError("arrays still lie in the segment")
        munmap(self.base, self.size)
        mapped = mmap(NULL, self.size, PROT_READ, MAP_SHARED, self.fd, 0)
        self.base = NULL if mapped == MAP_FAILED else <char *>mapped
        if self.base == NULL:
            raise OSError(errno, _strerror(errno), "mmap")
        fcntl(self.fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SEAL)
        self.read_only = True

    cdef char *_span(self, uint64_t offset, uint64_t size, bint writing) except NULL:
        if self.base == NULL:
            raise ValueError("the segment is closed")
        if offset > self.size or size > self.size - offset:
            raise ValueError(f"{size} bytes at {offset} lie outside a segment of {self.size}")
        if writing and self.read_only:
            raise ValueError("the segment is read-only")
        return self.base + offset

    def write(self, uint64_t offset, data):
        """Copy ``data`` (any C-contiguous buffer) to ``offset``."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_C_CONTIGUOUS)
        try:
            memcpy(self._span(offset, view.len, True), view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    def read_into(self, uint64_t offset, target):
        """Fill ``target`` (a writable C-contiguous buffer) from ``offset``."""
        cdef Py_buffer view
        PyObject_GetBuffer(target, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)
        try:
            memcpy(view.buf, self._span(offset, view.len, False), view.len)
        finally:
            PyBuffer_Release(&view)

    def read_bytes(self, uint64_t offset, uint64_t size):
        return PyBytes_FromStringAndSize(self._span(offset, size, False), size)


def aligned_bytes(sizes):
    """Bytes a segment needs for buffers of ``sizes`` placed one after another, each aligned."""
    cdef uint64_t total = 0
    for size in sizes:
        total += _aligned(size)
    return total


cdef bint _place_in(wire.dbk_wire_buffer *buffer, const void *data, Py_ssize_t size,
                    tuple where) except -1:
    """Point ``buffer`` at ``data`` where it lies in ``where`` (a Segment, its handle in the
    host): False when it does not lie wholly inside (or the segment is closed), and the caller
    copies it instead."""
    cdef Segment segment = <Segment?>where[0]
    cdef uint64_t at
    if segment.base == NULL or segment.read_only or <const char *>data < segment.base:
        return False
    at = <uint64_t>(<const char *>data - segment.base)
    if at > segment.size or <uint64_t>size > segment.size - at or at % 4:
        return False
    buffer.segment = <uint64_t>where[1]
    buffer.offset = at
    return True
