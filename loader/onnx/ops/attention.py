"""ONNX's Attention operator (opset 23 on) as layers: the heads split from 3-D inputs, the key
and value caches concatenated, grouped-query heads repeated, Q scaled, Q @ K^T, the soft cap,
the additive bias (the mask, causal and sliding-window limits, the key padding: built at import
time when they are constants), the softmax and the product with V.

A query row that no key may attend to gives zeros, as ONNX defines it; the softmax is then
written out so that such a row divides 0 by a positive number instead of computing
exp(-inf - -inf)."""
import numpy as np

from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.ops.composite import _Layers
from loader.onnx.ops.elementwise import broadcast_layer, unary_layer
from loader.onnx.ops.linear import _matmul_shape
from loader.onnx.ops.shape import _reshaped
from loader.onnx.ops.tensor import concat_values
from loader.onnx.values import Unsupported, Value, inverse

_FLOAT, _DOUBLE = 1, 11


def _permuted(value: Value, perm) -> Value:
    """Logical axis i of the result is axis perm[i] of ``value`` (bookkeeping only)."""
    if value.is_const:
        return Value.constant(np.transpose(value.const, perm))
    into = inverse(perm)
    return Value.runtime(value.tensor, [value.shape[p] for p in perm],
                         tuple(into[p] for p in value.layout))


