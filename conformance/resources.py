"""Resources, threads and speed over every layer the backend supports: leaks per execute (heap
and address space, LIFE-6), concurrent execution with distinct inputs per thread and checked
results (CONC-1), and speed against the reference backend on the same case (PERF-1, a WARNING).
"""
import gc
import os
import threading
import time
from typing import List, Tuple

import numpy as np

from conformance.cases import (Failed, LayerMismatch, NotSupported, Warning_, case, layer_cases,
                               _heap_in_use)

LEAK_EXECUTES = 2000       # per layer
LEAK_HEAP_BYTES = 16       # heap growth per execute before it is a leak
LEAK_ADDRESS_SPACE = 1 << 20  # address-space growth over LEAK_EXECUTES before it is a leak
THREADS = 4
SLOWER = 5.0               # a layer this many times slower than the reference is worth a warning


def first_supported_per_layer(backend) -> List[dict]:
    """The first fixed case of each layer type that ``backend`` supports."""
    chosen, seen = [], set()
    for data in layer_cases():
        if data["layer"] in seen:
            continue
        try:
            if backend.is_layer_supported(data["layer"], [tuple(s) for s in data["inputs"]],
                                          data.get("descriptor")):
                chosen.append(data)
                seen.add(data["layer"])
        except Exception:
            continue
    return chosen


def _address_space() -> Tuple[int, int]:
    """(virtual size, resident size) of this process in bytes."""
    with open("/proc/self/statm") as f:
        size, resident = f.read().split()[:2]
    page = os.sysconf("SC_PAGE_SIZE")
    return int(size) * page, int(resident) * page


class _Prepared:
    """One layer ready to run repeatedly: workload, inputs, output, its memory manager."""

    def __init__(self, backend, data, inputs):
        self.data = data
        self.inputs = inputs
        self.manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
        factory = backend.create_workload_factory(self.manager)
        self.workload = factory.create_workload(data["layer"], inputs, data.get("descriptor"))
        factory.close()
        self.output = [np.empty(self.workload.output_shape, np.float32)]

    def run(self, times=1):
        if self.manager is not None:
            self.manager.acquire()
        try:
            for _ in range(times):
                self.workload.execute(self.inputs, self.output)
        finally:
            if self.manager is not None:
                self.manager.release()
        return self.output[0]

    def close(self):
        self.workload.close()
        if self.manager is not None:
            self.manager.close()


@case("resources.execute-leaks", "LIFE-6", tier="full")
def _execute_leaks(subject):
    from conformance import generated
    backend = subject.backend()
    chosen = first_supported_per_layer(backend)
    if not chosen:
        raise NotSupported("the backend supports none of the kit's layer cases")
    if _heap_in_use() is None:
        raise NotSupported("this C library cannot report heap use (mallinfo2)")
    problems = []
    for data in chosen:
        prepared = _Prepared(backend, data, generated.inputs_for(data, subject.seed))
        try:
            prepared.run(100)  # let the allocator and any caches settle
            gc.collect()
            heap, (virtual, resident) = _heap_in_use(), _address_space()
            prepared.run(LEAK_EXECUTES)
            gc.collect()
            middle = _heap_in_use()
            virtual_after, resident_after = _address_space()
            # A leak grows the heap in every window; a one-off allocation meanwhile (an arena
            # or a container of the host growing once) does not grow it again in the next.
            prepared.run(LEAK_EXECUTES)
            gc.collect()
            heap_growth = min(middle - heap, _heap_in_use() - middle)
        finally:
            prepared.close()
        if heap_growth > LEAK_HEAP_BYTES * LEAK_EXECUTES:
            problems.append(f"{data['layer']} ({data['id']}): the heap grew by "
                            f"{heap_growth / LEAK_EXECUTES:.0f} bytes per execute (at least "
                            f"{heap_growth} bytes in each of two runs of {LEAK_EXECUTES} "
                            f"executes of one workload)")
        if virtual_after - virtual > LEAK_ADDRESS_SPACE:
            problems.append(f"{data['layer']} ({data['id']}): the address space grew by "
                            f"{(virtual_after - virtual) / LEAK_EXECUTES:.0f} bytes per execute "
                            f"({(virtual_after - virtual) >> 10} KiB mapped, resident "
                            f"{(resident_after - resident) >> 10:+} KiB, over {LEAK_EXECUTES} "
                            f"executes): memory mapped and never unmapped")
    if problems:
        raise Failed("; ".join(problems))


# A convolution long enough for threads to overlap inside the backend.
HEAVY_CONVOLUTION = {"id": "threads-convolution", "layer": "Convolution2d",
                     "inputs": [[1, 24, 24, 16], [16, 3, 3, 16], [16]],
                     "descriptor": {"padding": [1, 1, 1, 1]}}
HEAVY_REPEATS = 3  # the long convolution runs this many times in a row in each iteration


