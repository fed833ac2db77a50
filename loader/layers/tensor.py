"""Layers that move data without arithmetic: Reshape, Concatenation, Slice, Transpose, Pad."""
import numbers

import numpy as np

from loader.errors import InvalidLayerError
from loader.layers._table import LayerType
from loader.layers._values import (INT64_MAX, axis, choice, elements, integers, ranks_1_to_6,
                                   real)

MAX_DIMENSIONS = 8
PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2}


def _reshape(d, shapes):
    layer = "Reshape"
    target = d["shape"]
    if not isinstance(target, (list, tuple, np.ndarray)):
        raise TypeError(f"{layer}: 'shape' must be a list of integers, not {target!r}")
    target = [int(v) if isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
              else None for v in target]
    if None in target or any(v < -1 or v == 0 for v in target) or target.count(-1) > 1:
        raise InvalidLayerError(f"{layer}: 'shape' {d['shape']!r} must hold positive integers "
                                f"and at most one -1")
    if len(target) > MAX_DIMENSIONS:
        raise InvalidLayerError(f"{layer}: at most {MAX_DIMENSIONS} dimensions")
    count = elements(shapes[0])
    known = elements([v for v in target if v != -1])  # exact: no wrap-around
    if -1 in target:
        if count % known:
            raise InvalidLayerError(f"{layer}: cannot reshape {list(shapes[0])} into {d['shape']}")
        target[target.index(-1)] = count // known
    elif known != count:
        raise InvalidLayerError(f"{layer}: cannot reshape {list(shapes[0])} ({count} elements) "
                                f"into {target} ({known} elements)")
    return tuple(target), {}


def _concatenation(d, shapes):
    layer = "Concatenation"
    ranks_1_to_6(layer, shapes)
    first = shapes[0]
    along = axis(layer, "axis", d["axis"], len(first))
    for index, shape in enumerate(shapes[1:], 1):
        if len(shape) != len(first) or any(a != b for k, (a, b) in enumerate(zip(shape, first))
                                           if k != along):
            raise InvalidLayerError(f"{layer}: input {index} has shape {list(shape)}; every input "
                                    f"must match {list(first)} except along axis {along}")
    out = list(first)
    out[along] = sum(shape[along] for shape in shapes)
    return tuple(out), {"axis": along}


def slice_bounds(n, start, end, step):
    """ONNX's Slice on one axis of extent ``n``: (first index, count), bounds clamped."""
    if start < 0:
        start += n
    if end < 0:
        end += n
    if step > 0:
        start, end = min(max(start, 0), n), min(max(end, 0), n)
    else:
        start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    count = max(0, -(-(end - start) // step))
    return start, count


def _slice(d, shapes):
    layer = "Slice"
    ranks_1_to_6(layer, shapes)
    x = shapes[0]
    n = len(x)
    begin = integers(layer, "begin", d["begin"], n) if d["begin"] is not None else [0] * n
    end = integers(layer, "end", d["end"], n) if d["end"] is not None else [INT64_MAX] * n
    step = integers(layer, "step", d["step"], n) if d["step"] is not None else [1] * n
    if 0 in step:
        raise InvalidLayerError(f"{layer}: 'step' {step} holds a 0 (every step is non-zero)")
    starts, out = [], []
    for k in range(n):
        start, count = slice_bounds(x[k], begin[k], end[k], step[k])
        if count < 1:
            raise InvalidLayerError(f"{layer}: axis {k} of {list(x)} would be empty (begin "
                                    f"{begin[k]}, end {end[k]}, step {step[k]}); an output "
                                    f"has every dimension at least 1")
        starts.append(start)
        out.append(count)
    return tuple(out), {"begin": tuple(starts), "step": tuple(step)}


def _transpose(d, shapes):
    layer = "Transpose"
    ranks_1_to_6(layer, shapes)
    x = shapes[0]
    perm = list(range(len(x)))[::-1] if d["perm"] is None else \
        integers(layer, "perm", d["perm"], len(x), 0, len(x) - 1)
    if sorted(perm) != list(range(len(x))):
        raise InvalidLayerError(f"{layer}: 'perm' {perm} is not a permutation of the "
                                f"{len(x)} axes")
    return tuple(x[p] for p in perm), {"perm": tuple(perm)}


def _pad(d, shapes):
    layer = "Pad"
    ranks_1_to_6(layer, shapes)
    x = shapes[0]
    n = len(x)
    pads = integers(layer, "pads", d["pads"], 2 * n, -2**40, 2**40)
    mode = choice(layer, "mode", d["mode"], PAD_MODES)
    value = real(layer, "value", d["value"])
    begin, end = pads[:n], pads[n:]
    out = []
    for k in range(n):
        size = x[k] + begin[k] + end[k]
        if size < 1:
            raise InvalidLayerError(f"{layer}: pads {pads} leave axis {k} of {list(x)} empty")
        if mode == PAD_MODES["reflect"] and max(begin[k], end[k]) >= x[k]:
            raise InvalidLayerError(f"{layer}: reflect pads on axis {k} must be smaller than its "
                                    f"extent {x[k]}, got {begin[k]} and {end[k]}")
        out.append(size)
    return tuple(out), {"mode": mode, "value": value, "pad_begin": tuple(begin),
                        "pad_end": tuple(end)}


LAYERS = [
    LayerType("Reshape", 8, ("x",), {"shape": None}, _reshape, required=("shape",)),
    LayerType("Concatenation", 16, ("x",), {"axis": None}, _concatenation, since_minor=3,
              required=("axis",), variadic=True),
    LayerType("Slice", 17, ("x",), {"begin": None, "end": None, "step": None}, _slice,
              "begin, end and step list one value per axis (ONNX's clamping; negative values "
              "count from the end; a negative step walks backwards)", since_minor=3),
    LayerType("Transpose", 18, ("x",), {"perm": None}, _transpose, since_minor=3),
    LayerType("Pad", 19, ("x",), {"pads": None, "mode": "constant", "value": 0.0}, _pad,
              "pads lists the begin of every axis, then the end of every axis", since_minor=3,
              required=("pads",)),
]
