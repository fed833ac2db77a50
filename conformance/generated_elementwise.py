"""Generated cases (LAYER-3) of the element-wise layers of Backend API 1.3: the binary layers
over every pair of ranks 1 to 6 (broadcasting both ways; Addition and Multiplication too), each
ElementwiseUnary function on values from its domain and at its edges (ties for round half to
even, signed zeros for reciprocal and log), the activation functions 1.3 added (large values
where a naive form overflows), and Prelu with its slope broadcast. See conformance/families.py
for how a family runs and reports.
"""
from conformance.families import register_families
from conformance.layer_runs import spec
from conformance.sweeps import RANKS, broadcast_pair, fixed_rng, shape

BINARY_13 = ("Subtraction", "Division", "Maximum", "Minimum", "Power")


def _binary_values(layer):
    """Values each binary layer is defined on: a divisor away from 0, a positive base."""
    return {"Division": ["uniform", "nonzero"], "Power": ["positive", "uniform"]}.get(layer, "zeros")


def _binary_layers():
    rng = fixed_rng("binary-layers")
    specs = []
    for layer in ("Addition", "Multiplication") + BINARY_13:
        for ra in RANKS:
            for rb in RANKS:
                a, b = broadcast_pair(rng, ra, rb)
                scale = [2.0, 3.0] if layer == "Power" else 1.0
                specs.append(spec("binary", len(specs), layer, [a, b], None,
                                  _binary_values(layer), scale))
    # Edges: a negative base with integer exponents; 0 to positive, zero and negative powers;
    # division by signed zeros; the extremes of +0 and -0.
    specs.append(spec("binary", len(specs), "Power", [[4, 5], [5]], None, ["uniform", "integers"],
                      [3.0, 1.0]))
    specs.append(spec("binary", len(specs), "Power", [[2, 3], [3]], None,
                      ["signed-zeros", "integers"]))
    specs.append(spec("binary", len(specs), "Division", [[3, 4], [1]], None,
                      ["nonzero", "signed-zeros"]))
    for layer in ("Maximum", "Minimum"):
        specs.append(spec("binary", len(specs), layer, [[9], [9]], None, "signed-zeros"))
    return specs


#: ElementwiseUnary functions, with the values they are defined on.
UNARY_DOMAINS = {
    "abs": ("zeros", 3.0), "neg": ("zeros", 3.0), "exp": ("uniform", 10.0),
    "log": ("positive", 100.0), "sqrt": ("positive", 100.0), "rsqrt": ("positive", 100.0),
    "reciprocal": ("nonzero", 10.0), "floor": ("halves", 1.0), "ceil": ("halves", 1.0),
    "round": ("halves", 1.0), "sin": ("uniform", 10.0), "cos": ("uniform", 10.0),
    "erf": ("uniform", 3.0), "sign": ("zeros", 1.0), "tan": ("uniform", 1.5),
    "asin": ("unit", 1.0), "acos": ("unit", 1.0), "atan": ("uniform", 10.0),
    "sinh": ("uniform", 5.0), "cosh": ("uniform", 5.0), "asinh": ("uniform", 10.0),
    "acosh": ("above-one", 10.0), "atanh": ("unit", 1.0),
}


def _unary():
    rng = fixed_rng("unary")
    specs = []
    for number, (function, (values, scale)) in enumerate(UNARY_DOMAINS.items()):
        for rank in (1 + number % 6, 1 + (number + 3) % 6):
            specs.append(spec("unary", len(specs), "ElementwiseUnary", [shape(rng, rank, 5)],
                              {"function": function}, values, scale))
    # Where the result is an infinity or a signed zero.
    for function in ("reciprocal", "log", "sqrt", "neg", "abs", "round", "floor", "ceil"):
        specs.append(spec("unary", len(specs), "ElementwiseUnary", [[8]], {"function": function},
                          "signed-zeros"))
    return specs


#: The activation functions of 1.3, each with parameters other than its defaults where it has
#: them (the defaults are the layer table's, run too).
NEW_ACTIVATIONS = [
    {"function": "elu"}, {"function": "elu", "a": 0.5}, {"function": "selu"},
    {"function": "selu", "a": 1.5, "b": 0.5}, {"function": "hard_sigmoid"},
    {"function": "hard_sigmoid", "a": 0.3, "b": 0.4}, {"function": "hard_swish"},
    {"function": "swish"}, {"function": "swish", "a": 1.7}, {"function": "gelu"},
    {"function": "gelu", "approximate": "tanh"}, {"function": "softplus"},
    {"function": "softsign"}, {"function": "clip", "a": -0.5, "b": 0.75}, {"function": "clip"},
    {"function": "celu"}, {"function": "celu", "a": 2.0}, {"function": "thresholded_relu"},
    {"function": "thresholded_relu", "a": 0.25}, {"function": "mish"},
]


def _new_activations():
    rng = fixed_rng("new-activations")
    specs = []
    for number, descriptor in enumerate(NEW_ACTIVATIONS):
        for values, scale in (("uniform", 6.0), ("large", 100.0), ("zeros", 1.0)):
            rank = 1 + (number + len(specs)) % 6
            specs.append(spec("activation13", len(specs), "Activation", [shape(rng, rank, 5)],
                              descriptor, values, scale))
    return specs


def _prelu():
    rng = fixed_rng("prelu")
    specs = []
    for rank in RANKS:
        x = shape(rng, rank, 4)
        x[-1] = max(x[-1], 2)
        slopes = [x[-1:], [1], list(x), [1] * (rank - 1) + x[-1:]]
        if rank >= 2:
            slopes.append([x[-2], 1])
        for slope in slopes:
            specs.append(spec("prelu", len(specs), "Prelu", [x, slope], None, ["zeros", "uniform"]))
    return specs


register_families({"binary-layers": _binary_layers, "unary": _unary,
                   "new-activations": _new_activations, "prelu": _prelu}, "LAYER-3")
