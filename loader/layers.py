"""The layers a backend can run (contract section 9): names, inputs, descriptors with their
defaults, and output shapes.

This module checks what is wrong whatever the backend: an unknown layer, a descriptor key that
does not exist, a value of the wrong type, inputs that are not float32 or whose shapes do not
fit together. What a particular backend cannot do is its own answer, through
``Backend.is_layer_supported``.
"""
import functools
import numbers
import os
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from loader.errors import BackendOutOfMemoryError, InvalidLayerError, UnknownLayerError

Shape = Tuple[int, ...]
UINT32_MAX = 2**32 - 1
MAX_DIMENSIONS = 8                 # BACKEND_MAX_DIMENSIONS
#: Most elements one tensor (an input or the output) may hold: 2^40, 4 TiB of float32. Larger
#: shapes are refused before a backend sees them, so that no byte size or index computation on
#: them overflows, in the runtime or in a backend.
MAX_ELEMENTS = 2**40
FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32 = np.dtype(np.float32)


@dataclass(frozen=True)
class PreparedLayer:
    """A layer call made concrete: what the ABI's BackendLayerDescription carries."""

    name: str
    code: int                   # BACKEND_LAYER_*
    input_shapes: Tuple[Shape, ...]
    output_shape: Shape
    fields: Dict[str, float]    # the C descriptor's members, or empty


# -- descriptor values -------------------------------------------------------------------------

