"""Layers that normalize or reduce along axes: Softmax, Reduce, BatchNormalization and
LayerNormalization."""
from loader.errors import InvalidLayerError
from loader.layers._table import LayerType
from loader.layers._values import axis, boolean, choice, integers, ranks_1_to_6, real

REDUCE_FUNCTIONS = {name: code for code, name in enumerate(
    ["mean", "sum", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum_exp"])}


def _softmax(d, shapes):
    x = shapes[0]
    if len(x) < 1:
        raise InvalidLayerError("Softmax: the input needs at least one dimension")
    along = axis("Softmax", "axis", d["axis"], len(x))
    log = boolean("Softmax", "log", d["log"])
    minor = 3 if (along != len(x) - 1 or log) else 1
    return x, {"beta": real("Softmax", "beta", d["beta"]), "axis": along, "log": int(log)}, minor


def _reduce(d, shapes):
    layer = "Reduce"
    ranks_1_to_6(layer, shapes)
    x = shapes[0]
    function = choice(layer, "function", d["function"], REDUCE_FUNCTIONS)
    keep = boolean(layer, "keep_dims", d["keep_dims"])
    if d["axes"] is None:
        axes = list(range(len(x)))
    else:
        raw = integers(layer, "axes", d["axes"])
        axes = sorted({axis(layer, "axes", a, len(x)) for a in raw})
        if len(axes) != len(raw):
            raise InvalidLayerError(f"{layer}: 'axes' {raw} names an axis twice")
        if not axes:
            raise InvalidLayerError(f"{layer}: 'axes' is empty; leave it out to reduce every axis")
    out = [1 if k in axes else v for k, v in enumerate(x)] if keep else \
        [v for k, v in enumerate(x) if k not in axes]
    mask = 0
    for a in axes:
        mask |= 1 << a
    return tuple(out) or (1,), {"function": function, "axes": mask, "keep_dims": int(keep)}


def _batch_normalization(d, shapes):
    layer = "BatchNormalization"
    ranks_1_to_6(layer, shapes)
    x = shapes[0]
    for name, shape in zip(("mean", "variance", "scale", "bias"), shapes[1:]):
        if tuple(shape) != (x[-1],):
            raise InvalidLayerError(f"{layer}: {name} must have shape [{x[-1]}] (the last axis "
                                    f"of the input {list(x)}), got {list(shape)}")
    return x, {"epsilon": real(layer, "epsilon", d["epsilon"], positive=True)}


def _layer_normalization(d, shapes):
    layer = "LayerNormalization"
    ranks_1_to_6(layer, shapes)
    x = shapes[0]
    along = axis(layer, "axis", d["axis"], len(x))
    normalized = tuple(x[along:])
    for name, shape in zip(("scale", "bias"), shapes[1:]):
        fits = len(shape) <= len(normalized) and all(
            s in (1, n) for s, n in zip(reversed(shape), reversed(normalized)))
        if not fits:
            raise InvalidLayerError(f"{layer}: {name} {list(shape)} must broadcast to the "
                                    f"normalized axes {list(normalized)}")
    return x, {"axis": along, "epsilon": real(layer, "epsilon", d["epsilon"], positive=True),
               "bias_enabled": int(len(shapes) == 3)}


LAYERS = [
    LayerType("Softmax", 7, ("x",), {"beta": 1.0, "axis": -1, "log": False}, _softmax),
    LayerType("Reduce", 21, ("x",), {"function": None, "axes": None, "keep_dims": True},
              _reduce, "functions: " + ", ".join(REDUCE_FUNCTIONS), since_minor=3,
              required=("function",)),
    LayerType("BatchNormalization", 22, ("x", "mean", "variance", "scale", "bias"),
              {"epsilon": 1e-5}, _batch_normalization, since_minor=3),
    LayerType("LayerNormalization", 23, ("x", "scale", "bias"), {"axis": -1, "epsilon": 1e-5},
              _layer_normalization, since_minor=3),
]
