"""Memory safety (MEM-1): every layer runs with its buffers placed against guard pages, so that an
overrun, an underrun or a write to an input faults in the case that does it, at the execution
that does it. Before each execution the worker announces what it is about to try; when the
worker dies, the controller reports that announcement with the signal.

Each buffer is its own anonymous mapping: an inaccessible page right after its last byte (or,
in a second run, right before its first), and inputs made read-only in a third.
"""
import ctypes
import os
from ctypes import c_int, c_long, c_size_t, c_void_p
from typing import List

import numpy as np

from conformance.cases import Failed, NotSupported, case, layer_cases

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


def _placed(arena, where, array):
    target = arena.after(array.nbytes, array.shape) if where == "after" else \
        arena.before(array.nbytes, array.shape)
    target[...] = array
    return target


def run_guarded(subject, workload, label: str, inputs: List[np.ndarray], output_shape):
    """Execute ``workload`` once per placement; a fault kills the worker right after the note
    that says which buffer was guarded, and how."""
    names = [f"input {i}" for i in range(len(inputs))]
    plain_out = np.empty(output_shape, np.float32)
    steps = [("after", i) for i in range(len(inputs) + 1)] + [("read-only", None)] + \
        [("before", i) for i in range(len(inputs) + 1)]
    for how, index in steps:
        with Arena() as arena:
            arrays = [a.copy() for a in inputs]
            out = plain_out
            if how == "read-only":
                arrays = [_placed(arena, "after", a) for a in arrays]
                for a in arrays:
                    arena.read_only(a)
                subject.note(f"{label}: every input is read-only; a crash here is a write into "
                             f"an input")
            else:
                role = names[index] if index < len(inputs) else "the output"
                if index < len(inputs):
                    arrays[index] = _placed(arena, how, arrays[index])
                else:
                    out = _placed(arena, how, np.zeros(output_shape, np.float32))
                edge = "past the end of" if how == "after" else "before the start of"
                subject.note(f"{label}: {role} placed against a guard page; a crash here is an "
                             f"access {edge} {role}")
            workload.execute(arrays, [out])
            for i, (before, after) in enumerate(zip(inputs, arrays)):
                if not np.array_equal(before.view(np.uint32), after.view(np.uint32)):
                    changed = int(np.sum(before.view(np.uint32) != after.view(np.uint32)))
                    raise Failed(f"{label}: execute wrote into input {i} ({changed} of "
                                 f"{before.size} values changed); inputs are read-only")


def _memory_case(layer_name):
    def run(subject):
        import loader
        from conformance import generated
        backend = subject.backend()
        specs = [d for d in layer_cases() if d["layer"] == layer_name] + \
            generated.memory_specs(layer_name)
        manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
        factory = backend.create_workload_factory(manager)
        ran = 0
        for data in specs:
            inputs = generated.inputs_for(data, subject.seed)
            if not backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")):
                continue
            try:
                workload = factory.create_workload(data["layer"], inputs, data.get("descriptor"))
            except loader.BackendError as error:
                raise Failed(f"{generated.describe(data)}: create_workload failed: {error}")
            if manager is not None:
                manager.acquire()
            try:
                run_guarded(subject, workload, generated.describe(data), inputs,
                            workload.output_shape)
            except loader.BackendError as error:
                raise Failed(f"{generated.describe(data)}: execute failed with guarded buffers: "
                             f"{error}")
            finally:
                if manager is not None:
                    manager.release()
                workload.close()
            ran += 1
        if not ran:
            raise NotSupported(f"the backend supports none of the kit's {layer_name} cases")
    return run


def _register():
    from loader.layers import LAYERS
    for name in LAYERS:
        case(f"memory.{name}", "MEM-1", tier="full")(_memory_case(name))


_register()
