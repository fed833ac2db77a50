"""Running a layer and judging its output, for every family of cases: the fixed cases of
layer_cases.yaml and their inputs, the values of generated cases, the float64 comparison with
its tolerances, and the step-by-step runs the cases share.

Fixed cases keep their own seeding (their id); generated ones take their values from the run's
seed (``--seed``, in the report and in every reproduce command) and their id. References are
computed in float64 (conformance/reference/); tolerances are conformance/tolerances.py's. A NaN
or infinity where the reference is finite is always a mismatch, and so is anything but the
same infinity where the reference is infinite.
"""
import contextlib
import hashlib
import os
from typing import List

import numpy as np
import yaml

from conformance.registry import LayerMismatch
from conformance.tolerances import tolerance

DEFAULT_SEED = 20261123
WEIGHTED = ("FullyConnected", "Convolution2d", "DepthwiseConvolution2d",
            "TransposeConvolution2d")  # input 1.. are weights
FLOAT32_MAX = float(np.finfo(np.float32).max)


# -- the fixed cases ---------------------------------------------------------------------------

_LAYER_CASES: List[dict] = []


def layer_cases() -> List[dict]:
    if not _LAYER_CASES:
        with open(os.path.join(os.path.dirname(__file__), "layer_cases.yaml")) as f:
            _LAYER_CASES.extend(yaml.safe_load(f))
    return _LAYER_CASES


