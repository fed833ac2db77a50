"""Operators that move data: Concat, Split, Slice, Gather, Transpose (a change of layout only),
Pad, DepthToSpace and SpaceToDepth."""
import numpy as np

from loader.onnx.builder import ints_of, require_const
from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.values import Unsupported, Value, inverse

INT64_MAX = 2**63 - 1


def _axis(axis, rank, where):
    if not -rank <= axis < rank:
        raise ModelError(f"{where}: axis {axis} is out of range for rank {rank}")
    return axis % rank


@converts("Transpose")
def transpose(builder, node, inputs, attrs, opset):
    x = inputs[0]
    perm = attrs.ints("perm", list(range(x.rank))[::-1])
    if sorted(perm) != list(range(x.rank)):
        raise ModelError(f"node {node.name!r} (Transpose): perm {perm} is not a permutation of "
                         f"{x.rank} axes")
    if x.is_const:
        return [Value.constant(np.transpose(x.const, perm))]
    # out logical axis i is in logical axis perm[i]: only the bookkeeping changes
    into = inverse(perm)
    layout = tuple(into[p] for p in x.layout)
    return [Value.runtime(x.tensor, [x.shape[p] for p in perm], layout)]


@converts("Concat")
def concat(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Concat)"
    parts = [v for v in inputs if v is not None]
    if not parts:
        raise ModelError(f"{where}: no input")
    rank = parts[0].rank
    axis = _axis(attrs.int("axis"), rank, where)
    for part in parts:
        if part.rank != rank or any(a != b for k, (a, b) in enumerate(zip(part.shape,
                                                                          parts[0].shape))
                                    if k != axis):
            raise ModelError(f"{where}: inputs {[list(p.shape) for p in parts]} do not "
                             f"concatenate along axis {axis}")
    if all(p.is_const for p in parts):
        return [Value.constant(np.concatenate([p.const for p in parts], axis=axis))]
    parts = [p for p in parts if p.shape[axis] > 0]
    runtime = [p for p in parts if not p.is_const]
    layout = runtime[0].layout
    tensors = [builder.float_tensor(p, layout) for p in parts]
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    if len(tensors) == 1:
        return [parts[0]]
    return [Value.runtime(builder.layer("Concatenation", tensors,
                                        {"axis": inverse(layout)[axis]}), shape, layout)]


def _slice_value(builder, x: Value, begin, end, step) -> Value:
    """ONNX's Slice over every axis (begin/end/step one per logical axis)."""
    if x.is_const:
        index = tuple(slice(*_bounds(n, b, e, s)) for n, b, e, s in zip(x.shape, begin, end, step))
        return Value.constant(x.const[index].copy())
    from loader.layers.tensor import slice_bounds
    out = []
    for n, b, e, s in zip(x.shape, begin, end, step):
        _, count = slice_bounds(n, b, e, s)
        if count < 1:
            raise Unsupported("an empty slice (tensors have every dimension at least 1)")
        out.append(count)
    if out == list(x.shape) and all(s == 1 for s in step):
        return x
    layout = x.layout
    descriptor = {"begin": [begin[p] for p in layout], "end": [end[p] for p in layout],
                  "step": [step[p] for p in layout]}
    return Value.runtime(builder.layer("Slice", [x.tensor], descriptor), out, layout)


def _bounds(n, begin, end, step):
    """(start, stop, step) for Python's slice with ONNX's clamping of one axis."""
    from loader.layers.tensor import slice_bounds
    start, count = slice_bounds(n, begin, end, step)
    stop = start + count * step
    return start, (stop if stop >= 0 else None), step


