"""Operators that compute shapes, indices and other constants (folded at import time, since every
shape is static), and those that only change a tensor's shape (Reshape, Flatten, Squeeze,
Unsqueeze, Expand)."""
import numpy as np

from loader.onnx.builder import ints_of, require_const
from loader.onnx.errors import ModelError
from loader.onnx.model import tensor_to_array
from loader.onnx.ops import converts
from loader.onnx.values import Unsupported, Value

MAX_FOLDED_ELEMENTS = 1 << 28       # a folded constant larger than this is refused


def _check_size(shape, where):
    count = 1
    for v in shape:
        if v < 0:
            raise ModelError(f"{where}: negative dimension in {list(shape)}")
        count *= int(v)
    if count > MAX_FOLDED_ELEMENTS:
        raise Unsupported(f"a constant of shape {list(shape)} ({count} elements) is too large to "
                          f"compute at import time")
    return count


def _axes(values, rank, where):
    result = []
    for axis in values:
        if not -rank <= axis < rank:
            raise ModelError(f"{where}: axis {axis} is out of range for rank {rank}")
        result.append(axis % rank)
    if len(set(result)) != len(result):
        raise ModelError(f"{where}: an axis is given twice in {values}")
    return result


@converts("Constant")
def constant(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Constant)"
    given = [name for name in ("value", "value_float", "value_floats", "value_int",
                               "value_ints", "sparse_value", "value_string", "value_strings")
             if name in attrs.names()]
    if len(given) != 1:
        raise ModelError(f"{where}: exactly one value attribute is needed, got {given}")
    kind = given[0]
    if kind == "value":
        return [Value.constant(tensor_to_array(attrs.tensor("value"), where))]
    if kind == "value_float":
        return [Value.constant(np.float32(attrs.float(kind)))]
    if kind == "value_floats":
        return [Value.constant(np.asarray(attrs.floats(kind), np.float32))]
    if kind == "value_int":
        return [Value.constant(np.int64(attrs.int(kind)))]
    if kind == "value_ints":
        return [Value.constant(np.asarray(attrs.ints(kind), np.int64))]
    raise Unsupported(f"a Constant given as {kind}")


@converts("Shape")
def shape(builder, node, inputs, attrs, opset):
    dims = list(inputs[0].shape)
    start, end = attrs.int("start", 0), attrs.int("end", None)
    return [Value.constant(np.asarray(dims[slice(start, end)], np.int64))]


@converts("Size")
def size(builder, node, inputs, attrs, opset):
    return [Value.constant(np.int64(int(np.prod(inputs[0].shape, dtype=object))))]


