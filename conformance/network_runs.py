"""Whole networks on the backend under test: loaded onto it alone through the loader's own
planning and executor (what ``Runtime.load_network`` does), executed, and compared with
``conformance.network_reference`` evaluated in float64.

How far an output may be from the reference: every layer may add the error the layer cases
allow it (``conformance.tolerances``), and carries forward the error already in its inputs,
amplified by as much as the layer amplifies a change of that input. The amplification is
measured on the reference itself, at the reference values, by nudging each input (first-order
error propagation): a chain of 300 additions may drift by 300 layers' worth of rounding, a
layer that discards its input (a dropped step, an output never written) by far more.
"""
from typing import Dict, List, Optional, Tuple

import numpy as np

from conformance import reference, tolerances
from conformance.registry import Failed, NotSupported

NUDGE = 1e-3          # relative size of the change each input is nudged by


class SubjectRuntime:
    """The backend under test as the loader's networks see a runtime: one registered backend,
    each instance made by the kit's subject (so that its calls are the subject's)."""

    def __init__(self, subject):
        from conformance import tracing
        self._subject = subject
        self._unwrap = tracing._unwrap
        backend = subject.backend()
        self.id = backend.id
        backend.close()
        self._networks = None

    @property
    def backend_ids(self) -> List[str]:
        return [self.id]

    def create_backend(self, backend_id):
        return self._unwrap(self._subject.backend())

    def _network_host(self):
        from loader.networks.execution import RuntimeNetworks
        if self._networks is None:
            self._networks = RuntimeNetworks(self)
        return self._networks

    def close(self):
        if self._networks is not None:
            self._networks.close()
            self._networks = None


def load(runtime: SubjectRuntime, network, label: str):
    """``network`` loaded onto the backend alone. A layer the backend (or its optimizer)
    declines means it does not run this network: NOT_SUPPORTED, saying which."""
    import loader
    from loader.networks.execution import LoadedNetwork
    runtime._subject.record.note(f"load_network ({label})")
    try:
        return LoadedNetwork._create(runtime, network, [runtime.id])
    except loader.NoBackendForLayerError as error:
        raise NotSupported(f"{label}: the backend declines a layer of it: {error}")
    except loader.BackendError as error:
        raise Failed(f"{label}: load_network failed on layers the backend supports: "
                     f"{type(error).__name__}: {error}")


def execute(runtime: SubjectRuntime, loaded, inputs: Dict[str, np.ndarray], label: str):
    import loader
    runtime._subject.record.note(f"execute ({label})")
    try:
        return loaded.execute(inputs)
    except loader.BackendError as error:
        raise Failed(f"{label}: execute failed: {type(error).__name__}: {error}")


# How a layer carries the errors of its inputs (each input's error, element by element):
# element-wise layers (each output element depends on the same element of each input, broadcast):
# the layer evaluated on each input nudged by its error, both ways, so that a scale and the
# scale that undoes it cancel as they do in the values;
ELEMENTWISE = ("Activation", "ElementwiseUnary", "Addition", "Multiplication", "Subtraction",
               "Division", "Maximum", "Minimum", "Power", "Prelu", "BatchNormalization")
# linear in the data and in the weights: the root of the layer evaluated on the squares of the
# data's errors and of the weights (and the other way round): the errors of the K terms of a
# sum are independent roundings, which add up like a random walk, not all in one direction;
LINEAR = ("FullyConnected", "Convolution2d", "DepthwiseConvolution2d", "TransposeConvolution2d",
          "MatMul")
# layers that move or select values: the layer evaluated on the errors themselves;
MOVES = ("Reshape", "Transpose", "Slice", "Concatenation", "Pad")
# every other layer (Softmax, normalizations, reductions, ...): the largest error of an input
# times the layer's amplification of a change of that input, measured by nudging it.


def _amplification(layer, values, index, rng) -> float:
    """How much a change of input ``index`` can change the layer's output (max norms)."""
    inputs = [values[n] for n in layer.inputs]
    scale = NUDGE * max(1.0, float(np.max(np.abs(inputs[index]), initial=0.0)))
    gain = 0.0
    for direction in (np.ones(inputs[index].shape), rng.choice([-1.0, 1.0], inputs[index].shape)):
        nudged = list(inputs)
        nudged[index] = inputs[index] + scale * direction
        changed = reference.evaluate(layer.type, nudged, layer.descriptor)
        gain = max(gain, float(np.max(np.abs(changed - values[layer.name]), initial=0.0)) / scale)
    return gain


