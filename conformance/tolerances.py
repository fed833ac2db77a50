"""How far a float32 backend's output may be from the float64 reference, per element: the one
place that says so for every layer.

Every layer gets ``atol + rtol * |expected|`` (both 1e-4 unless a case says otherwise), which
covers one rounding per transcendental function, relative to its result. On top of that:

- an accumulation of K terms (FullyConnected, MatMul, convolutions, pooling windows, reductions,
  normalizations) may be rounded K times, in any order: 4 * sqrt(K) units of float32 roundoff
  of the sum of the terms' magnitudes (the same reference computed on |inputs|);
- a product of K factors, K units relative to the result;
- Softmax and log-sum-exp grow with the spread of their inputs along the axis;
- Resize's taps come from a coordinate a float32 backend computes with a rounded scale;
- layers that only move data (Reshape, Concatenation, Slice, Transpose, Pad) must be exact.
"""
import math

import numpy as np

FLOAT32_UNIT = 2.0 ** -24  # unit roundoff of float32
EXACT = ("Reshape", "Concatenation", "Slice", "Transpose", "Pad")


def _descriptor(layer, descriptor):
    from loader.layers import LAYERS
    merged = dict(LAYERS[layer].defaults)
    merged.update(descriptor or {})
    return merged


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def _axes(d, rank):
    return tuple(range(rank)) if d["axes"] is None else tuple(sorted({a % rank for a in d["axes"]}))


def accumulation(layer, inputs, descriptor):
    """(K, magnitude): the length of the sum behind each output and the float64 sum of the
    magnitudes of its terms, broadcastable to the output; (1, None) when there is none."""
    from conformance import reference
    d = _descriptor(layer, descriptor)
    absolute = [np.abs(x) for x in inputs]
    if layer == "FullyConnected":
        n = inputs[0].shape[1]
    elif layer == "MatMul":
        n = inputs[0].shape[-1]
    elif layer == "Convolution2d":
        n = int(np.prod(inputs[1].shape[1:]))
    elif layer == "DepthwiseConvolution2d":
        n = inputs[1].shape[1] * inputs[1].shape[2]
    elif layer == "TransposeConvolution2d":
        n = inputs[1].shape[1] * inputs[1].shape[2] * inputs[0].shape[3] // d["groups"]
    elif layer == "Pooling2d" and d["pool"] in ("average", "l2"):
        kernel = _pair(d["kernel"])
        n = kernel[0] * kernel[1]
        if d["pool"] == "l2":  # a sum of squares, all positive: its own magnitude
            return n, np.abs(reference.evaluate(layer, inputs, descriptor))
    elif layer == "Reduce":
        return _reduce(inputs[0], d)
    elif layer == "LayerNormalization":
        return _layer_normalization(inputs, d)
    else:
        return 1, None
    return n, np.abs(reference.evaluate(layer, absolute, descriptor))


def _reduce(x, d):
    from conformance.reference import reduce
    axes = _axes(d, x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    function, keep = d["function"], d["keep_dims"]
    if function in ("sum", "mean", "l1"):
        return n, reduce(np.abs(x), function, axes, keep)
    if function in ("sum_square", "l2"):
        return n, reduce(x, function, axes, keep)
    if function == "log_sum_exp":  # exp of values up to the largest, then a log of their sum
        return n, reduce(np.abs(x), "max", axes, keep) + math.log(n) + 1
    return 1, None  # max and min are exact; prod is relative (tolerance())


def _layer_normalization(inputs, d):
    """Mean and variance over K values, then a division by the standard deviation: the
    roundoff of both sums, scaled by how far each value is from the mean in deviations."""
    x = inputs[0].astype(np.float64)
    axes = tuple(range(d["axis"] % x.ndim, x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    mean = x.mean(axis=axes, keepdims=True)
    deviation = np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + d["epsilon"])
    spread = (np.abs(x).max(axis=axes, keepdims=True) + np.abs(mean)) / deviation
    return n, (spread + 1) * np.abs(inputs[1])


def tolerance(data, inputs, expected):
    """The tolerance of each element of ``expected`` (the float64 reference of ``data``, a
    fixed or generated case, on ``inputs``)."""
    layer = data["layer"]
    if layer in EXACT and "rtol" not in data and "atol" not in data:
        return np.zeros_like(expected)
    rtol, atol = data.get("rtol", 1e-4), data.get("atol", 1e-4)
    tol = atol + rtol * np.abs(expected)
    d = _descriptor(layer, data.get("descriptor"))
    n, magnitude = accumulation(layer, inputs, data.get("descriptor"))
    if magnitude is not None:
        tol = tol + 4 * math.sqrt(n) * FLOAT32_UNIT * magnitude
    if layer == "Softmax":
        axis = d["axis"] % inputs[0].ndim
        spread = np.max(np.abs(d["beta"] * inputs[0].astype(np.float64)), axis=axis, keepdims=True)
        cols = inputs[0].shape[axis]
        tol = tol + (8 * spread + 4 * math.sqrt(cols)) * FLOAT32_UNIT * np.abs(expected)
        if d["log"]:
            tol = tol + (8 * spread + 4 * math.log(cols) + 4) * FLOAT32_UNIT
    elif layer == "Reduce" and d["function"] == "prod":
        count = int(np.prod([inputs[0].shape[a] for a in _axes(d, inputs[0].ndim)]))
        tol = tol + 4 * count * FLOAT32_UNIT * np.abs(expected)
    elif layer == "Resize" and d["mode"] != "nearest":
        # The taps' weights come from a coordinate computed in float32 from a rounded scale.
        size = max(inputs[0].shape[1:3]) + max(_pair(d["size"]))
        tol = tol + 64 * size * FLOAT32_UNIT * np.max(np.abs(inputs[0]))
    return tol