def layer_inputs(data):
    """The inputs of a fixed case, seeded by its id: uniform in [-scale, scale), or of the
    classes its ``kinds`` lists (one per input; see _values)."""
    seed = int.from_bytes(hashlib.sha256(data["id"].encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    scale = data.get("scale", 1.0)
    if "kinds" in data:
        return [_values(rng, shape, kind, scale) for shape, kind in zip(data["inputs"], data["kinds"])]
    return [(rng.uniform(-1, 1, size=shape) * scale).astype(np.float32) for shape in data["inputs"]]


def malformed_layers():
    """(what, PreparedLayer) that every backend must refuse, with a reason."""
    from loader.layers import PreparedLayer
    relu = {"function": 0, "a": 0.0, "b": 0.0}
    return [
        ("an unknown layer type", PreparedLayer("Unknown", 9999, ((4,),), (4,), {})),
        ("an output shape that does not follow", PreparedLayer("Activation", 0, ((4,),), (5,), relu)),
        ("shapes that do not broadcast", PreparedLayer("Addition", 1, ((2, 3), (4,)), (2, 3), {})),
        ("a zero stride", PreparedLayer("Convolution2d", 4, ((1, 5, 5, 1), (1, 3, 3, 1)), (1, 3, 3, 1), {
            "stride_y": 0, "stride_x": 0, "pad_top": 0, "pad_bottom": 0, "pad_left": 0,
            "pad_right": 0, "dilation_y": 1, "dilation_x": 1, "bias_enabled": 0})),
        ("a reshape that changes the element count", PreparedLayer("Reshape", 8, ((2, 3),), (7,), {})),
    ]


# -- generated cases ---------------------------------------------------------------------------

def spec(family, index, layer, inputs, descriptor=None, values="uniform", scale=1.0, **extra):
    """A generated case: ``<family>-<index>``, its shapes and parameters, the class of its
    values."""
    result = {"id": f"{family}-{index}", "layer": layer, "inputs": [list(s) for s in inputs],
              "values": values, "scale": scale}
    if descriptor:
        result["descriptor"] = descriptor
    result.update(extra)
    return result


def _rng(seed, key):
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _values(rng, shape, kind, scale):
    """Values of one class, in float32: uniform in [-scale, scale) unless ``kind`` says
    otherwise (each class names what it is for)."""
    size = int(np.prod(shape, dtype=np.int64))
    if kind == "large":
        v = rng.uniform(-1, 1, size) * scale
    elif kind == "negative":
        v = rng.uniform(-2, -1, size)
    elif kind == "zeros":
        v = np.where(rng.random(size) < 0.5, rng.choice([0.0, -0.0], size), rng.uniform(-1, 1, size))
    elif kind == "denormal":
        v = rng.choice([1e-40, -1e-40, 1e-45, -1e-45, 0.0, -0.0, 1.0, -0.5], size)
    elif kind == "positive":        # the domain of log, sqrt, rsqrt; a variance
        v = rng.uniform(0.05, 1, size) * scale
    elif kind == "nonzero":         # a divisor
        v = rng.uniform(0.1, 1, size) * rng.choice([-1.0, 1.0], size) * scale
    elif kind == "unit":            # the domain of asin, acos, atanh
        v = rng.uniform(-0.99, 0.99, size)
    elif kind == "above-one":       # the domain of acosh
        v = 1 + rng.uniform(0, 1, size) * scale
    elif kind == "halves":          # rounding: ties (k + 0.5), integers and values between
        k = rng.integers(-8, 8, size).astype(np.float64)
        v = np.select([rng.random(size) < 0.5, rng.random(size) < 0.5],
                      [k + 0.5, k], k + rng.uniform(-1, 1, size) * 0.49)
    elif kind == "integers":        # exponents of a negative base
        v = rng.integers(-3, 4, size).astype(np.float64)
    elif kind == "near-one":        # a long product that neither vanishes nor overflows
        v = rng.uniform(0.8, 1.25, size) * rng.choice([-1.0, 1.0], size)
    elif kind == "signed-zeros":    # +0 and -0 only, where a result is an infinity or a zero
        v = rng.choice([0.0, -0.0], size)
    else:
        v = rng.uniform(-1, 1, size) * scale
    return v.astype(np.float32).reshape(shape)


def inputs_for(data, seed=DEFAULT_SEED, key="") -> List[np.ndarray]:
    """The inputs of a fixed (YAML) or generated case. Fixed cases keep their own seeding."""
    if "values" not in data:
        return layer_inputs(data)
    rng = _rng(DEFAULT_SEED if seed is None else seed, data["id"] + key)
    kind, scale = data["values"], data.get("scale", 1.0)
    count = len(data["inputs"])
    if isinstance(kind, list):  # one class per input
        kinds, scales = kind, scale if isinstance(scale, list) else [scale] * count
    else:
        data_inputs = 1 if data["layer"] in WEIGHTED else count
        kinds = [kind] * data_inputs + ["uniform"] * (count - data_inputs)
        scales = [scale] * data_inputs + [1.0] * (count - data_inputs)
    return [_values(rng, shape, kinds[i], scales[i]) for i, shape in enumerate(data["inputs"])]


def describe(data, seed=None) -> str:
    shapes = " ".join(str(list(s)) for s in data["inputs"])
    extra = "".join(f", {k} {v}" for k, v in (data.get("descriptor") or {}).items())
    scale = data.get("scale", 1)
    values = f", values {data['values']}" + (f" x{scale:g}" if not isinstance(scale, list) and scale != 1
                                             else f" x{scale}" if isinstance(scale, list) else "") \
        if "values" in data else ""
    seeded = f", seed {seed}" if seed is not None and "values" in data else ""
    return f"{data['id']} ({data['layer']} {shapes}{extra}{values}{seeded})"


# -- comparison --------------------------------------------------------------------------------

def expectation(data, inputs):
    """The float64 reference output of a case and its tolerance, per element."""
    from conformance import reference
    expected = reference.evaluate(data["layer"], inputs, data.get("descriptor"))
    return expected, tolerance(data, inputs, expected)


def inputs_at(inputs, shape, index) -> str:
    """The input values that produced output ``index``, for inputs that map onto the output
    element by element (activations, broadcasting arithmetic, softmax)."""
    values = []
    for x in inputs:
        try:
            if np.broadcast_shapes(x.shape, shape) != tuple(shape):
                continue
        except ValueError:
            continue
        values.append(f"{float(np.broadcast_to(x, shape)[index]):.6g}")
    if not values:
        return ""
    return f" (input {values[0]})" if len(values) == 1 else f" (inputs {', '.join(values)})"


def compare(data, inputs, out, seed=None, what="", expected=None):
    """Raise LayerMismatch unless ``out`` matches the float64 reference within the case's
    tolerance. ``expected``: what expectation() returned for these inputs, when already known."""
    label = describe(data, seed) + (f", {what}" if what else "")
    expected, tol = expected or expectation(data, inputs)
    if out.shape != expected.shape:
        raise LayerMismatch(data["id"], f"{label}: output shape {list(out.shape)}, expected "
                                        f"{list(expected.shape)}")
    got = out.astype(np.float64)
    with np.errstate(over="ignore"):  # beyond float32's range, a float32 result is infinite
        expected = np.where(np.abs(expected) > FLOAT32_MAX, expected * np.inf, expected)
    finite = np.isfinite(expected)
    nan = np.isnan(got) & finite
    inf = np.isinf(got) & finite
    infinity = np.isinf(expected) & (got != expected)
    with np.errstate(invalid="ignore"):
        error = np.abs(got - expected)
        bad = nan | inf | infinity | (error > tol)
    if not np.any(bad):
        return
    if np.any(nan | inf | infinity):
        worst = np.unravel_index(np.argmax(nan | inf | infinity), bad.shape)
    else:
        worst = np.unravel_index(np.argmax(np.where(bad, error / np.maximum(tol, 1e-300), 0)),
                                 bad.shape)
    non_finite = f" ({int(nan.sum())} NaN, {int(inf.sum())} infinite where the reference is " \
                 f"finite)" if np.any(nan | inf) else ""
    if np.any(infinity):
        non_finite += f" ({int(infinity.sum())} not the infinity of the reference)"
    raise LayerMismatch(data["id"], f"{label}: {int(bad.sum())} of {bad.size} values wrong"
                                    f"{non_finite}; worst at index {list(map(int, worst))}: got "
                                    f"{float(got[worst]):.7g}, expected {float(expected[worst]):.7g} "
                                    f"(tolerance {float(tol[worst]):.2g})"
                                    f"{inputs_at(inputs, expected.shape, worst)}")


# -- running layers ----------------------------------------------------------------------------

def execute(backend, data, inputs):
    """Run a layer case step by step, as ``Backend.execute`` would, so that each backend call is
    seen (and named) on its own: memory manager, factory, create_workload, execute."""
    manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
    factory = backend.create_workload_factory(manager)
    workload = factory.create_workload(data["layer"], inputs, data.get("descriptor"))
    factory.close()
    try:
        if manager is None:
            return workload.execute(inputs)
        with manager:
            return workload.execute(inputs)
    finally:
        workload.close()
        if manager is not None:
            manager.close()


def first_supported_layer(subject):
    """(YAML entry, inputs) of the first fixed case the subject's backend supports, or (None,
    None)."""
    backend = subject.backend()
    for data in layer_cases():
        subject.working_on(data)
        inputs = layer_inputs(data)
        try:
            if backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")):
                return data, inputs
        except Exception:
            continue
    return None, None


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


class Prepared:
    """One layer ready to run repeatedly: workload, inputs, output, its memory manager."""

    def __init__(self, backend, data, inputs):
        self.data = data
        self.inputs = inputs
        self.manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
        factory = backend.create_workload_factory(self.manager)
        self.workload = factory.create_workload(data["layer"], inputs, data.get("descriptor"))
        factory.close()
        self.output = [np.empty(self.workload.output_shape, np.float32)]

    def execute(self):
        """One execution; the memory manager, if any, must be acquired (``acquired()``)."""
        self.workload.execute(self.inputs, self.output)

    @contextlib.contextmanager
    def acquired(self):
        if self.manager is not None:
            self.manager.acquire()
        try:
            yield self
        finally:
            if self.manager is not None:
                self.manager.release()

    def run(self, times=1):
        with self.acquired():
            for _ in range(times):
                self.execute()
        return self.output[0]

    def close(self):
        self.workload.close()
        if self.manager is not None:
            self.manager.close()