def _heads(builder, x: Value, heads, where, what) -> Value:
    """[batch, sequence, heads * size] -> [batch, heads, sequence, size]."""
    batch, length, hidden = x.shape
    if heads is None or heads < 1 or hidden % heads:
        raise ModelError(f"{where}: {what} of hidden size {hidden} for {heads} heads")
    return _permuted(_reshaped(builder, x, (batch, length, heads, hidden // heads)),
                     (0, 2, 1, 3))


def _matmul(builder, a: Value, b: Value) -> Value:
    shape = _matmul_shape(a.shape, b.shape)
    if shape is None:
        raise ModelError(f"{list(a.shape)} @ {list(b.shape)} do not multiply")
    tensor = builder.layer("MatMul", [builder.float_tensor(a), builder.float_tensor(b)])
    return Value.runtime(tensor, shape)


def _allowed(q_length, kv_length, offset, left, right, causal):
    """Which keys each query may attend to under the causal and sliding-window limits, with
    query i at position i + offset; ``offset`` is a scalar or one per batch ([batch])."""
    i = np.arange(q_length).reshape(q_length, 1)
    j = np.arange(kv_length).reshape(1, kv_length)
    offset = np.asarray(offset).reshape(-1, 1, 1) if np.ndim(offset) else int(offset)
    diff = i + offset - j
    allowed = np.ones(np.shape(diff), bool)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    if allowed.ndim == 3:                   # per batch: [batch, 1, q, kv]
        allowed = allowed[:, None]
    return allowed


def _constant_bias(mask, q_length, kv_length, causal, left, right, past, nonpad, batch):
    """The additive bias (0 or -inf, or the mask's values) of everything known at import time;
    ``mask`` is a NumPy array (bool or float) or None. None when nothing limits attention."""
    if mask is not None and mask.shape[-1] < kv_length:    # a short mask: the rest is masked
        pad = [(0, 0)] * (mask.ndim - 1) + [(0, kv_length - mask.shape[-1])]
        mask = np.pad(mask, pad, constant_values=False if mask.dtype == bool else -np.inf)
    bias = None
    if mask is not None:
        bias = np.where(mask, np.float32(0), np.float32(-np.inf)) if mask.dtype == bool else \
            mask.astype(np.float32)
    if causal or left >= 0 or right >= 0:
        if past is None and nonpad is not None:
            offset = nonpad.reshape(-1).astype(np.int64) - q_length
        else:
            offset = past if past is not None else 0
        limit = np.where(_allowed(q_length, kv_length, offset, left, right, causal),
                         np.float32(0), np.float32(-np.inf))
        bias = limit if bias is None else bias + limit
    if nonpad is not None:
        keys = np.arange(kv_length) < nonpad.reshape(-1, 1).astype(np.int64)
        padding = np.where(keys, np.float32(0), np.float32(-np.inf)).reshape(
            batch, 1, 1, kv_length)
        bias = padding if bias is None else bias + padding
    return bias


def _softmax_with_empty_rows(builder, scores: Value) -> Value:
    """Softmax over the last axis that gives 0 for a row of -inf: the row maximum is kept
    finite and the sum at least 1 (as it is for any other row)."""
    layers = _Layers(builder)
    rank = scores.rank
    peak = layers.run("Reduce", [scores], {"function": "max", "axes": [rank - 1],
                                           "keep_dims": True})
    lowest = Value.constant(np.float32(np.finfo(np.float32).min))
    shifted = layers.binary("Subtraction", scores, layers.binary("Maximum", peak, lowest))
    exponent = layers.run("ElementwiseUnary", [shifted], {"function": "exp"})
    total = layers.run("Reduce", [exponent], {"function": "sum", "axes": [rank - 1],
                                              "keep_dims": True})
    return layers.binary("Division", exponent,
                         layers.binary("Maximum", total, Value.constant(np.float32(1e-30))))


@converts("Attention", since=23)
def attention(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Attention)"
    inputs = list(inputs) + [None] * (7 - len(inputs))
    q, k, v, mask, past_key, past_value, nonpad = inputs[:7]
    causal = bool(attrs.int("is_causal", 0))
    q_heads, kv_heads = attrs.int("q_num_heads"), attrs.int("kv_num_heads")
    scale = attrs.float("scale")
    softcap = attrs.float("softcap", 0.0)
    mode = attrs.int("qk_matmul_output_mode", 0)
    precision = attrs.int("softmax_precision", _FLOAT)
    left, right = attrs.int("left_window_size", -1), attrs.int("right_window_size", -1)
    if not q.rank == k.rank == v.rank or q.rank not in (3, 4):
        raise ModelError(f"{where}: Q, K and V of ranks {q.rank}, {k.rank}, {v.rank} (all 3 "
                         f"or all 4)")
    if (past_key is None) != (past_value is None):
        raise ModelError(f"{where}: past_key and past_value go together")
    if nonpad is not None and past_key is not None:
        raise ModelError(f"{where}: nonpad_kv_seqlen with past_key and past_value")
    if left < -1 or right < -1:
        raise ModelError(f"{where}: window sizes {left}, {right} (-1 or at least 0)")
    if precision not in (_FLOAT, _DOUBLE):
        raise Unsupported(f"softmax_precision {precision} (float and double are computed in "
                          f"float32)")
    if len(node.output) > 3 and node.output[3] and mode == 0 and softcap:
        # the specification says before the soft cap; ONNX's reference evaluator gives it after
        raise Unsupported("qk_matmul_output with qk_matmul_output_mode 0 and a softcap")
    if mode not in (0, 1, 2, 3):
        raise ModelError(f"{where}: qk_matmul_output_mode {mode}")
    three_d = q.rank == 3
    if three_d:
        batch, q_length = q.shape[:2]
        q = _heads(builder, q, q_heads, where, "Q")
        k = _heads(builder, k, kv_heads, where, "K")
        v = _heads(builder, v, kv_heads, where, "V")
    elif q_heads is not None or kv_heads is not None:
        raise ModelError(f"{where}: q_num_heads and kv_num_heads are for 3-D inputs")
    batch, heads, q_length, size = q.shape
    if k.shape[0] != batch or v.shape[0] != batch or k.shape[3] != size or \
            k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2]:
        raise ModelError(f"{where}: Q {list(q.shape)}, K {list(k.shape)} and V {list(v.shape)} "
                         f"do not fit together")
    past = None
    if past_key is not None:
        if past_key.rank != 4 or past_value.rank != 4:
            raise ModelError(f"{where}: past_key and past_value must be 4-D")
        past = past_key.shape[2]
        k = concat_values(builder, [past_key, k], 2)
        v = concat_values(builder, [past_value, v], 2)
    present_key, present_value = k, v
    kv_length = k.shape[2]
    if heads != k.shape[1]:                 # grouped-query: each key head serves a few queries
        if heads % k.shape[1]:
            raise ModelError(f"{where}: {heads} query heads for {k.shape[1]} key heads")
        repeat = heads // k.shape[1]

        def repeated(x):
            b, h, s, d = x.shape
            one = _reshaped(builder, x, (b, h, 1, s, d))
            copies = concat_values(builder, [one] * repeat, 2)
            return _reshaped(builder, copies, (b, h * repeat, s, d))
        k, v = repeated(k), repeated(v)

    if nonpad is not None and not nonpad.is_const:
        raise Unsupported("nonpad_kv_seqlen given at run time")
    mask_const = mask.const if mask is not None and mask.is_const else None
    runtime_mask = mask if mask is not None and not mask.is_const else None
    if runtime_mask is not None and runtime_mask.dtype == np.bool_:
        raise Unsupported("a boolean attn_mask given at run time")
    if nonpad is not None and nonpad.const.size != batch:
        raise ModelError(f"{where}: nonpad_kv_seqlen of {nonpad.const.size} values for batch "
                         f"{batch}")
    bias = _constant_bias(mask_const, q_length, kv_length, causal, left, right, past,
                          nonpad.const if nonpad is not None else None, batch)
    if runtime_mask is not None and runtime_mask.shape[-1] < kv_length:
        raise Unsupported("a run-time attn_mask shorter than the keys")

    scale = float(1.0 / np.sqrt(size)) if scale is None else scale
    scores = _matmul(builder, broadcast_layer(builder, "Multiplication", q,
                                              Value.constant(np.float32(scale))),
                     _permuted(k, (0, 1, 3, 2)))
    stages = [scores]                       # what qk_matmul_output_mode 0, 1, 2 and 3 give
    if softcap > 0:
        cap = Value.constant(np.float32(softcap))
        scores = broadcast_layer(builder, "Multiplication", unary_layer(
            builder, broadcast_layer(builder, "Division", scores, cap), "Activation",
            {"function": "tanh"}), cap)
    stages.append(scores)
    if bias is not None:
        scores = broadcast_layer(builder, "Addition", scores, Value.constant(bias))
    if runtime_mask is not None:
        scores = broadcast_layer(builder, "Addition", scores, runtime_mask)
    stages.append(scores)
    empty_rows = runtime_mask is not None or (
        bias is not None and bool(np.isneginf(np.max(bias, axis=-1)).any()))
    if empty_rows:
        probabilities = _softmax_with_empty_rows(builder, scores)
    else:
        probabilities = unary_layer(builder, scores, "Softmax",
                                    {"axis": inverse(scores.layout)[scores.rank - 1]})
    stages.append(probabilities)
    y = _matmul(builder, probabilities, v)
    if three_d:
        y = _reshaped(builder, _permuted(y, (0, 2, 1, 3)), (batch, q_length, heads * y.shape[3]))
    return [y, present_key, present_value, stages[mode]]
