"""Speed (PERF-1, a WARNING): each layer the backend supports, timed against the reference backend
on the same case."""
import time

from conformance.layer_runs import Prepared, inputs_for
from conformance.registry import NotSupported, Warning_, case

SLOWER = 5.0               # a layer this many times slower than the reference is worth a warning

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
    backend = subject.backend()
    reference = _reference_backend(getattr(backend, "hosted", False))
    if reference is None:
        raise NotSupported("the reference backend cannot be loaded here")
    try:
        return _compare(subject, backend, reference)
    finally:
        if getattr(reference, "hosted", False):
            reference.library.close()               # its host goes now


def _compare(subject, backend, reference):
    findings, measured, ratios = [], 0, []
    for spec in SPEED_SPECS:
        shapes = [tuple(s) for s in spec["inputs"]]
        if not backend.is_layer_supported(spec["layer"], shapes, spec.get("descriptor")):
            continue
        data = dict(spec, values="uniform")
        inputs = inputs_for(data, subject.seed)
        theirs, ours = Prepared(backend, spec, inputs), Prepared(reference, spec, inputs)
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