def _carried(layer, values, error, rng) -> np.ndarray:
    """The error the layer's output carries from the errors of its inputs."""
    inputs = [values[n] for n in layer.inputs]
    errors = [np.broadcast_to(error[n], x.shape) for n, x in zip(layer.inputs, inputs)]
    out = values[layer.name]
    if not any(np.any(e) for e in errors):
        return np.zeros(out.shape)
    evaluate = reference.evaluate
    pool = (layer.descriptor or {}).get("pool", "max")
    if layer.type in MOVES or (layer.type == "Pooling2d" and pool in ("max", "average")):
        descriptor = dict(layer.descriptor or {}, **({"value": 0.0} if layer.type == "Pad" else {}))
        return evaluate(layer.type, errors, descriptor)
    carried = np.zeros(out.shape)
    if layer.type in LINEAR:
        rest = [np.zeros(x.shape) for x in inputs[2:]]        # the bias: added below
        if np.any(errors[0]):
            carried += np.sqrt(evaluate(layer.type, [errors[0] ** 2, inputs[1] ** 2] + rest,
                                        layer.descriptor))
        if np.any(errors[1]):
            carried += np.sqrt(evaluate(layer.type, [inputs[0] ** 2, errors[1] ** 2] + rest,
                                        layer.descriptor))
        return carried + (errors[2] if len(errors) > 2 else 0.0)
    for i, e in enumerate(errors):
        if not np.any(e):
            continue
        if layer.type in ELEMENTWISE:
            moved = []
            for sign in (1.0, -1.0):
                nudged = list(inputs)
                nudged[i] = inputs[i] + sign * e
                moved.append(np.abs(evaluate(layer.type, nudged, layer.descriptor) - out))
            carried = carried + np.maximum(*moved)
        else:
            carried = carried + _amplification(layer, values, i, rng) * float(np.max(e))
    return carried


def expected_outputs(network, inputs: Dict[str, np.ndarray]
                     ) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """Output name -> (float64 reference, tolerance of each element)."""
    rng = np.random.default_rng(0)
    values = {name: np.asarray(inputs[name], dtype=np.float64) for name in network.inputs}
    values.update({name: a.astype(np.float64) for name, a in network.constants.items()})
    error = {name: np.zeros(()) for name in values}   # what each tensor may be off by
    for layer in network.layers:
        operands = [values[n] for n in layer.inputs]
        values[layer.name] = reference.evaluate(layer.type, operands, layer.descriptor)
        own = tolerances.tolerance({"layer": layer.type, "descriptor": layer.descriptor},
                                   operands, values[layer.name])
        error[layer.name] = own + _carried(layer, values, error, rng)
    result = {}
    for name, source in network.outputs.items():
        expected = values[source]
        result[name] = (expected, 1e-4 + 1e-4 * np.abs(expected) + error[source])
    return result


def compare(network, inputs, outputs, label: str, expected=None) -> None:
    """Fail when an output of ``network`` differs from the reference by more than its
    tolerance, naming the output, the worst element and how far it is."""
    expected = expected_outputs(network, inputs) if expected is None else expected
    for name, (want, tol) in expected.items():
        got = outputs.get(name)
        if got is None or got.shape != want.shape:
            raise Failed(f"{label}: output {name!r} is "
                         f"{'missing' if got is None else f'of shape {got.shape}'}, expected "
                         f"shape {want.shape}")
        bad = ~np.isfinite(got) | (np.abs(got - want) > tol)
        if np.any(bad):
            distance = np.where(np.isfinite(got), np.abs(got - want) - tol, np.inf)
            worst = np.unravel_index(int(np.argmax(distance)), want.shape)
            raise Failed(f"{label}: output {name!r}: {int(bad.sum())} of {want.size} values "
                         f"differ from the float64 reference beyond tolerance; worst at index "
                         f"{tuple(int(i) for i in worst)}: {float(got[worst])!r}, expected "
                         f"{float(want[worst]):.6g} ± {float(tol[worst]):.3g}")


def random_inputs(network, seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in network.inputs.items()}


def supported(backend, layer: str, shapes, descriptor=None) -> bool:
    """Whether the backend says it runs ``layer`` on inputs of ``shapes``."""
    import loader
    try:
        return bool(backend.is_layer_supported(layer, [tuple(s) for s in shapes], descriptor))
    except loader.BackendError:
        return False


def optimizing_backend(subject):
    """An instance of the backend under test, or NOT_SUPPORTED when it has no optimizer:
    networks then run one workload per layer, which the layer cases check."""
    backend = subject.backend()
    if not backend.features.get("SubgraphOptimization"):
        backend.close()
        raise NotSupported(f"the backend (Backend API {backend.version}) has no "
                           f"optimize_subgraph: its networks run as workloads, which the layer "
                           f"cases check")
    return backend


def run_and_compare(subject, networks: List[Tuple[str, object]], seed: Optional[int]) -> int:
    """Load, execute and compare each (label, network); NOT_SUPPORTED only when the backend
    runs none of them. Returns how many ran."""
    runtime = SubjectRuntime(subject)
    ran, declined = 0, []
    try:
        for k, (label, network) in enumerate(networks):
            try:
                loaded = load(runtime, network, label)
            except NotSupported as reason:
                declined.append(str(reason))
                continue
            with loaded:
                inputs = random_inputs(network, (seed or 0) + k)
                outputs = execute(runtime, loaded, inputs, label)
                compare(network, inputs, outputs, f"{label} (seed {seed})")
            ran += 1
    finally:
        runtime.close()
    if not ran:
        raise NotSupported(declined[0] if len(declined) == 1 else
                           f"the backend runs none of the {len(networks)} networks; first: "
                           f"{declined[0] if declined else 'none built'}")
    return ran
