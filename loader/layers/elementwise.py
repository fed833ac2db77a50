"""Element-wise layers: Activation, the binary layers (NumPy broadcasting), ElementwiseUnary
and Prelu."""

from loader.errors import InvalidLayerError
from loader.layers._table import LayerType
from loader.layers._values import broadcast, choice, ranks_1_to_6, real

#: Activation functions: C code, then the defaults of ``a`` and ``b`` (None: unused).
_ACTIVATIONS = {
    "relu": (0, None, None), "bounded_relu": (1, 0.0, 0.0), "sigmoid": (2, None, None),
    "tanh": (3, None, None), "leaky_relu": (4, 0.0, None),
    # Backend API 1.3
    "elu": (5, 1.0, None), "selu": (6, 1.6732632423543772, 1.0507009873554805),
    "hard_sigmoid": (7, 0.2, 0.5), "hard_swish": (8, None, None), "swish": (9, 1.0, None),
    "gelu": (10, None, None), "softplus": (12, None, None), "softsign": (13, None, None),
    "clip": (14, -3.4028234663852886e38, 3.4028234663852886e38), "celu": (15, 1.0, None),
    "thresholded_relu": (16, 1.0, None), "mish": (17, None, None),
}
GELU_TANH = 11
ACTIVATION_FUNCTIONS = {name: code for name, (code, _, _) in _ACTIVATIONS.items()}
#: What each activation function computes and which of the parameters ``a`` and ``b`` it reads.
ACTIVATION_PARAMETERS = {
    "relu": "max(0, x) (a and b unused)",
    "bounded_relu": "min(a, max(b, x)), a the upper bound and b the lower, both 0 unless given "
                    "(with the defaults every output is 0)",
    "sigmoid": "1 / (1 + exp(-x)) (a and b unused)",
    "tanh": "tanh(x) (a and b unused)",
    "leaky_relu": "x if x > 0 else a * x, a the slope below 0, 0 unless given (then it is relu; "
                  "b unused)",
    "elu": "x if x > 0 else a * (exp(x) - 1), a 1 unless given",
    "selu": "b * (x if x > 0 else a * (exp(x) - 1)), a 1.6733 and b 1.0507 unless given",
    "hard_sigmoid": "max(0, min(1, a * x + b)), a 0.2 and b 0.5 unless given",
    "hard_swish": "x * max(0, min(1, x / 6 + 0.5)) (a and b unused)",
    "swish": "x * sigmoid(a * x), a 1 unless given",
    "gelu": "x / 2 * (1 + erf(x / sqrt(2))); with 'approximate': 'tanh', the tanh form",
    "softplus": "log(1 + exp(x)) (a and b unused)",
    "softsign": "x / (1 + |x|) (a and b unused)",
    "clip": "min(b, max(a, x)), a the lower and b the upper bound (unbounded unless given)",
    "celu": "max(0, x) + min(0, a * (exp(x / a) - 1)), a 1 unless given",
    "thresholded_relu": "x if x > a else 0, a 1 unless given",
    "mish": "x * tanh(softplus(x)) (a and b unused)",
}
ACTIVATION_HELP = "functions: " + "; ".join(f"{name} = {text}"
                                            for name, text in ACTIVATION_PARAMETERS.items())
APPROXIMATIONS = {"none": 0, "tanh": 1}

UNARY_FUNCTIONS = {name: code for code, name in enumerate(
    ["abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "floor", "ceil", "round", "sin",
     "cos", "erf", "sign", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
     "atanh"])}


def _activation(d, shapes):
    layer = "Activation"
    try:
        code = choice(layer, "function", d["function"], ACTIVATION_FUNCTIONS)
    except InvalidLayerError as error:
        raise InvalidLayerError(f"{error}; {ACTIVATION_HELP}") from None
    function = d["function"]
    _, a_default, b_default = _ACTIVATIONS[function]
    a = real(layer, "a", d["a"]) if d["a"] is not None else (a_default or 0.0)
    b = real(layer, "b", d["b"]) if d["b"] is not None else (b_default or 0.0)
    approximate = choice(layer, "approximate", d["approximate"], APPROXIMATIONS)
    if approximate and function != "gelu":
        raise InvalidLayerError(f"{layer}: 'approximate' applies to gelu only, not {function!r}")
    if approximate:
        code = GELU_TANH
    if function == "celu" and a == 0:
        raise InvalidLayerError(f"{layer}: celu divides by 'a'; it must not be 0")
    return shapes[0], {"function": code, "a": a, "b": b}, 3 if code >= 5 else 1


def _binary(name, minor):
    def rule(d, shapes):
        if minor == 3:
            ranks_1_to_6(name, shapes)
        return broadcast(name, shapes[0], shapes[1]), {}, minor
    return rule


def _unary(d, shapes):
    ranks_1_to_6("ElementwiseUnary", shapes)
    return shapes[0], {"function": choice("ElementwiseUnary", "function", d["function"],
                                          UNARY_FUNCTIONS)}


def _prelu(d, shapes):
    ranks_1_to_6("Prelu", shapes)
    x, slope = shapes
    if broadcast("Prelu", x, slope) != tuple(x):
        raise InvalidLayerError(f"Prelu: the slope {list(slope)} must broadcast to the input "
                                f"{list(x)} without changing its shape")
    return x, {}


LAYERS = [
    LayerType("Activation", 0, ("x",), {"function": None, "a": None, "b": None,
                                        "approximate": "none"},
              _activation, ACTIVATION_HELP, required=("function",)),
    LayerType("Addition", 1, ("a", "b"), {}, _binary("Addition", 1)),
    LayerType("Multiplication", 2, ("a", "b"), {}, _binary("Multiplication", 1)),
    LayerType("Subtraction", 9, ("a", "b"), {}, _binary("Subtraction", 3), since_minor=3),
    LayerType("Division", 10, ("a", "b"), {}, _binary("Division", 3), since_minor=3),
    LayerType("Maximum", 11, ("a", "b"), {}, _binary("Maximum", 3), since_minor=3),
    LayerType("Minimum", 12, ("a", "b"), {}, _binary("Minimum", 3), since_minor=3),
    LayerType("Power", 13, ("a", "b"), {}, _binary("Power", 3), since_minor=3),
    LayerType("ElementwiseUnary", 14, ("x",), {"function": None}, _unary,
              "functions: " + ", ".join(UNARY_FUNCTIONS), since_minor=3, required=("function",)),
    LayerType("Prelu", 15, ("x", "slope"), {}, _prelu, since_minor=3),
]

