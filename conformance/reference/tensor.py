"""Layers that move data, in float64: reshape, concatenation, slice, transpose, pad."""
import numpy as np


def reshape(x, shape):
    return np.reshape(x.astype(np.float64), shape)


def concatenation(inputs, axis):
    return np.concatenate([x.astype(np.float64) for x in inputs], axis=axis)


def _onnx_indices(n, start, end, step):
    """The indices ONNX's Slice reads along an axis of extent n (its specification's
    clamping, written out)."""
    start = start + n if start < 0 else start
    end = end + n if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), n), min(max(end, 0), n)
        return list(range(start, end, step))
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    return list(range(start, end, step))


def slice_(x, begin=None, end=None, step=None):
    x = x.astype(np.float64)
    rank = x.ndim
    begin = [0] * rank if begin is None else begin
    end = [2**63 - 1] * rank if end is None else end
    step = [1] * rank if step is None else step
    for axis in range(rank):
        x = np.take(x, _onnx_indices(x.shape[axis], begin[axis], end[axis], step[axis]),
                    axis=axis)
    return x


def transpose(x, perm=None):
    return np.transpose(x.astype(np.float64), perm)


def pad(x, pads, mode="constant", value=0.0):
    """ONNX's Pad: a negative pad removes elements from that side first. Constant mode as
    output index o reading input index o - begin (``value`` where there is none), which is the
    same wherever the crop leaves elements, and, where a negative pad removes more than the axis
    holds and the other side's pad adds some back (pads [-4, 2] on 3 elements), gives ONNX
    Runtime's one element of ``value`` rather than a crop to nothing padded by 2."""
    x = x.astype(np.float64)
    rank = x.ndim
    begin, end = list(pads[:rank]), list(pads[rank:])
    if mode == "constant":
        out = np.full([n + b + e for n, b, e in zip(x.shape, begin, end)], value, np.float64)
        src = [(max(-b, 0), min(n, n + e)) for n, b, e in zip(x.shape, begin, end)]
        if all(lo < hi for lo, hi in src):
            out[tuple(slice(lo + b, hi + b) for (lo, hi), b in zip(src, begin))] = \
                x[tuple(slice(lo, hi) for lo, hi in src)]
        return out
    crop = tuple(slice(max(-b, 0), x.shape[k] - max(-e, 0))
                 for k, (b, e) in enumerate(zip(begin, end)))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    return np.pad(x, widths, mode={"reflect": "reflect", "edge": "edge"}[mode])
