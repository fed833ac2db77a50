"""Element-wise operators: binary arithmetic with broadcasting (folded on constants), unary
functions, activations, PRelu, and the identities (Identity, Dropout, Cast to float32)."""
import math

import numpy as np

from loader.onnx.builder import require_const
from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.values import Unsupported, Value

_BINARY = {"Add": ("Addition", np.add), "Sub": ("Subtraction", np.subtract),
           "Mul": ("Multiplication", np.multiply), "Div": ("Division", None),
           "Pow": ("Power", np.power), "Max": ("Maximum", np.maximum),
           "Min": ("Minimum", np.minimum)}


def _divide(a, b):
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        with np.errstate(divide="raise"):
            try:
                return np.trunc(a / b).astype(np.result_type(a, b))     # ONNX: C's truncation
            except FloatingPointError:
                raise Unsupported("an integer division by zero in a constant") from None
    return np.divide(a, b)


def broadcast_layer(builder, layer, a: Value, b: Value) -> Value:
    """A binary layer over two values with NumPy broadcasting, in the layout of the run-time
    operand that has the result's rank (a constant operand is laid out to match at import time;
    a run-time operand of lower rank broadcasts in the logical layout only)."""
    shape = tuple(int(v) for v in np.broadcast_shapes(a.shape, b.shape))
    rank = len(shape)
    full = [v for v in (a, b) if not v.is_const and v.rank == rank]
    layout = full[0].layout if full else tuple(range(rank))
    if any(not v.is_const and v.rank < rank for v in (a, b)):
        layout = tuple(range(rank))

    def operand(value):
        if value.is_const:
            padded = value.const.reshape((1,) * (rank - value.rank) + value.shape)
            return builder.float_tensor(Value.constant(padded), layout)
        if value.rank == rank:
            return builder.float_tensor(value, layout)
        if value.rank == 0:             # layers take rank 1 and up: a scalar as [1]
            from loader.onnx.ops.shape import _reshaped
            return builder.float_tensor(_reshaped(builder, value, (1,)))
        return builder.float_tensor(value)
    return Value.runtime(builder.layer(layer, [operand(a), operand(b)]), shape, layout)


@converts(*_BINARY)
def binary(builder, node, inputs, attrs, opset):
    layer, function = _BINARY[node.op_type]
    operands = [v for v in inputs if v is not None]
    if node.op_type in ("Max", "Min"):
        if not operands:
            raise ModelError(f"node {node.name!r}: {node.op_type} needs an input")
    elif len(operands) != 2:
        raise ModelError(f"node {node.name!r}: {node.op_type} takes 2 inputs, got {len(inputs)}")
    if all(v.is_const for v in operands):
        fold = function or _divide
        result = operands[0].const
        for other in operands[1:]:
            with np.errstate(all="ignore"):
                result = fold(result, other.const)
        return [Value.constant(np.asarray(result))]
    result = operands[0]
    for other in operands[1:]:
        result = broadcast_layer(builder, layer, result, other)
    return [result]


@converts("Sum", "Mean")
def sum_mean(builder, node, inputs, attrs, opset):
    operands = [v for v in inputs if v is not None]
    if not operands:
        raise ModelError(f"node {node.name!r}: {node.op_type} needs an input")
    if all(v.is_const for v in operands):
        total = sum(v.const for v in operands)
        return [Value.constant(total / len(operands) if node.op_type == "Mean" else total)]
    result = operands[0]
    for other in operands[1:]:
        result = broadcast_layer(builder, "Addition", result, other)
    if node.op_type == "Mean" and len(operands) > 1:
        result = broadcast_layer(builder, "Multiplication", result,
                                 Value.constant(np.float32(1 / len(operands))))
    return [result]


_UNARY = {"Abs": "abs", "Neg": "neg", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
          "Reciprocal": "reciprocal", "Floor": "floor", "Ceil": "ceil", "Round": "round",
          "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos",
          "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh",
          "Atanh": "atanh", "Erf": "erf", "Sign": "sign"}
_NUMPY_UNARY = {"abs": np.abs, "neg": np.negative, "exp": np.exp, "log": np.log,
                "sqrt": np.sqrt, "reciprocal": np.reciprocal, "floor": np.floor,
                "ceil": np.ceil, "round": np.round, "sin": np.sin, "cos": np.cos,
                "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
                "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh,
                "atanh": np.arctanh, "sign": np.sign,
                "erf": np.vectorize(math.erf, otypes=[np.float64])}


def unary_layer(builder, value: Value, layer: str, descriptor: dict) -> Value:
    """A shape-preserving element-wise layer, in the value's own layout."""
    tensor = builder.float_tensor(value, value.layout)
    return Value.runtime(builder.layer(layer, [tensor], descriptor), value.shape, value.layout)


@converts(*_UNARY)
def unary(builder, node, inputs, attrs, opset):
    function = _UNARY[node.op_type]
    x = inputs[0]
    if x.is_const:
        with np.errstate(all="ignore"):
            result = _NUMPY_UNARY[function](x.const)
        return [Value.constant(np.asarray(result).astype(x.const.dtype, copy=False))]
    return [unary_layer(builder, x, "ElementwiseUnary", {"function": function})]


def _activation(function, a=None, b=None, **extra):
    descriptor = {"function": function}
    if a is not None:
        descriptor["a"] = a
    if b is not None:
        descriptor["b"] = b
    descriptor.update(extra)
    return descriptor


