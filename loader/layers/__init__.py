"""The layers a backend can run: names, inputs, descriptors with their defaults, output shapes
and the C descriptor fields (docs/layers.md lists them).

This package checks what is wrong whatever the backend: an unknown layer, a descriptor key that
does not exist, a value of the wrong type, inputs that are not float32 or whose shapes do not
fit together. What a particular backend cannot do is its own answer, through
``Backend.is_layer_supported``. One module per family of layers holds each layer's rules:
``elementwise`` (activations, unary and binary element-wise layers), ``linear``
(FullyConnected, MatMul), ``spatial`` (convolutions, pooling, resize), ``tensor`` (reshape,
concatenation, slice, transpose, pad) and ``normalization`` (softmax, reductions,
normalizations).
"""
import functools
import numbers
import os
from typing import Dict, Optional, Sequence

import numpy as np

from loader.errors import BackendOutOfMemoryError, InvalidLayerError, UnknownLayerError
from loader.layers._table import LayerType, PreparedLayer, Shape
from loader.layers._values import elements as _elements
from loader.layers import elementwise, linear, normalization, spatial, tensor

MAX_DIMENSIONS = 8                 # BACKEND_MAX_DIMENSIONS
MAX_RANK = 6                       # BACKEND_MAX_LAYER_RANK: layer types of Backend API 1.3
#: Most elements one tensor (an input or the output) may hold: 2^40, 4 TiB of float32. Larger
#: shapes are refused before a backend sees them, so that no byte size or index computation on
#: them overflows, in the runtime or in a backend.
MAX_ELEMENTS = 2**40
#: Most inputs a layer may have (Concatenation's are unbounded otherwise).
MAX_INPUTS = 1024
_FLOAT32 = np.dtype(np.float32)

# What the error messages and docs of the activation layer say (kept importable from here).
ACTIVATION_FUNCTIONS = elementwise.ACTIVATION_FUNCTIONS
ACTIVATION_PARAMETERS = elementwise.ACTIVATION_PARAMETERS
POOLING_TYPES = spatial.POOLING_TYPES

#: Every layer type by name, in the order of their codes.
LAYERS: Dict[str, LayerType] = {layer.name: layer for layer in sorted(
    elementwise.LAYERS + linear.LAYERS + spatial.LAYERS + tensor.LAYERS + normalization.LAYERS,
    key=lambda layer: layer.code)}
BY_CODE: Dict[int, LayerType] = {layer.code: layer for layer in LAYERS.values()}

__all__ = ["LAYERS", "LayerType", "MAX_DIMENSIONS", "MAX_ELEMENTS", "MAX_INPUTS", "MAX_RANK",
           "PreparedLayer", "input_array", "layer_type", "new_output", "prepare"]


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
    missing = [k for k in layer.required if merged.get(k) is None]
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
    most = MAX_INPUTS if layer.variadic else len(layer.inputs)
    if not layer.min_inputs <= len(inputs) <= most:
        raise InvalidLayerError(f"{layer.name} takes inputs [{layer.signature()}], got "
                                f"{len(inputs)}")
    shapes = tuple(_shape(layer.name, i, v) for i, v in enumerate(inputs))
    merged = _descriptor(layer, descriptor)
    output_shape, fields, minor = layer.infer(merged, shapes)
    output_shape = tuple(int(v) for v in output_shape)
    if any(v < 1 for v in output_shape):
        raise InvalidLayerError(f"{layer.name}: the output would have shape "
                                f"{list(output_shape)}; every dimension must be at least 1")
    if _elements(output_shape) > MAX_ELEMENTS:
        given = ", ".join(f"{k!r} {v!r}" for k, v in (descriptor or {}).items())
        raise InvalidLayerError(
            f"{layer.name}: the output would have shape {list(output_shape)}, "
            f"{_elements(output_shape)} elements, more than 2^40 (inputs "
            f"{[list(v) for v in shapes]}" + (f"; descriptor {given}" if given else "") + ")")
    return PreparedLayer(layer.name, layer.code, shapes, output_shape, fields,
                         max(minor, layer.since_minor))


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
