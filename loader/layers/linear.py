"""Matrix products: FullyConnected and MatMul (NumPy's batched, broadcasting matmul)."""
from loader.errors import InvalidLayerError
from loader.layers._table import LayerType
from loader.layers._values import boolean, broadcast, rank, ranks_1_to_6


def _fully_connected(d, shapes):
    layer = "FullyConnected"
    transpose = boolean(layer, "transpose_weights", d["transpose_weights"])
    x, w = shapes[0], shapes[1]
    rank(layer, "the input [N, K]", x, 2)
    rank(layer, "the weights", w, 2)
    k, m = (w[1], w[0]) if transpose else (w[0], w[1])
    if k != x[1]:
        layout = "[M, K]" if transpose else "[K, M]"
        raise InvalidLayerError(f"{layer}: weights {list(w)} read as {layout} have K = {k}, the "
                                f"input {list(x)} has K = {x[1]}")
    if len(shapes) == 3 and tuple(shapes[2]) != (m,):
        raise InvalidLayerError(f"{layer}: bias must have shape [{m}], got {list(shapes[2])}")
    return (x[0], m), {"transpose_weights": int(transpose), "bias_enabled": int(len(shapes) == 3)}


def _mat_mul(d, shapes):
    layer = "MatMul"
    ranks_1_to_6(layer, shapes)
    a, b = shapes
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)     # NumPy's promotion of 1-D operands
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise InvalidLayerError(f"{layer}: {list(a)} @ {list(b)}: the inner dimensions "
                                f"{a2[-1]} and {b2[-2]} differ")
    batch = broadcast(layer, a2[:-2], b2[:-2])
    out = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return out or (1,), {}


LAYERS = [
    LayerType("FullyConnected", 3, ("x", "w", "bias"), {"transpose_weights": True},
              _fully_connected),
    LayerType("MatMul", 24, ("a", "b"), {}, _mat_mul, since_minor=3),
]
