"""Buffers placed against inaccessible pages: each is its own anonymous mapping, so that an
access past its end (or before its start) faults at the instruction that makes it, and inputs can
be made read-only."""
import ctypes
import os
from ctypes import c_int, c_long, c_size_t, c_void_p

import numpy as np

PAGE = os.sysconf("SC_PAGE_SIZE")
PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_PRIVATE, MAP_ANONYMOUS = 0x02, 0x20

_libc = ctypes.CDLL(None, use_errno=True)
_mmap = _libc.mmap
_mmap.restype = c_void_p
_mmap.argtypes = [c_void_p, c_size_t, c_int, c_int, c_int, c_long]
_mprotect = _libc.mprotect
_mprotect.argtypes = [c_void_p, c_size_t, c_int]
_munmap = _libc.munmap
_munmap.argtypes = [c_void_p, c_size_t]


class Arena:
    """Mappings for guarded buffers, all unmapped on close()."""

    def __init__(self):
        self.mappings = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        for base, size in self.mappings:
            _munmap(base, size)
        self.mappings = []

    def _map(self, nbytes):
        size = (nbytes + PAGE - 1) // PAGE * PAGE + 2 * PAGE
        base = _mmap(None, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if base in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        self.mappings.append((base, size))
        return base, size

    @staticmethod
    def _array(address, nbytes, shape=None):
        array = np.ctypeslib.as_array((ctypes.c_float * (nbytes // 4)).from_address(address))
        return array.reshape(shape) if shape is not None else array

    def after(self, nbytes, shape=None) -> np.ndarray:
        """A float32 array of ``nbytes`` whose last byte is followed by an inaccessible page."""
        base, size = self._map(nbytes)
        guard = base + size - PAGE
        _mprotect(guard, PAGE, PROT_NONE)
        return self._array(guard - nbytes, nbytes, shape)

    def before(self, nbytes, shape=None) -> np.ndarray:
        """A float32 array of ``nbytes`` whose first byte follows an inaccessible page."""
        base, _ = self._map(nbytes)
        _mprotect(base, PAGE, PROT_NONE)
        return self._array(base + PAGE, nbytes, shape)

    @staticmethod
    def read_only(array: np.ndarray):
        start = array.ctypes.data // PAGE * PAGE
        end = (array.ctypes.data + array.nbytes + PAGE - 1) // PAGE * PAGE
        _mprotect(start, end - start, PROT_READ)
