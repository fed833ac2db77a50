"""Element-wise layers in float64, from their definitions (ONNX's where ONNX has the operator)."""
import math

import numpy as np

from loader.layers.elementwise import _ACTIVATIONS


def _erf(x):
    """erf in float64 to ~1e-16 (math.erf per element: NumPy has none)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def activation(x, function, a=None, b=None, approximate="none"):
    """ONNX's activations; ``a`` and ``b`` default as the layer table says."""
    _, a_default, b_default = _ACTIVATIONS[function]
    a = (a_default or 0.0) if a is None else a
    b = (b_default or 0.0) if b is None else b
    x = x.astype(np.float64)
    softplus = np.logaddexp(0, x)
    with np.errstate(over="ignore", invalid="ignore"):
        if function == "relu":
            return np.maximum(x, 0)
        if function == "bounded_relu":
            return np.minimum(a, np.maximum(b, x))
        if function == "sigmoid":
            return np.exp(-np.logaddexp(0, -x))  # 1 / (1 + e^-x) without overflow
        if function == "tanh":
            return np.tanh(x)
        if function == "leaky_relu":
            return np.where(x > 0, x, a * x)
        if function == "elu":
            return np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))
        if function == "selu":
            return b * np.where(x > 0, x, a * np.expm1(np.minimum(x, 0)))
        if function == "hard_sigmoid":
            return np.clip(a * x + b, 0, 1)
        if function == "hard_swish":
            return x * np.clip(x / 6 + 0.5, 0, 1)
        if function == "swish":
            return x * np.exp(-np.logaddexp(0, -a * x))
        if function == "gelu":
            if approximate == "tanh":
                return x / 2 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
            return x / 2 * (1 + _erf(x / np.sqrt(2)))
        if function == "softplus":
            return softplus
        if function == "softsign":
            return x / (1 + np.abs(x))
        if function == "clip":
            return np.minimum(b, np.maximum(a, x))
        if function == "celu":
            return np.maximum(0, x) + np.minimum(0, a * np.expm1(np.minimum(x, 0) / a))
        if function == "thresholded_relu":
            return np.where(x > a, x, 0.0)
        if function == "mish":
            return x * np.tanh(softplus)
    raise ValueError(function)


def unary(x, function):
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return {
            "abs": np.abs, "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
            "rsqrt": lambda v: 1 / np.sqrt(v), "reciprocal": lambda v: 1 / v,
            "floor": np.floor, "ceil": np.ceil, "round": np.round, "sin": np.sin, "cos": np.cos,
            "erf": _erf, "sign": np.sign, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
            "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
            "acosh": np.arccosh, "atanh": np.arctanh,
        }[function](x)


def binary(layer, a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        return {"Addition": np.add, "Multiplication": np.multiply, "Subtraction": np.subtract,
                "Division": np.divide, "Maximum": np.maximum, "Minimum": np.minimum,
                "Power": np.power}[layer](a, b)


def prelu(x, slope):
    x = x.astype(np.float64)
    return np.where(x < 0, x * slope, x)