@converts("Relu", "Sigmoid", "Tanh", "Softplus", "Softsign", "HardSwish", "Mish")
def plain_activation(builder, node, inputs, attrs, opset):
    function = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus",
                "Softsign": "softsign", "HardSwish": "hard_swish", "Mish": "mish"}[node.op_type]
    return [_activate(builder, inputs[0], _activation(function))]


def _activate(builder, x: Value, descriptor) -> Value:
    if x.is_const:
        from conformance.reference.elementwise import activation
        result = activation(x.const.astype(np.float64), descriptor["function"],
                            descriptor.get("a"), descriptor.get("b"),
                            descriptor.get("approximate", "none"))
        return Value.constant(result.astype(np.float32))
    return unary_layer(builder, x, "Activation", descriptor)


@converts("LeakyRelu")
def leaky_relu(builder, node, inputs, attrs, opset):
    return [_activate(builder, inputs[0], _activation("leaky_relu", attrs.float("alpha", 0.01)))]


@converts("Elu", "Celu", "ThresholdedRelu")
def alpha_activation(builder, node, inputs, attrs, opset):
    function = {"Elu": "elu", "Celu": "celu", "ThresholdedRelu": "thresholded_relu"}[node.op_type]
    return [_activate(builder, inputs[0], _activation(function, attrs.float("alpha", 1.0)))]


@converts("Selu")
def selu(builder, node, inputs, attrs, opset):
    return [_activate(builder, inputs[0], _activation(
        "selu", attrs.float("alpha", 1.6732632423543772), attrs.float("gamma", 1.0507009873554805)))]


@converts("HardSigmoid")
def hard_sigmoid(builder, node, inputs, attrs, opset):
    return [_activate(builder, inputs[0], _activation(
        "hard_sigmoid", attrs.float("alpha", 0.2), attrs.float("beta", 0.5)))]


@converts("Swish")
def swish(builder, node, inputs, attrs, opset):
    return [_activate(builder, inputs[0], _activation("swish", attrs.float("alpha", 1.0)))]


@converts("Gelu")
def gelu(builder, node, inputs, attrs, opset):
    approximate = attrs.string("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ModelError(f"node {node.name!r}: Gelu approximate {approximate!r}")
    return [_activate(builder, inputs[0], _activation("gelu", approximate=approximate))]


@converts("Clip", since=11)
def clip(builder, node, inputs, attrs, opset):
    x = inputs[0]
    low = require_const(inputs[1], node.name, "Clip's min") if len(inputs) > 1 and inputs[1] \
        else None
    high = require_const(inputs[2], node.name, "Clip's max") if len(inputs) > 2 and inputs[2] \
        else None
    if x.is_const:
        result = x.const
        if low is not None:
            result = np.maximum(result, low)
        if high is not None:
            result = np.minimum(result, high)
        return [Value.constant(result.astype(x.const.dtype))]
    low = float(low) if low is not None else None
    high = float(high) if high is not None else None
    if low == 0.0 and high is None:
        return [_activate(builder, x, _activation("relu"))]
    return [_activate(builder, x, _activation("clip", low if low is not None else -3.4e38,
                                              high if high is not None else 3.4e38))]


@converts("PRelu")
def prelu(builder, node, inputs, attrs, opset):
    x, slope = inputs[0], inputs[1]
    if x.is_const and slope.is_const:
        return [Value.constant(np.where(x.const < 0, x.const * slope.const, x.const))]
    if slope.rank > x.rank or tuple(np.broadcast_shapes(x.shape, slope.shape)) != x.shape:
        raise Unsupported(f"a slope of shape {list(slope.shape)} that does not broadcast to the "
                          f"input {list(x.shape)}")
    layout = x.layout
    if slope.is_const:
        padded = Value.constant(slope.const.reshape((1,) * (x.rank - slope.rank) + slope.shape))
        operand = builder.float_tensor(padded, layout)
    else:
        layout = tuple(range(x.rank))
        operand = builder.float_tensor(slope)
    return [Value.runtime(builder.layer("Prelu", [builder.float_tensor(x, layout), operand]),
                          x.shape, layout)]


@converts("Identity")
def identity(builder, node, inputs, attrs, opset):
    return [inputs[0]]


@converts("Dropout")
def dropout(builder, node, inputs, attrs, opset):
    """Inference: the identity. The ratio and seed change nothing then; training mode (a
    training_mode input that is true or known only at run time) is refused."""
    if len(node.output) > 1 and node.output[1]:
        raise Unsupported("Dropout's mask output is not supported (inference only)")
    training = inputs[2] if len(inputs) > 2 else None
    if training is not None and (not training.is_const or bool(np.any(training.const))):
        raise Unsupported("training mode")
    attrs.ignore("seed", "ratio")
    return [inputs[0]]


_CAST = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
         7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


@converts("Cast")
def cast(builder, node, inputs, attrs, opset):
    target = attrs.int("to")
    if target not in _CAST:
        raise Unsupported(f"a cast to data type {target}")
    return [_cast(inputs[0], np.dtype(_CAST[target]))]


@converts("CastLike")
def cast_like(builder, node, inputs, attrs, opset):
    return [_cast(inputs[0], inputs[1].dtype)]


def _cast(x: Value, dtype) -> Value:
    if x.is_const:
        return Value.constant(x.const.astype(dtype))
    if dtype == np.float32:
        return x
    raise Unsupported(f"a run-time tensor cast to {dtype} (tensors are float32)")
