"""Arrays in shared memory: ``loader.shared_array``.

A workload's ``execute`` on a backend in a host process copies each input into the host's I/O
segment and the output back out of it. An array made by ``shared_array`` lives in a memfd
segment of its own, which the runtime hands to a host the first time the array is passed to it
(once per host process), so that the host reads and writes the array where it lies: no copy on
either side. In process it is an ordinary array. NNAPI's ``ANeuralNetworksMemory`` serves the
same purpose.

A host that was handed an array may write into it at any time until it is garbage collected,
not only while an ``execute`` that names it runs (see docs/backend-host.md, "What a host is not
protected from").
"""
import numbers
import weakref

import numpy as np

from loader import _core

# Set by the first shared_array: until then the hot path never looks for shared arrays.
in_use = False


def shared_array(shape, dtype=np.float32) -> np.ndarray:
    """A zero-filled C-contiguous array of ``shape`` and ``dtype`` in shared memory, aligned to
    a page. Passed to ``Workload.execute`` as an input or the output on a backend in a host
    process, it is read and written in place."""
    global in_use
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = tuple(shape)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0
               for v in shape):
        raise ValueError(f"a shape is a tuple of non-negative integers, not {shape!r}")
    dtype = np.dtype(dtype)
    count = 1
    for v in shape:
        count *= int(v)
    nbytes = count * dtype.itemsize
    if nbytes > 1 << 46:
        raise ValueError(f"a shared array of {nbytes} bytes is larger than a segment may be")
    segment = _core.Segment(max(nbytes, 1))
    in_use = True
    return np.frombuffer(segment, dtype=dtype, count=count).reshape(shape)


def segment_of(array):
    """The segment ``array`` lies in when it was made by shared_array (or is a view of one),
    else None."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    if type(base) is memoryview:
        base = base.obj
    return base if type(base) is _core.Segment else None


class SharedSegments:
    """The shared segments one host process maps, by segment: their handles there. Reset when
    a new host starts; a segment that dies is destroyed in the host with the next request."""

    def __init__(self, process):
        self._process = weakref.ref(process)
        self._handles = {}            # id(segment) -> (weak reference, handle)

    def clear(self):
        self._handles = {}

    def places(self, channel, arrays):
        """For each of ``arrays``: (segment, handle) when it lies in a shared segment (handed
        to the host now if it has not been), else None; None when none does. Called with the
        host's lock held."""
        places, found = [], False
        for array in arrays:
            segment = segment_of(array)
            if segment is None:
                places.append(None)
                continue
            entry = self._handles.get(id(segment))
            if entry is None or entry[0]() is not segment:
                entry = self._add(channel, segment)
            places.append((segment, entry[1]))
            found = True
        return places if found else None

    def _add(self, channel, segment):
        process = self._process()
        handle = process.hand_over(channel, segment)
        generation, handles, owner = process.generation, self._handles, self._process

        def forget(ref, key=id(segment)):
            # The garbage collector's thread: only drop the entry and queue the destroy.
            if handles.get(key, (None,))[0] is ref:
                del handles[key]
            host = owner()
            if host is not None:
                host.release(generation, handle)

        entry = (weakref.ref(segment, forget), handle)
        self._handles[id(segment)] = entry
        return entry