@converts("Slice", since=10)
def slice_(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Slice)"
    x = inputs[0]
    starts = ints_of(inputs[1], where, "starts")
    ends = ints_of(inputs[2], where, "ends")
    axes = ints_of(inputs[3], where, "axes") if len(inputs) > 3 and inputs[3] else \
        list(range(len(starts)))
    steps = ints_of(inputs[4], where, "steps") if len(inputs) > 4 and inputs[4] else \
        [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ModelError(f"{where}: starts, ends, axes and steps differ in length")
    begin, end, step = [0] * x.rank, [INT64_MAX] * x.rank, [1] * x.rank
    seen = set()
    for s, e, a, t in zip(starts, ends, axes, steps):
        a = _axis(a, x.rank, where)
        if a in seen:
            raise ModelError(f"{where}: axis {a} is sliced twice")
        if t == 0:
            raise ModelError(f"{where}: a step of 0")
        seen.add(a)
        clamp = lambda v: max(min(v, INT64_MAX), -INT64_MAX - 1)  # noqa: E731
        begin[a], end[a], step[a] = clamp(s), clamp(e), t
    return [_slice_value(builder, x, begin, end, step)]


@converts("Split", since=1)
def split(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Split)"
    x = inputs[0]
    axis = _axis(attrs.int("axis", 0), x.rank, where)
    outputs = len(node.output)
    if opset >= 13 and len(inputs) > 1 and inputs[1] is not None:
        sizes = ints_of(inputs[1], where, "split")
    elif opset < 13 and attrs.ints("split") is not None:
        sizes = attrs.ints("split")
    else:
        count = attrs.int("num_outputs", outputs) if opset >= 18 else outputs
        if count < 1:
            raise ModelError(f"{where}: {count} outputs")
        chunk = -(-x.shape[axis] // count)
        sizes = [min(chunk, x.shape[axis] - k * chunk) for k in range(count)]
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes) or len(sizes) != outputs:
        raise ModelError(f"{where}: sizes {sizes} do not split axis {axis} of {list(x.shape)} "
                         f"into {outputs} outputs")
    results, at = [], 0
    for size in sizes:
        begin, end = [0] * x.rank, [INT64_MAX] * x.rank
        begin[axis], end[axis] = at, at + size
        results.append(_slice_value(builder, x, begin, end, [1] * x.rank))
        at += size
    return results


@converts("Gather")
def gather(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Gather)"
    x = inputs[0]
    axis = _axis(attrs.int("axis", 0), x.rank, where)
    indices = require_const(inputs[1], where, "the indices")
    if indices.dtype.kind not in "iu":
        raise ModelError(f"{where}: indices of type {indices.dtype}")
    extent = x.shape[axis]
    if np.any((indices < -extent) | (indices >= extent)):
        raise ModelError(f"{where}: an index lies outside axis {axis} (extent {extent})")
    indices = np.where(indices < 0, indices + extent, indices)
    if x.is_const:
        return [Value.constant(np.take(x.const, indices, axis=axis))]
    flat = indices.reshape(-1)
    out_shape = x.shape[:axis] + indices.shape + x.shape[axis + 1:]
    if flat.size == 0:
        raise Unsupported("an empty gather")
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if step != 0 and np.array_equal(flat, flat[0] + step * np.arange(flat.size)):
        begin, end, steps = [0] * x.rank, [INT64_MAX] * x.rank, [1] * x.rank
        begin[axis], steps[axis] = int(flat[0]), step
        end[axis] = int(flat[0]) + step * flat.size if step > 0 or \
            int(flat[0]) + step * flat.size >= 0 else -INT64_MAX
        picked = _slice_value(builder, x, begin, end, steps)
    else:
        slices = []
        for index in flat:
            begin, end = [0] * x.rank, [INT64_MAX] * x.rank
            begin[axis], end[axis] = int(index), int(index) + 1
            slices.append(_slice_value(builder, x, begin, end, [1] * x.rank))
        picked = concat_values(builder, slices, axis)
    if picked.shape == out_shape:
        return [picked]
    from loader.onnx.ops.shape import _reshaped
    return [_reshaped(builder, picked, out_shape)]


def concat_values(builder, parts, axis) -> Value:
    layout = parts[0].layout
    tensors = [builder.float_tensor(p, layout) for p in parts]
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    return Value.runtime(builder.layer("Concatenation", tensors,
                                       {"axis": inverse(layout)[axis]}), shape, layout)


def _padding_a_convolution_takes(builder, node, x, begin, end, mode, value):
    """[top, bottom, left, right] when this Pad adds zeros around the two spatial axes of a
    run-time NCHW tensor that one 2-D Conv alone reads as its data (with explicit pads), so
    that the Conv can pad by that much more; None otherwise."""
    output = node.output[0]
    readers = builder.readers.get(output, [])
    if x.is_const or x.rank != 4 or mode != "constant" or value != 0.0 or \
            output in builder.graph_outputs or len(readers) != 1:
        return None
    if begin[:2] != [0, 0] or end[:2] != [0, 0] or min(begin + end) < 0:
        return None
    conv = readers[0]
    if conv.op_type != "Conv" or conv.domain not in ("", "ai.onnx") or \
            list(conv.input[:1]) != [output] or output in conv.input[1:]:
        return None
    for attribute in conv.attribute:
        if attribute.name == "auto_pad" and attribute.s not in (b"", b"NOTSET"):
            return None
    return [begin[2], end[2], begin[3], end[3]]


@converts("Pad", since=11)
def pad(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Pad)"
    x = inputs[0]
    pads = ints_of(inputs[1], where, "pads")
    value = 0.0
    if len(inputs) > 2 and inputs[2] is not None:
        value = float(require_const(inputs[2], where, "the constant value").reshape(-1)[0]) \
            if inputs[2].const.size else 0.0
    axes = list(range(x.rank))
    if len(inputs) > 3 and inputs[3] is not None:
        axes = [_axis(a, x.rank, where) for a in ints_of(inputs[3], where, "axes")]
    if len(pads) != 2 * len(axes):
        raise ModelError(f"{where}: {len(pads)} pads for {len(axes)} axes")
    mode = attrs.string("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"pad mode {mode!r}")
    begin, end = [0] * x.rank, [0] * x.rank
    for k, axis in enumerate(axes):
        begin[axis], end[axis] = pads[k], pads[len(axes) + k]
    spatial = _padding_a_convolution_takes(builder, node, x, begin, end, mode, value)
    if spatial is not None:     # the Conv that alone reads it pads by as much more instead
        builder.folded_pads[node.output[0]] = spatial
        return [x]
    if x.is_const:
        from conformance.reference.tensor import pad as reference_pad
        return [Value.constant(reference_pad(x.const, begin + end, mode, value)
                               .astype(x.const.dtype))]
    layout = x.layout
    descriptor = {"pads": [begin[p] for p in layout] + [end[p] for p in layout], "mode": mode,
                  "value": value}
    shape = [n + b + e for n, b, e in zip(x.shape, begin, end)]
    return [Value.runtime(builder.layer("Pad", [x.tensor], descriptor), shape, layout)]


@converts("DepthToSpace", "SpaceToDepth")
def depth_space(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} ({node.op_type})"
    x = inputs[0]
    if x.rank != 4:
        raise ModelError(f"{where}: a 4-D input is needed")
    b = attrs.int("blocksize")
    n, c, h, w = x.shape
    from loader.onnx.ops.shape import _reshaped
    if node.op_type == "DepthToSpace":
        if b is None or b < 1 or c % (b * b):
            raise ModelError(f"{where}: blocksize {b} for {c} channels")
        mode = attrs.string("mode", "DCR")
        if mode not in ("DCR", "CRD"):
            raise ModelError(f"{where}: mode {mode!r}")
        if mode == "DCR":
            steps = ((n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2))
        else:
            steps = ((n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3))
        final = (n, c // (b * b), h * b, w * b)
    else:
        if b is None or b < 1 or h % b or w % b:
            raise ModelError(f"{where}: blocksize {b} for {h}x{w}")
        mode = attrs.string("mode", "DCR")
        if mode not in ("DCR", "CRD"):
            raise ModelError(f"{where}: mode {mode!r}")
        steps = ((n, c, h // b, b, w // b, b),
                 (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4))
        final = (n, c * b * b, h // b, w // b)
    shape, perm = steps
    six = _reshaped(builder, x, shape)
    moved = Value.constant(np.transpose(six.const, perm)) if six.is_const else \
        Value.runtime(builder.layer("Transpose", [builder.float_tensor(six)], {"perm": list(perm)}),
                      [shape[p] for p in perm])
    return [_reshaped(builder, moved, final)]