def _integer(layer, key, value, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{layer}: {key!r} must be an integer, not {type(value).__name__}")
    value = int(value)
    if not minimum <= value <= UINT32_MAX:
        raise InvalidLayerError(f"{layer}: {key!r} is {value}, must be from {minimum} to "
                                f"{UINT32_MAX}")
    return value


def _pair(layer, key, value, minimum):
    """An int for both axes, or [y, x]."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        value = [value, value]
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != 2:
        raise TypeError(f"{layer}: {key!r} must be an integer or [y, x], not {value!r}")
    return [_integer(layer, key, v, minimum) for v in value]


def _padding(layer, value):
    """An int for every side, [y, x], or [top, bottom, left, right]."""
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        value = [value] * 4
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) == 2:
        value = [value[0], value[0], value[1], value[1]]
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != 4:
        raise TypeError(f"{layer}: 'padding' must be an integer, [y, x] or "
                        f"[top, bottom, left, right], not {value!r}")
    return [_integer(layer, "padding", v, 0) for v in value]


def _boolean(layer, key, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{layer}: {key!r} must be true or false, not {value!r}")
    return bool(value)


def _real(layer, key, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{layer}: {key!r} must be a number, not {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise InvalidLayerError(f"{layer}: {key!r} must be finite, not {value}")
    if abs(value) > FLOAT32_MAX:  # the C descriptor holds a float
        raise InvalidLayerError(f"{layer}: {key!r} is {value}, beyond float32's range "
                                f"(±{FLOAT32_MAX:.6g})")
    return value


def _choice(layer, key, value, choices: Dict[str, int]):
    if value not in choices:
        raise InvalidLayerError(f"{layer}: {key!r} is {value!r}, one of "
                                f"{', '.join(map(repr, choices))} is expected")
    return choices[value]


# -- shapes ------------------------------------------------------------------------------------

def _rank(layer, what, shape, rank):
    if len(shape) != rank:
        raise InvalidLayerError(f"{layer}: {what} must have {rank} dimensions, "
                                f"got shape {list(shape)}")


def _window(layer, axis, size, pad_before, pad_after, extent, stride):
    padded = size + pad_before + pad_after
    if extent > padded:
        raise InvalidLayerError(f"{layer}: the kernel spans {extent} along {axis}, more than the "
                                f"padded input ({padded})")
    return (padded - extent) // stride + 1


# -- the layers --------------------------------------------------------------------------------

ACTIVATION_FUNCTIONS = {"relu": 0, "bounded_relu": 1, "sigmoid": 2, "tanh": 3, "leaky_relu": 4}
#: What each activation function computes and which of the parameters ``a`` and ``b`` (both 0
#: unless given) it reads.
ACTIVATION_PARAMETERS = {
    "relu": "max(0, x) (a and b unused)",
    "bounded_relu": "min(a, max(b, x)), a the upper bound and b the lower, both 0 unless given "
                    "(with the defaults every output is 0)",
    "sigmoid": "1 / (1 + exp(-x)) (a and b unused)",
    "tanh": "tanh(x) (a and b unused)",
    "leaky_relu": "x if x > 0 else a * x, a the slope below 0, 0 unless given (then it is relu; "
                  "b unused)",
}
ACTIVATION_HELP = "functions: " + "; ".join(f"{name} = {text}"
                                            for name, text in ACTIVATION_PARAMETERS.items())
POOLING_TYPES = {"max": 0, "average": 1}


def _activation(d, shapes):
    try:
        function = _choice("Activation", "function", d["function"], ACTIVATION_FUNCTIONS)
    except InvalidLayerError as error:
        raise InvalidLayerError(f"{error}; {ACTIVATION_HELP}") from None
    fields = {"function": function,
              "a": _real("Activation", "a", d["a"]), "b": _real("Activation", "b", d["b"])}
    return shapes[0], fields


def _elementwise(name):
    def infer(d, shapes):
        try:
            return tuple(np.broadcast_shapes(shapes[0], shapes[1])), {}
        except ValueError:
            raise InvalidLayerError(f"{name}: shapes {list(shapes[0])} and {list(shapes[1])} do "
                                    f"not broadcast") from None
    return infer


def _fully_connected(d, shapes):
    layer = "FullyConnected"
    transpose = _boolean(layer, "transpose_weights", d["transpose_weights"])
    x, w = shapes[0], shapes[1]
    _rank(layer, "the input [N, K]", x, 2)
    _rank(layer, "the weights", w, 2)
    k, m = (w[1], w[0]) if transpose else (w[0], w[1])
    if k != x[1]:
        layout = "[M, K]" if transpose else "[K, M]"
        raise InvalidLayerError(f"{layer}: weights {list(w)} read as {layout} have K = {k}, the "
                                f"input {list(x)} has K = {x[1]}")
    if len(shapes) == 3 and tuple(shapes[2]) != (m,):
        raise InvalidLayerError(f"{layer}: bias must have shape [{m}], got {list(shapes[2])}")
    return (x[0], m), {"transpose_weights": int(transpose), "bias_enabled": int(len(shapes) == 3)}


def _convolution(depthwise):
    layer = "DepthwiseConvolution2d" if depthwise else "Convolution2d"

    def infer(d, shapes):
        stride = _pair(layer, "stride", d["stride"], 1)
        dilation = _pair(layer, "dilation", d["dilation"], 1)
        top, bottom, left, right = _padding(layer, d["padding"])
        x, w = shapes[0], shapes[1]
        _rank(layer, "the input [N, H, W, C]", x, 4)
        if depthwise:
            _rank(layer, "the weights [1, kH, kW, C*m]", w, 4)
            if w[0] != 1 or w[3] % x[3] != 0:
                raise InvalidLayerError(f"{layer}: weights {list(w)} must be [1, kH, kW, C*m] "
                                        f"with C = {x[3]}")
            channels = w[3]
        else:
            _rank(layer, "the weights [O, kH, kW, C]", w, 4)
            if w[3] != x[3]:
                raise InvalidLayerError(f"{layer}: weights {list(w)} have C = {w[3]}, the input "
                                        f"{list(x)} has C = {x[3]}")
            channels = w[0]
        if len(shapes) == 3 and tuple(shapes[2]) != (channels,):
            raise InvalidLayerError(f"{layer}: bias must have shape [{channels}], "
                                    f"got {list(shapes[2])}")
        oh = _window(layer, "height", x[1], top, bottom, (w[1] - 1) * dilation[0] + 1, stride[0])
        ow = _window(layer, "width", x[2], left, right, (w[2] - 1) * dilation[1] + 1, stride[1])
        return (x[0], oh, ow, channels), {
            "stride_y": stride[0], "stride_x": stride[1], "pad_top": top, "pad_bottom": bottom,
            "pad_left": left, "pad_right": right, "dilation_y": dilation[0],
            "dilation_x": dilation[1], "bias_enabled": int(len(shapes) == 3)}
    return infer


def _pooling(d, shapes):
    layer = "Pooling2d"
    pool = _choice(layer, "pool", d["pool"], POOLING_TYPES)
    if d["kernel"] is None:
        raise InvalidLayerError(f"{layer}: 'kernel' [kH, kW] is required")
    kernel = _pair(layer, "kernel", d["kernel"], 1)
    stride = _pair(layer, "stride", d["stride"], 1)
    top, bottom, left, right = _padding(layer, d["padding"])
    x = shapes[0]
    _rank(layer, "the input [N, H, W, C]", x, 4)
    if top >= kernel[0] or bottom >= kernel[0] or left >= kernel[1] or right >= kernel[1]:
        raise InvalidLayerError(f"{layer}: padding {[top, bottom, left, right]} must be smaller "
                                f"than the kernel {kernel}")
    oh = _window(layer, "height", x[1], top, bottom, kernel[0], stride[0])
    ow = _window(layer, "width", x[2], left, right, kernel[1], stride[1])
    return (x[0], oh, ow, x[3]), {
        "pool_type": pool, "kernel_y": kernel[0], "kernel_x": kernel[1], "stride_y": stride[0],
        "stride_x": stride[1], "pad_top": top, "pad_bottom": bottom, "pad_left": left,
        "pad_right": right}


def _softmax(d, shapes):
    if len(shapes[0]) < 1:
        raise InvalidLayerError("Softmax: the input needs at least one dimension")
    return shapes[0], {"beta": _real("Softmax", "beta", d["beta"])}


def _reshape(d, shapes):
    layer = "Reshape"
    target = d["shape"]
    if target is None:
        raise InvalidLayerError(f"{layer}: 'shape' is required")
    if not isinstance(target, (list, tuple, np.ndarray)):
        raise TypeError(f"{layer}: 'shape' must be a list of integers, not {target!r}")
    target = [int(v) if isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
              else None for v in target]
    if None in target or any(v < -1 or v == 0 for v in target) or target.count(-1) > 1:
        raise InvalidLayerError(f"{layer}: 'shape' {d['shape']!r} must hold positive integers "
                                f"and at most one -1")
    if len(target) > MAX_DIMENSIONS:
        raise InvalidLayerError(f"{layer}: at most {MAX_DIMENSIONS} dimensions")
    count = _elements(shapes[0])
    known = _elements([v for v in target if v != -1])  # exact: no wrap-around
    if -1 in target:
        if count % known:
            raise InvalidLayerError(f"{layer}: cannot reshape {list(shapes[0])} into {d['shape']}")
        target[target.index(-1)] = count // known
    elif known != count:
        raise InvalidLayerError(f"{layer}: cannot reshape {list(shapes[0])} ({count} elements) "
                                f"into {target} ({known} elements)")
    return tuple(target), {}


@dataclass(frozen=True)
class LayerType:
    name: str
    code: int
    inputs: Tuple[str, ...]     # names of the inputs; a trailing "bias" is optional
    defaults: Dict[str, object]
    infer: Callable
    help: str = ""              # what the descriptor's values mean, for error messages

    @property
    def min_inputs(self) -> int:
        return len(self.inputs) - (self.inputs[-1] == "bias")


_CONVOLUTION_DEFAULTS = {"stride": [1, 1], "padding": 0, "dilation": [1, 1]}

LAYERS: Dict[str, LayerType] = {layer.name: layer for layer in [
    LayerType("Activation", 0, ("x",), {"function": None, "a": 0.0, "b": 0.0}, _activation,
              ACTIVATION_HELP),
    LayerType("Addition", 1, ("a", "b"), {}, _elementwise("Addition")),
    LayerType("Multiplication", 2, ("a", "b"), {}, _elementwise("Multiplication")),
    LayerType("FullyConnected", 3, ("x", "w", "bias"), {"transpose_weights": True},
              _fully_connected),
    LayerType("Convolution2d", 4, ("x", "w", "bias"), _CONVOLUTION_DEFAULTS, _convolution(False)),
    LayerType("DepthwiseConvolution2d", 5, ("x", "w", "bias"), _CONVOLUTION_DEFAULTS,
              _convolution(True)),
    LayerType("Pooling2d", 6, ("x",),
              {"pool": None, "kernel": None, "stride": [1, 1], "padding": 0}, _pooling),
    LayerType("Softmax", 7, ("x",), {"beta": 1.0}, _softmax),
    LayerType("Reshape", 8, ("x",), {"shape": None}, _reshape),
]}


def layer_type(name) -> LayerType:
    try:
        return LAYERS[name]
    except (KeyError, TypeError):
        raise UnknownLayerError(f"unknown layer {name!r}; layers are "
                                f"{', '.join(LAYERS)}") from None


def _descriptor(layer: LayerType, descriptor: Optional[dict]) -> dict:
    if descriptor is None:
        descriptor = {}
    if not isinstance(descriptor, dict):
        raise TypeError(f"{layer.name}: the descriptor must be a dict, "
                        f"not {type(descriptor).__name__}")
    unknown = sorted(set(descriptor) - set(layer.defaults), key=str)
    if unknown:
        allowed = ", ".join(map(repr, layer.defaults)) or "none"
        raise InvalidLayerError(f"{layer.name}: unknown descriptor key "
                                f"{', '.join(map(repr, unknown))} (allowed: {allowed})"
                                + (f"; {layer.help}" if layer.help else ""))
    merged = dict(layer.defaults)
    merged.update(descriptor)
    missing = [k for k, v in merged.items() if v is None]
    if missing:
        raise InvalidLayerError(f"{layer.name}: descriptor needs {', '.join(map(repr, missing))}"
                                + (f"; {layer.help}" if layer.help else ""))
    return merged


def _input_data(layer: str, index: int, value, or_shape: bool = False) -> np.ndarray:
    """The one rule for input data, in ``execute`` and in the support queries alike: NumPy data
    of dtype float32, an array (either byte order, any memory layout) or a scalar (a 0-d array).
    Anything else is refused, however convertible (lists, Python numbers, other dtypes): a
    conversion could lose precision, and its cost would be hidden."""
    if isinstance(value, np.generic) and value.dtype == np.float32:
        return np.asarray(value)
    if not isinstance(value, np.ndarray):
        kind = type(value).__name__
        if isinstance(value, np.generic):
            kind = f"a NumPy scalar ({kind})"
        hint = (" (convert with numpy.asarray(value, dtype=numpy.float32))"
                if isinstance(value, (list, tuple, numbers.Number, np.generic)) else "")
        shape = " or a shape (a tuple of integers)" if or_shape else ""
        raise TypeError(f"{layer}: input {index} must be a numpy.ndarray of float32{shape}, not "
                        f"{kind}{hint}")
    if value.dtype.kind != "f" or value.dtype.itemsize != 4:
        raise TypeError(f"{layer}: input {index} has dtype {value.dtype}, float32 is "
                        f"required (convert with .astype(numpy.float32))")
    return value


def input_array(layer: str, index: int, value) -> np.ndarray:
    """``value`` as a C-contiguous native float32 array: as is when it already is one (no copy),
    a copy when it is float32 in another layout or byte order; anything else is refused."""
    if isinstance(value, np.ndarray) and value.dtype is _FLOAT32 and value.flags.c_contiguous:
        return value  # the common case, decided without the full check
    value = _input_data(layer, index, value)
    if value.dtype != np.float32 or not value.flags.c_contiguous:
        return np.ascontiguousarray(value, dtype=np.float32)
    return value


def _elements(shape: Shape) -> int:
    count = 1
    for v in shape:
        count *= v
    return count


def _shape(layer: str, index: int, value) -> Shape:
    """The shape of an input given as an array (see _input_data) or directly as a shape."""
    if isinstance(value, (tuple, list)) and all(
            isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in value):
        shape = tuple(int(v) for v in value)
    else:
        shape = _input_data(layer, index, value, or_shape=True).shape
    if len(shape) > MAX_DIMENSIONS:
        raise InvalidLayerError(f"{layer}: input {index} has {len(shape)} dimensions, at most "
                                f"{MAX_DIMENSIONS}")
    if any(v < 1 for v in shape):
        raise InvalidLayerError(f"{layer}: input {index} has shape {list(shape)}; every "
                                f"dimension must be at least 1")
    if _elements(shape) > MAX_ELEMENTS:
        raise InvalidLayerError(f"{layer}: input {index} has shape {list(shape)}, "
                                f"{_elements(shape)} elements, more than 2^40")
    return shape


def prepare(name, inputs: Sequence, descriptor: Optional[dict] = None) -> PreparedLayer:
    """Validate a layer call whose inputs are arrays or shapes; compute its output shape."""
    layer = layer_type(name)
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"{layer.name}: inputs must be a list, not {type(inputs).__name__}")
    if not layer.min_inputs <= len(inputs) <= len(layer.inputs):
        expected = ", ".join(layer.inputs).replace(", bias", "[, bias]")
        raise InvalidLayerError(f"{layer.name} takes inputs [{expected}], got {len(inputs)}")
    shapes = tuple(_shape(layer.name, i, v) for i, v in enumerate(inputs))
    merged = _descriptor(layer, descriptor)
    output_shape, fields = layer.infer(merged, shapes)
    output_shape = tuple(int(v) for v in output_shape)
    if _elements(output_shape) > MAX_ELEMENTS:
        given = ", ".join(f"{k!r} {v!r}" for k, v in (descriptor or {}).items())
        raise InvalidLayerError(
            f"{layer.name}: the output would have shape {list(output_shape)}, "
            f"{_elements(output_shape)} elements, more than 2^40 (inputs "
            f"{[list(v) for v in shapes]}" + (f"; descriptor {given}" if given else "") + ")")
    return PreparedLayer(layer.name, layer.code, shapes, output_shape, fields)


def new_output(prepared: PreparedLayer) -> np.ndarray:
    """A new float32 array for ``prepared``'s output, refused (BackendOutOfMemoryError) before
    allocation when it is larger than this machine's memory."""
    size = _elements(prepared.output_shape) * 4
    memory = _physical_memory()
    if memory is not None and size > memory:
        raise BackendOutOfMemoryError(f"{_output_size(prepared, size)}, more than this "
                                      f"machine's memory ({memory / 2**30:.1f} GiB)")
    try:
        return np.empty(prepared.output_shape, dtype=np.float32)
    except MemoryError:
        raise BackendOutOfMemoryError(f"{_output_size(prepared, size)}: cannot allocate "
                                      f"it") from None


def _output_size(prepared: PreparedLayer, size: int) -> str:
    fields = ", ".join(f"{k} {v}" for k, v in prepared.fields.items())
    return (f"{prepared.name}: the output {list(prepared.output_shape)} needs {size} bytes "
            f"({size / 2**30:.1f} GiB; inputs {[list(v) for v in prepared.input_shapes]}"
            + (f", descriptor {fields}" if fields else "") + ")")


@functools.lru_cache(maxsize=None)
def _physical_memory() -> Optional[int]:
    """This machine's memory in bytes (None when unknown), read once."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None
