"""Speed (PERF-1, a WARNING): each layer the backend supports, timed against the reference backend
on the same case: the same shapes, values and descriptor, in the same process.

A busy machine must not make a backend look slow. The two are timed in interleaved rounds (the
backend, then the reference, then the backend again, ...), each round the best of a few batches,
and a layer is reported only when it is the threshold slower in every round: a burst of load
that slows one round stops the comparison at the next round that runs at normal speed. Threads
are compared too: the CPU time a round takes against its wall time says how many CPUs each kept
busy, and a warning says when the reference backend used several and this backend one.
"""
import time
from dataclasses import dataclass
from typing import Callable, List, Tuple

from conformance.layer_runs import Prepared, inputs_for
from conformance.registry import NotSupported, Warning_, case

SLOWER = 5.0      # a layer this many times slower than the reference in every round: a warning
ROUNDS = 5        # interleaved rounds before a layer is called slow
BATCHES = 3       # per round and backend: the best of this many batches
RUNS = 5          # executions per batch
SEVERAL = 1.5     # CPUs kept busy on average, above which a backend counts as multi-threaded

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


@dataclass
class Timing:
    """One round of one backend: seconds per execution (best batch), CPUs kept busy."""
    seconds: float
    cpus: float


@dataclass
class Comparison:
    ratios: List[float]         # this backend's time over the reference's, one per round run
    theirs: List[Timing]
    ours: List[Timing]

    def slow(self, threshold=SLOWER, rounds=ROUNDS) -> bool:
        """Slower by ``threshold`` in every one of ``rounds`` rounds."""
        return len(self.ratios) >= rounds and min(self.ratios) >= threshold

    def threads(self) -> str:
        """How the two used the machine, when they differ: what a reader must know to weigh
        the ratio."""
        theirs = max(t.cpus for t in self.theirs)
        ours = max(t.cpus for t in self.ours)
        if ours >= SEVERAL > theirs:
            return (f"; the reference backend kept about {ours:.0f} CPUs busy, this backend one "
                    f"(per CPU it is {min(self.ratios) * theirs / ours:.1f}x slower)")
        if theirs >= SEVERAL > ours:
            return f"; this backend kept about {theirs:.0f} CPUs busy, the reference backend one"
        return ""


def time_round(run: Callable[[int], None], clock=time.perf_counter,
               cpu_clock=time.process_time) -> Timing:
    """The best of BATCHES batches of RUNS executions (``run(n)`` executes n times)."""
    best, cpus = float("inf"), 1.0
    for _ in range(BATCHES):
        wall, cpu = clock(), cpu_clock()
        run(RUNS)
        wall, cpu = clock() - wall, cpu_clock() - cpu
        if wall / RUNS < best:
            best, cpus = wall / RUNS, (cpu / wall if wall > 0 else 1.0)
    return Timing(best, cpus)


def compare(theirs: Callable[[], Timing], ours: Callable[[], Timing], threshold=SLOWER,
            rounds=ROUNDS) -> Comparison:
    """Interleaved rounds of ``theirs`` (the backend under test) and ``ours`` (the reference),
    stopping at the first round in which the backend is less than ``threshold`` slower."""
    result = Comparison([], [], [])
    for _ in range(rounds):
        result.theirs.append(theirs())
        result.ours.append(ours())
        result.ratios.append(result.theirs[-1].seconds / max(result.ours[-1].seconds, 1e-12))
        if result.ratios[-1] < threshold:
            break
    return result


def _reference_backend(hosted=False):
    """The reference backend, in a backend host of its own when the backend under test runs in
    one (each call then costs a round trip for both)."""
    import reference_backend
    from loader import _core
    library, reason, detail = _core.Library.open(reference_backend.LIBRARY_PATH)
    if library is None:
        return None
    major, minor = library.read_version()
    library.accept(library.read_backend_id().decode("ascii"), major, minor)
    if hosted:
        from loader.host import HostSettings, HostedLibrary
        library = HostedLibrary.adopt(library, HostSettings(None, 0, {}))
    return library.create_backend()


def _timer(prepared: Prepared) -> Callable[[], Timing]:
    prepared.run(2)  # first touches of memory and code are not the layer's speed
    return lambda: time_round(prepared.run)


def _measure(backend, reference, spec, seed) -> Tuple[Comparison, str]:
    inputs = inputs_for(dict(spec, values="uniform"), seed)
    theirs, ours = Prepared(backend, spec, inputs), Prepared(reference, spec, inputs)
    try:
        comparison = compare(_timer(theirs), _timer(ours))
    finally:
        theirs.close()
        ours.close()
    return comparison, f"{spec['layer']} ({' '.join(str(s) for s in spec['inputs'])})"


@case("speed.layers", "PERF-1", tier="full")
def _speed(subject):
    backend = subject.backend()
    reference = _reference_backend(getattr(backend, "hosted", False))
    if reference is None:
        raise NotSupported("the reference backend cannot be loaded here")
    try:
        return _compare_all(subject, backend, reference)
    finally:
        if getattr(reference, "hosted", False):
            reference.library.close()               # its host goes now


def _compare_all(subject, backend, reference):
    findings, measured, ratios = [], 0, []
    for spec in SPEED_SPECS:
        shapes = [tuple(s) for s in spec["inputs"]]
        if not backend.is_layer_supported(spec["layer"], shapes, spec.get("descriptor")):
            continue
        comparison, label = _measure(backend, reference, spec, subject.seed)
        measured += 1
        ratios.append((min(comparison.ratios), spec["layer"]))
        if comparison.slow():
            findings.append(f"{label}: {min(comparison.ratios):.1f}x slower than the reference "
                            f"backend or more in each of {len(comparison.ratios)} rounds"
                            f"{comparison.threads()}")
    if not measured:
        raise NotSupported("the backend supports none of the kit's speed cases")
    if findings:
        raise Warning_(f"{len(findings)} of {measured} layers run {SLOWER:g}x or more slower than "
                       f"the reference backend on the same case: " + "; ".join(findings))
    ratio, layer = max(ratios)
    return f"{measured} layers timed against the reference backend; the slowest, {layer}, takes " \
           f"{ratio:.1f}x its time"
