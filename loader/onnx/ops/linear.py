"""Matrix products: Gemm and MatMul. A product with constant weights becomes FullyConnected (the
backends pack constant weights once); a product of two run-time tensors is a MatMul layer."""
import numpy as np

from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.ops.elementwise import broadcast_layer
from loader.onnx.ops.shape import _reshaped
from loader.onnx.values import Value


def _transposed(builder, value: Value) -> Value:
    if value.is_const:
        return Value.constant(value.const.T)
    layout = tuple((1 - p) for p in value.layout)
    return Value.runtime(value.tensor, value.shape[::-1], layout)


def fully_connected(builder, x: Value, weights: np.ndarray, bias=None,
                    transposed=False) -> Value:
    """x [..., K] @ weights [K, M] (+ bias [M]) as FullyConnected over the flattened leading
    axes; ``transposed`` weights are [M, K] (taken as they are: no copy)."""
    m, k = weights.shape if transposed else weights.shape[::-1]
    lead = x.shape[:-1]
    rows = int(np.prod(lead, dtype=object)) if lead else 1
    flat = _reshaped(builder, x, (rows, k)) if x.rank != 2 else x
    operands = [builder.float_tensor(flat), builder.constant(weights)]
    if bias is not None:
        operands.append(builder.constant(np.broadcast_to(bias, (m,)).astype(np.float32)))
    tensor = builder.layer("FullyConnected", operands, {"transpose_weights": bool(transposed)})
    result = Value.runtime(tensor, (rows, m))
    return _reshaped(builder, result, lead + (m,)) if x.rank != 2 else result


@converts("Gemm")
def gemm(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Gemm)"
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    if a.rank != 2 or b.rank != 2:
        raise ModelError(f"{where}: A and B must be 2-D, got {list(a.shape)} and {list(b.shape)}")
    alpha, beta = attrs.float("alpha", 1.0), attrs.float("beta", 1.0)
    if attrs.int("transA", 0):
        a = _transposed(builder, a)
    weights_transposed = bool(attrs.int("transB", 0)) and b.is_const
    if attrs.int("transB", 0):
        b = _transposed(builder, b)
    if a.shape[1] != b.shape[0]:
        raise ModelError(f"{where}: A' {list(a.shape)} and B' {list(b.shape)} do not multiply")
    m = b.shape[1]
    if a.is_const and b.is_const and (c is None or c.is_const):
        y = alpha * (a.const.astype(np.float64) @ b.const)
        if c is not None:
            y = y + beta * c.const
        return [Value.constant(y.astype(np.float32))]
    bias_vector = None
    if c is not None and c.is_const and c.const.size in (1, m) and \
            c.const.reshape(-1).shape[0] in (1, m) and (c.rank < 2 or c.shape[0] == 1):
        bias_vector = (beta * c.const.reshape(-1)).astype(np.float32)
    if b.is_const:
        weights = b.const.T if weights_transposed else b.const     # as the model stores it
        if alpha != 1.0:
            weights = (alpha * weights).astype(np.float32)
        y = fully_connected(builder, a, weights, bias_vector, weights_transposed)
    else:
        y = Value.runtime(builder.layer("MatMul", [builder.float_tensor(a),
                                                   builder.float_tensor(b)]), (a.shape[0], m))
        if alpha != 1.0:
            y = broadcast_layer(builder, "Multiplication", y, Value.constant(np.float32(alpha)))
        if bias_vector is not None:
            y = broadcast_layer(builder, "Addition", y, Value.constant(bias_vector))
    if c is not None and bias_vector is None:
        scaled = Value.constant((beta * c.const).astype(np.float32)) if c.is_const else c
        if not c.is_const and beta != 1.0:
            scaled = broadcast_layer(builder, "Multiplication", c, Value.constant(np.float32(beta)))
        y = broadcast_layer(builder, "Addition", y, scaled)
    return [y]


def _matmul_shape(a, b):
    """NumPy's matmul result shape (1-D operands promoted and then dropped), or None."""
    if not a or not b:
        return None
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        return None
    try:
        batch = tuple(int(v) for v in np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        return None
    return batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())


def _bias_after(builder, node, out):
    """(bias [M], the output of the Add that adds it) where the MatMul's only reader is an Add of
    a constant that varies along the last axis alone and leaves the shape as it is (a linear
    layer's bias, as PyTorch exports it): FullyConnected then adds it itself. Else (None, None)."""
    product = node.output[0]
    readers = builder.readers.get(product, [])
    if len(readers) != 1 or product in builder.graph_outputs or not out:
        return None, None
    add = readers[0]
    if add.op_type != "Add" or add.domain not in ("", "ai.onnx") or len(add.input) != 2 or \
            add.attribute or not add.output or not add.output[0]:
        return None, None
    other = builder.constant_of(add.input[1] if add.input[0] == product else add.input[0])
    m = out[-1]
    if other is None or other.dtype.kind != "f" or other.ndim > len(out) or other.size != m or \
            (other.ndim and other.shape[-1] != m):
        return None, None
    return other.reshape(-1).astype(np.float32), add.output[0]


@converts("MatMul")
def mat_mul(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (MatMul)"
    a, b = inputs
    out = _matmul_shape(a.shape, b.shape)
    if out is None:
        raise ModelError(f"{where}: {list(a.shape)} @ {list(b.shape)} do not multiply")
    if a.is_const and b.is_const:
        return [Value.constant(np.matmul(a.const, b.const))]
    if b.is_const and b.rank == 2 and a.rank >= 2:
        weights = b.const if b.const.dtype == np.float32 else b.const.astype(np.float32)
        bias, added = _bias_after(builder, node, out)
        result = fully_connected(builder, a, weights, bias)
        if added is not None:
            builder.absorbed[added] = result
        return [result]
    tensor = builder.layer("MatMul", [builder.float_tensor(a), builder.float_tensor(b)])
    if not out:      # two 1-D operands: NumPy's (and ONNX's) result is a scalar
        tensor = builder.layer("Reshape", [tensor], {"shape": []}, "/scalar")
    return [Value.runtime(tensor, out)]