def concurrency(subject):
    """CONC-1: THREADS threads, each with its own instance and its own inputs, run every layer the
    backend supports at once; every output is checked."""
    from conformance import generated
    backend = subject.backend()
    chosen = first_supported_per_layer(backend)
    if not chosen:
        raise NotSupported("the backend supports none of the kit's layer cases")
    if backend.is_layer_supported(HEAVY_CONVOLUTION["layer"], HEAVY_CONVOLUTION["inputs"],
                                  HEAVY_CONVOLUTION["descriptor"]):
        chosen.append(HEAVY_CONVOLUTION)
    specs = [dict(d, values="uniform", scale=d.get("scale", 1.0)) for d in chosen]
    iterations = 5
    barrier = threading.Barrier(THREADS)
    outputs = {}
    errors = []

    def work(thread):
        try:
            own = subject.backend()
            prepared = [_Prepared(own, spec, generated.inputs_for(spec, subject.seed,
                                                                  f"thread{thread}"))
                        for spec in specs]
            barrier.wait(timeout=30)
            for iteration in range(iterations):
                for p in prepared:
                    repeats = HEAVY_REPEATS if p.data["id"] == HEAVY_CONVOLUTION["id"] else 1
                    for repeat in range(repeats):
                        outputs[thread, iteration, p.data["id"], repeat] = (p.inputs, p.run().copy())
            for p in prepared:
                p.close()
        except Exception as error:  # reported below
            errors.append(f"thread {thread}: {type(error).__name__}: {error}")
            barrier.abort()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise Failed(f"{len(errors)} of {THREADS} threads failed; first: {errors[0]}")
    failures, expected, owners = [], {}, []
    for (thread, iteration, case_id, _), (inputs, out) in sorted(outputs.items()):
        spec = next(s for s in specs if s["id"] == case_id)
        if (thread, case_id) not in expected:
            expected[thread, case_id] = generated.expectation(spec, inputs)
        try:
            generated.compare(spec, inputs, out, subject.seed,
                              f"thread {thread} of {THREADS} running at once, iteration "
                              f"{iteration + 1}", expected[thread, case_id])
        except Failed as failure:
            failures.append(str(failure))
            owners.append(case_id)
    if failures:
        message = (f"{len(failures)} of {len(outputs)} outputs computed by {THREADS} threads at "
                   f"once are wrong (each thread had its own instance, workloads and inputs); "
                   f"first: {failures[0]}")
        if len(set(owners)) == 1:  # one layer case wrong: traced to it when it failed alone
            raise LayerMismatch(owners[0], message)
        raise Failed(message)


# -- speed against the reference backend -------------------------------------------------------

SPEED_SPECS = [
    {"id": "speed-activation", "layer": "Activation", "inputs": [[64, 256]],
     "descriptor": {"function": "relu"}},
    {"id": "speed-addition", "layer": "Addition", "inputs": [[64, 256], [64, 256]]},
    {"id": "speed-multiplication", "layer": "Multiplication", "inputs": [[64, 256], [64, 256]]},
    {"id": "speed-fc", "layer": "FullyConnected", "inputs": [[8, 256], [64, 256], [64]]},
    {"id": "speed-conv", "layer": "Convolution2d", "inputs": [[1, 12, 12, 8], [8, 3, 3, 8]],
     "descriptor": {"padding": [1, 1, 1, 1]}},
    {"id": "speed-depthwise", "layer": "DepthwiseConvolution2d",
     "inputs": [[1, 24, 24, 16], [1, 3, 3, 16]], "descriptor": {"padding": [1, 1, 1, 1]}},
    {"id": "speed-pool", "layer": "Pooling2d", "inputs": [[1, 24, 24, 16]],
     "descriptor": {"pool": "max", "kernel": [3, 3]}},
    {"id": "speed-softmax", "layer": "Softmax", "inputs": [[32, 256]]},
    {"id": "speed-reshape", "layer": "Reshape", "inputs": [[64, 256]], "descriptor": {"shape": [-1]}},
]


def _reference_backend():
    import reference_backend
    from loader import _core
    library, reason, detail = _core.Library.open(reference_backend.LIBRARY_PATH)
    if library is None:
        return None
    major, minor = library.read_version()
    library.accept(library.read_backend_id().decode("ascii"), major, minor)
    return library.create_backend()


def _best_time(prepared, rounds=5, per_round=5):
    prepared.run(2)
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        prepared.run(per_round)
        best = min(best, (time.perf_counter() - started) / per_round)
    return best


@case("speed.layers", "PERF-1", tier="full")
def _speed(subject):
    from conformance import generated
    backend = subject.backend()
    reference = _reference_backend()
    if reference is None:
        raise NotSupported("the reference backend cannot be loaded here")
    findings, measured, ratios = [], 0, []
    for spec in SPEED_SPECS:
        shapes = [tuple(s) for s in spec["inputs"]]
        if not backend.is_layer_supported(spec["layer"], shapes, spec.get("descriptor")):
            continue
        data = dict(spec, values="uniform")
        inputs = generated.inputs_for(data, subject.seed)
        theirs, ours = _Prepared(backend, spec, inputs), _Prepared(reference, spec, inputs)
        try:
            ratio = _best_time(theirs) / _best_time(ours)
            if ratio >= SLOWER:  # measure again before saying so
                ratio = min(ratio, _best_time(theirs) / _best_time(ours))
        finally:
            theirs.close()
            ours.close()
        measured += 1
        ratios.append((ratio, spec["layer"]))
        if ratio >= SLOWER:
            findings.append(f"{spec['layer']} ({' '.join(str(s) for s in spec['inputs'])}): "
                            f"{ratio:.1f}x slower than the reference backend")
    if not measured:
        raise NotSupported("the backend supports none of the kit's speed cases")
    if findings:
        raise Warning_(f"{len(findings)} of {measured} layers run {SLOWER:g}x or more slower than "
                       f"the reference backend on the same case: " + "; ".join(findings))
    ratio, layer = max(ratios)
    return f"{measured} layers timed against the reference backend; the slowest, {layer}, takes " \
           f"{ratio:.1f}x its time"