@converts("ConstantOfShape")
def constant_of_shape(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (ConstantOfShape)"
    dims = ints_of(inputs[0], where, "the shape")
    _check_size(dims, where)
    tensor = attrs.tensor("value")
    fill = tensor_to_array(tensor, where).reshape(-1) if tensor is not None else \
        np.zeros(1, np.float32)
    if fill.size != 1:
        raise ModelError(f"{where}: the value must hold one element")
    return [Value.constant(np.full(dims, fill[0], dtype=fill.dtype))]


@converts("Range")
def range_(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Range)"
    start, limit, delta = (require_const(v, where, name).reshape(-1)[0]
                           for v, name in zip(inputs, ("start", "limit", "delta")))
    if delta == 0:
        raise ModelError(f"{where}: delta is 0")
    count = max(int(np.ceil((limit - start) / delta)), 0)
    _check_size([count], where)
    return [Value.constant(np.arange(count, dtype=np.result_type(start, limit, delta)) * delta
                           + start)]


_FOLD_ONLY = {
    "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
    "Xor": np.logical_xor, "Not": np.logical_not,
}


@converts(*_FOLD_ONLY)
def fold_only(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} ({node.op_type})"
    arrays = [require_const(v, where, "every input") for v in inputs]
    result = np.asarray(_FOLD_ONLY[node.op_type](*arrays))
    _check_size(result.shape, where)
    return [Value.constant(result)]


@converts("Where")
def where_(builder, node, inputs, attrs, opset):
    """Folded when every input is a constant; with run-time operands, a constant condition
    that is the same everywhere picks one of them (broadcast to the result's shape)."""
    where = f"node {node.name!r} (Where)"
    condition, a, b = inputs
    if condition.is_const and a.is_const and b.is_const:
        result = np.where(condition.const, a.const, b.const)
        _check_size(result.shape, where)
        return [Value.constant(result)]
    if not condition.is_const:
        raise Unsupported("a condition known only at run time")
    shape = tuple(int(v) for v in np.broadcast_shapes(condition.shape, a.shape, b.shape))
    if condition.const.all():
        chosen = a
    elif not condition.const.any():
        chosen = b
    else:
        raise Unsupported("a condition that differs between elements, with run-time operands")
    if chosen.is_const:
        _check_size(shape, where)
        return [Value.constant(np.broadcast_to(chosen.const, shape).copy())]
    return [broadcast_to(builder, chosen, shape)]


@converts("Mod")
def mod(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Mod)"
    a, b = (require_const(v, where, "every input") for v in inputs)
    with np.errstate(all="ignore"):
        result = np.fmod(a, b) if attrs.int("fmod", 0) else np.mod(a, b)
    return [Value.constant(result)]


@converts("Tile")
def tile(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Tile)"
    x = require_const(inputs[0], where, "the input")
    repeats = ints_of(inputs[1], where, "the repeats")
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        raise ModelError(f"{where}: repeats {repeats} for rank {x.ndim}")
    _check_size([a * r for a, r in zip(x.shape, repeats)], where)
    return [Value.constant(np.tile(x, repeats))]


def _reshaped(builder, x: Value, shape) -> Value:
    shape = tuple(int(v) for v in shape)
    if x.is_const:
        return Value.constant(x.const.reshape(shape))
    if tuple(shape) == x.shape:
        return x
    tensor = builder.in_logical_order(x)
    return Value.runtime(builder.layer("Reshape", [tensor], {"shape": list(shape) or [1]}),
                         shape or (1,))


@converts("Reshape")
def reshape(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Reshape)"
    x = inputs[0]
    target = ints_of(inputs[1], where, "the shape")
    allow_zero = attrs.int("allowzero", 0)
    resolved = []
    for axis, value in enumerate(target):
        if value == 0 and not allow_zero:
            if axis >= x.rank:
                raise ModelError(f"{where}: shape {target} copies dimension {axis} of a rank "
                                 f"{x.rank} input")
            value = x.shape[axis]
        resolved.append(value)
    count = int(np.prod(x.shape, dtype=object))
    if resolved.count(-1) > 1 or any(v < -1 for v in resolved):
        raise ModelError(f"{where}: shape {target} is not a valid target")
    if -1 in resolved:
        known = int(np.prod([v for v in resolved if v != -1], dtype=object))
        if known == 0 or count % known:
            raise ModelError(f"{where}: cannot reshape {list(x.shape)} into {target}")
        resolved[resolved.index(-1)] = count // known
    if int(np.prod(resolved, dtype=object)) != count:
        raise ModelError(f"{where}: cannot reshape {list(x.shape)} ({count} elements) into "
                         f"{resolved}")
    return [_reshaped(builder, x, resolved)]


@converts("Flatten")
def flatten(builder, node, inputs, attrs, opset):
    x = inputs[0]
    axis = attrs.int("axis", 1)
    if not -x.rank <= axis <= x.rank:
        raise ModelError(f"node {node.name!r} (Flatten): axis {axis} for rank {x.rank}")
    axis = axis + x.rank if axis < 0 else axis
    outer = int(np.prod(x.shape[:axis], dtype=object))
    return [_reshaped(builder, x, (outer, int(np.prod(x.shape[axis:], dtype=object))))]


@converts("Squeeze")
def squeeze(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Squeeze)"
    x = inputs[0]
    if opset >= 13:
        given = ints_of(inputs[1], where, "the axes") if len(inputs) > 1 and inputs[1] else None
    else:
        given = attrs.ints("axes")
    axes = _axes(given, x.rank, where) if given else [a for a, v in enumerate(x.shape) if v == 1]
    for axis in axes:
        if x.shape[axis] != 1:
            raise ModelError(f"{where}: axis {axis} of {list(x.shape)} is not 1")
    return [_reshaped(builder, x, [v for a, v in enumerate(x.shape) if a not in axes])]


@converts("Unsqueeze")
def unsqueeze(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Unsqueeze)"
    x = inputs[0]
    given = ints_of(inputs[1], where, "the axes") if opset >= 13 else attrs.ints("axes", [])
    rank = x.rank + len(given)
    axes = _axes(given, rank, where)
    shape, source = [], iter(x.shape)
    for axis in range(rank):
        shape.append(1 if axis in axes else next(source))
    return [_reshaped(builder, x, shape)]


@converts("Expand")
def expand(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Expand)"
    x = inputs[0]
    target = ints_of(inputs[1], where, "the shape")
    try:
        shape = tuple(int(v) for v in np.broadcast_shapes(x.shape, tuple(target)))
    except ValueError:
        raise ModelError(f"{where}: {list(x.shape)} does not broadcast to {target}") from None
    if x.is_const:
        _check_size(shape, where)
        return [Value.constant(np.broadcast_to(x.const, shape).copy())]
    return [broadcast_to(builder, x, shape)]


def broadcast_to(builder, x: Value, shape) -> Value:
    """A run-time value broadcast to ``shape``: multiplied by ones along the axes it repeats
    (exact for every value, -0, infinities and NaN included)."""
    if tuple(shape) == x.shape:
        return x
    from loader.onnx.ops.elementwise import broadcast_layer
    padded = (1,) * (len(shape) - x.rank) + tuple(x.shape)
    ones = np.ones([n if p == 1 else 1 for n, p in zip(shape, padded)], np.float32)
    return broadcast_layer(builder, "Multiplication", x, Value.constant(ones))

