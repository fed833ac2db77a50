"""loader.shared_array: tensors a backend host reads and writes where they lie (docs/backend-host.md,
"Arrays in shared memory")."""
import gc
import os
import signal

import numpy as np
import pytest

import loader
from helpers import install_reference
from loader import _core

F = np.float32
CONV = {"padding": 1}


def _conv_inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((1, 9, 11, 8)).astype(F), rng.standard_normal((5, 3, 3, 8)).astype(F)


def _shared_copy(array):
    shared = loader.shared_array(array.shape, array.dtype)
    shared[...] = array
    return shared


def _host_memfds(pid):
    """The shared-memory files the host process maps (its status page, segments)."""
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[4] for line in maps if "memfd:dynamic-backends" in line}


@pytest.fixture
def runtimes(backend_dir):
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process") as hosted, \
            loader.Runtime(dynamic_backends_path=str(backend_dir)) as local:
        yield hosted, local


def _convolution(runtime):
    x, w = _conv_inputs()
    backend = runtime.create_backend("CpuRef")
    workload = backend.create_workload_factory().create_workload("Convolution2d",
                                                                 [x.shape, w.shape], CONV)
    return backend, workload


# -- the array ----------------------------------------------------------------------------------

def test_a_shared_array_is_a_zeroed_page_aligned_array_of_the_shape_and_type():
    a = loader.shared_array((3, 4, 5))
    assert a.shape == (3, 4, 5) and a.dtype == np.float32 and a.flags.c_contiguous
    assert a.flags.writeable and a.ctypes.data % 4096 == 0
    assert not a.any()
    assert loader.shared_array(7, np.int64).shape == (7,)
    assert loader.shared_array((0, 3)).size == 0


@pytest.mark.parametrize("shape", [(-1,), (2.0,), ("3",), (True,), None])
def test_a_bad_shape_is_a_clean_error(shape):
    with pytest.raises((ValueError, TypeError)):
        loader.shared_array(shape)


def test_a_segment_is_never_unmapped_under_an_array_that_lies_in_it():
    from loader.host.shared import segment_of
    a = loader.shared_array((1024,))
    segment = segment_of(a)
    with pytest.raises(BufferError):
        segment.close()
    with pytest.raises(BufferError):
        segment.seal_read_only()
    a[:] = 1.0                      # still mapped
    assert a.sum() == 1024.0


# -- through a host -----------------------------------------------------------------------------

def test_shared_inputs_and_output_are_read_and_written_in_place_with_the_same_result(runtimes):
    hosted, local = runtimes
    x, w = _conv_inputs()
    expected = _convolution(local)[1].execute([x, w])[0]
    backend, workload = _convolution(hosted)
    out = loader.shared_array(expected.shape)
    result = workload.execute([_shared_copy(x), _shared_copy(w)], [out])
    assert result[0] is out
    np.testing.assert_array_equal(out, expected)
    # Every buffer lay in shared memory: the host's I/O segment was never needed.
    assert backend.host._io is None


@pytest.mark.parametrize("shared", ["input", "weights", "output"])
def test_shared_and_copied_buffers_mix_in_one_execute(runtimes, shared):
    hosted, local = runtimes
    x, w = _conv_inputs(1)
    expected = _convolution(local)[1].execute([x, w])[0]
    _, workload = _convolution(hosted)
    out = loader.shared_array(expected.shape) if shared == "output" else np.empty_like(expected)
    inputs = [_shared_copy(x) if shared == "input" else x,
              _shared_copy(w) if shared == "weights" else w]
    workload.execute(inputs, [out])
    np.testing.assert_array_equal(out, expected)


def test_a_view_inside_a_shared_array_is_found_at_its_offset(runtimes):
    hosted, local = runtimes
    x, w = _conv_inputs(2)
    expected = _convolution(local)[1].execute([x, w])[0]
    _, workload = _convolution(hosted)
    big = loader.shared_array((3,) + x.shape[1:])       # x is its middle image
    big[1] = x[0]
    outs = loader.shared_array((3,) + expected.shape[1:])
    workload.execute([big[1:2], _shared_copy(w)], [outs[2:3]])
    np.testing.assert_array_equal(outs[2:3], expected)
    assert not outs[:2].any()                           # nothing written outside the view


def test_a_shared_array_is_handed_to_a_host_once_and_taken_back_when_it_dies(runtimes):
    hosted, _ = runtimes
    x, w = _conv_inputs(3)
    backend, workload = _convolution(hosted)
    pid = backend.host.pid
    before = _host_memfds(pid)
    xs, ws = _shared_copy(x), _shared_copy(w)
    out = loader.shared_array((1, 9, 11, 5))
    for _ in range(3):
        workload.execute([xs, ws], [out])
    assert len(_host_memfds(pid) - before) == 3         # one mapping each, not one per execute
    del xs, ws, out
    gc.collect()
    workload.execute([x, w])                            # the next request takes them back
    # What is left beyond the start: the I/O segment this copying execute needed.
    assert len(_host_memfds(pid) - before) == 1


def test_shared_arrays_are_handed_again_to_the_host_that_replaces_a_crashed_one(runtimes):
    hosted, local = runtimes
    x, w = _conv_inputs(4)
    expected = _convolution(local)[1].execute([x, w])[0]
    backend, workload = _convolution(hosted)
    xs, ws, out = _shared_copy(x), _shared_copy(w), loader.shared_array(expected.shape)
    workload.execute([xs, ws], [out])
    os.kill(backend.host.pid, signal.SIGKILL)
    with pytest.raises(loader.BackendCrashedError):
        workload.execute([xs, ws], [out])
    out[...] = 0
    _, workload = _convolution(hosted)
    workload.execute([xs, ws], [out])
    np.testing.assert_array_equal(out, expected)


def test_shared_arrays_are_ordinary_arrays_in_process(runtimes):
    _, local = runtimes
    x, w = _conv_inputs(5)
    _, workload = _convolution(local)
    expected = workload.execute([x, w])[0]
    out = loader.shared_array(expected.shape)
    workload.execute([_shared_copy(x), _shared_copy(w)], [out])
    np.testing.assert_array_equal(out, expected)


def test_shared_arrays_leak_no_descriptor(backend_dir):
    install_reference(backend_dir)
    x, w = _conv_inputs(6)
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process") as rt:
        _, workload = _convolution(rt)
        for _ in range(5):
            xs, ws, out = _shared_copy(x), _shared_copy(w), loader.shared_array((1, 9, 11, 5))
            workload.execute([xs, ws], [out])
        del xs, ws, out, workload
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before


def test_an_array_outside_every_segment_is_never_taken_for_a_shared_one():
    from loader.host.shared import segment_of
    a = loader.shared_array((4,))
    assert segment_of(a) is segment_of(a[1:]) is segment_of(a.reshape(2, 2)[1])
    assert segment_of(np.zeros(4, F)) is None
    assert segment_of(np.frombuffer(bytearray(16), F)) is None
    assert segment_of(a.copy()) is None
    assert isinstance(segment_of(a), _core.Segment)
