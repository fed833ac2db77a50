"""Running a planned network whose steps run in backend hosts: ``_core.Executor``'s interface,
with one request per run of consecutive steps on one host (not one per step).

Every tensor a step reads or writes lives in shared memory: the arena and the network's inputs
and outputs in one read-write segment, the constants the steps read in a read-only one. Each
host maps both and holds its runs as sequences: steps bound once to (segment, offset, size)
buffers. ``run`` copies the inputs in, sends each run's request in plan order, and copies the
outputs out."""
import threading
from typing import List, Tuple

import numpy as np

from loader import _core
from loader.errors import BackendError
from loader.host import channel as wire
from loader.host.backend import check_status
from loader.host.process import outcome_error


class _Run:
    """Consecutive steps on one host, bound there as one sequence."""

    _what = "the network's steps"
    _closed = False

    def __init__(self, host, first: int, count: int):
        self.host = host
        self.first = first
        self.count = count
        self._generation = host.generation
        self._handle = 0


class HostExecutor:
    """Runs a planned network's steps in their hosts: ``steps`` as ``_core.Executor`` takes
    them, with arena offsets from 0; ``arena_bytes`` of arena; ``dynamic_bytes``, the size of
    each dynamic slot, the first ``num_inputs`` of them inputs (copied in), the rest outputs
    (copied out)."""

    def __init__(self, steps, arena_bytes: int, dynamic_bytes: List[int], num_inputs: int):
        self._lock = threading.Lock()
        self.closed = False
        self.step_names = [spec[0] for spec in steps]
        self._num_inputs = num_inputs
        self._dynamic_sizes = list(dynamic_bytes)
        self._hosts = {}       # host -> (generation, I/O segment's handle, constants' handle)
        self._runs: List[_Run] = []
        self._times: List[Tuple[int, int]] = [(0, 0)] * len(steps)
        self._segments = []
        self._slots = []
        offset = _core.aligned_bytes([arena_bytes]) if arena_bytes else 0
        for size in dynamic_bytes:
            self._slots.append(offset)
            offset += _core.aligned_bytes([max(size, 1)])
        self._io = _core.Segment(max(offset, 64))
        self._segments.append(self._io)
        constants, placed, total = {}, {}, 0
        for spec in steps:
            for ref in list(spec[3]) + list(spec[4]):
                if ref[0] == "constant" and id(ref[1]) not in placed:
                    data = np.ascontiguousarray(ref[1], dtype=np.float32)
                    constants[id(ref[1])] = data
                    placed[id(ref[1])] = total
                    total += _core.aligned_bytes([max(data.nbytes, 1)])
        self._constants = None
        if total:
            self._constants = _core.Segment(total)
            for key, data in constants.items():
                self._constants.write(placed[key], data)
            self._constants.seal_read_only()
            self._segments.append(self._constants)
        try:
            self._bind(steps, placed)
        except BaseException:
            self.close()
            raise

    def _bind(self, steps, placed):
        for index, spec in enumerate(steps):
            runner = spec[2]
            if not getattr(runner, "hosted", False):
                raise BackendError(f"{spec[0]}: a step in this process and others in backend "
                                   f"hosts cannot run in one network")
            if self._runs and self._runs[-1].host is runner._host:
                self._runs[-1].count += 1
            else:
                self._runs.append(_Run(runner._host, index, 1))
        handles = self._hosts
        for run in self._runs:
            first = steps[run.first][2]
            if first.lost:
                first._host.check(first)                    # raises: lost
            run._generation = first._generation
            if run.host not in handles:
                io = run.host.add_segment(run, self._io, writable=True)
                const = (run.host.add_segment(run, self._constants, writable=False)
                         if self._constants is not None else 0)
                handles[run.host] = (run._generation, io, const)
            _, io, const = handles[run.host]
            payload = bytearray(wire.u32(run.count))
            for spec in steps[run.first:run.first + run.count]:
                runner = spec[2]
                payload += wire.u64(runner._handle)
                payload += wire.u32(len(spec[3])) + wire.u32(len(spec[4]))
                for k, ref in enumerate(list(spec[3]) + list(spec[4])):
                    if ref[0] == "arena":
                        segment, offset, size = io, ref[1], ref[2]
                    elif ref[0] == "constant":
                        segment, offset, size = const, placed[id(ref[1])], 4 * ref[1].size
                    else:
                        segment, offset, size = io, self._slots[ref[1]], self._sizes_of(ref)
                    payload += wire.u64s(segment, offset, size)
                    payload += wire.u64(0)     # flags, reserved: the host marks constants
            handle, _, outcome, reply = run.host.call(run, "add_sequence", payload=bytes(payload))
            if outcome != wire.OUTCOME_OK:
                raise outcome_error(outcome, wire.text(wire.message(reply)))
            run._handle = handle

    def _sizes_of(self, ref):
        return self._dynamic_sizes[ref[1]]

    def lost(self) -> bool:
        """Whether a host this network runs on is gone (the network must be loaded again)."""
        return any(run._generation != run.host.generation or not run.host.running
                   for run in self._runs)

    def close(self):
        """Forget every sequence and segment; later runs raise."""
        with self._lock:
            self.closed = True
            for run in self._runs:
                run.host.release(run._generation, run._handle)
            for host, (generation, io, const) in self._hosts.items():
                host.release(generation, io)
                host.release(generation, const)
            for segment in self._segments:
                segment.close()
            self._runs = []

    def step_times(self):
        return list(self._times)

    def run(self, arrays, timing=False):
        """Copy the inputs in, run every run's sequence in order, copy the outputs out."""
        if len(arrays) != len(self._slots):
            raise ValueError(f"{len(arrays)} arrays for {len(self._slots)} slots")
        with self._lock:
            if self.closed:
                raise BackendError("the network was unloaded")
            for slot in range(self._num_inputs):
                self._io.write(self._slots[slot], arrays[slot])
            for run in self._runs:
                _, status, outcome, payload = run.host.call(
                    run, "run_sequence", run._handle, wire.RUN_TIMING if timing else 0)
                if outcome != wire.OUTCOME_OK:
                    raise outcome_error(outcome, wire.text(wire.message(payload)))
                message, failed, times = wire.run(payload)
                if timing:
                    self._times[run.first:run.first + len(times)] = times[:run.count]
                if status != 0:
                    step = run.first + (failed if failed is not None and failed < run.count
                                        else 0)
                    check_status(status, message, f"{self.step_names[step]}: execute")
            for slot in range(self._num_inputs, len(self._slots)):
                self._io.read_into(self._slots[slot], arrays[slot])
