"""Softmax and LogSoftmax, reductions, BatchNormalization (one not folded into a convolution)
and LayerNormalization."""
import numpy as np

from loader.onnx.builder import ints_of
from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.ops.elementwise import unary_layer
from loader.onnx.ops.shape import _reshaped
from loader.onnx.values import Unsupported, Value, inverse


def _axis(axis, rank, where):
    if not -rank <= axis < rank:
        raise ModelError(f"{where}: axis {axis} is out of range for rank {rank}")
    return axis % rank


@converts("Softmax", "LogSoftmax")
def softmax(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} ({node.op_type})"
    x = inputs[0]
    log = node.op_type == "LogSoftmax"
    axis = _axis(attrs.int("axis", -1 if opset >= 13 else 1), x.rank, where)
    if x.is_const:
        from conformance.reference.normalization import softmax as reference
        if opset < 13:
            flat = x.const.reshape(int(np.prod(x.shape[:axis], dtype=object)), -1)
            return [Value.constant(reference(flat, 1.0, -1, log).reshape(x.shape)
                                   .astype(np.float32))]
        return [Value.constant(reference(x.const, 1.0, axis, log).astype(np.float32))]
    if opset < 13 and axis != x.rank - 1:
        # opset 1-12: the input is flattened to 2-D at the axis, normalized over the second part
        rows = int(np.prod(x.shape[:axis], dtype=object))
        flat = _reshaped(builder, x, (rows, int(np.prod(x.shape[axis:], dtype=object))))
        normalized = unary_layer(builder, flat, "Softmax", {"axis": -1, "log": log})
        return [_reshaped(builder, normalized, x.shape)]
    physical = inverse(x.layout)[axis]
    return [unary_layer(builder, x, "Softmax", {"axis": physical, "log": log})]


_REDUCE = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min",
           "ReduceProd": "prod", "ReduceL1": "l1", "ReduceL2": "l2",
           "ReduceSumSquare": "sum_square", "ReduceLogSumExp": "log_sum_exp",
           "ReduceLogSum": "sum"}


@converts(*_REDUCE)
def reduce(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} ({node.op_type})"
    x = inputs[0]
    axes_as_input = opset >= 18 or (node.op_type == "ReduceSum" and opset >= 13)
    if axes_as_input:
        given = ints_of(inputs[1], where, "the axes") if len(inputs) > 1 and inputs[1] else []
    else:
        given = attrs.ints("axes", [])
    keep = bool(attrs.int("keepdims", 1))
    noop = attrs.int("noop_with_empty_axes", 0)
    if not given and noop:
        return [x]
    axes = sorted({_axis(a, x.rank, where) for a in given}) if given else list(range(x.rank))
    function = _REDUCE[node.op_type]
    if x.is_const:
        from conformance.reference.normalization import reduce as reference
        result = reference(x.const, function, axes, keep)
        if node.op_type == "ReduceLogSum":
            result = np.log(result)
        if not keep and len(axes) == x.rank:
            result = result.reshape(())
        return [Value.constant(result.astype(x.const.dtype))]
    if x.rank > 6:
        raise Unsupported(f"a reduction over a rank {x.rank} tensor")
    layout = x.layout
    where_physical = inverse(layout)
    physical_axes = sorted(where_physical[a] for a in axes)
    out_logical = [1 if k in axes else v for k, v in enumerate(x.shape)] if keep else \
        [v for k, v in enumerate(x.shape) if k not in axes]
    tensor = builder.layer("Reduce", [x.tensor], {"function": function, "axes": physical_axes,
                                                  "keep_dims": keep})
    if keep:
        result = Value.runtime(tensor, out_logical, layout)
    else:
        kept = [p for p in layout if p not in axes]          # logical axes left, physical order
        renumber = {p: k for k, p in enumerate(sorted(kept))}
        result = Value.runtime(tensor, out_logical or [1],
                               [renumber[p] for p in kept] if kept else None)
    if node.op_type == "ReduceLogSum":
        result = unary_layer(builder, result, "ElementwiseUnary", {"function": "log"})
    return [result]


@converts("BatchNormalization")
def batch_normalization(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (BatchNormalization)"
    if attrs.int("training_mode", 0) or len([o for o in node.output if o]) > 1:
        raise Unsupported("training mode (running statistics as outputs)")
    attrs.ignore("momentum", "spatial")      # training-time and opset-8 leftovers
    x = inputs[0]
    params = inputs[1:5]
    if len(params) != 4 or any(p is None for p in params):
        raise ModelError(f"{where}: needs scale, bias, mean and variance")
    if x.rank < 2 or any(p.shape != (x.shape[1],) for p in params):
        raise ModelError(f"{where}: parameters of shape [{x.shape[1] if x.rank > 1 else '?'}] "
                         f"are needed, got {[list(p.shape) for p in params]}")
    epsilon = attrs.float("epsilon", 1e-5)
    scale, bias, mean, variance = params
    if x.is_const and all(p.is_const for p in params):
        from conformance.reference.normalization import batch_normalization as reference
        moved = np.moveaxis(x.const, 1, -1)
        y = reference(moved, mean.const, variance.const, scale.const, bias.const, epsilon)
        return [Value.constant(np.moveaxis(y, -1, 1).astype(np.float32))]
    # over the last physical axis: the channels (logical axis 1) go last
    if x.layout[-1] == 1:
        layout = x.layout
    else:
        layout = (0,) + tuple(range(2, x.rank)) + (1,)
    operands = [builder.float_tensor(x, layout)] + [builder.float_tensor(p)
                                                    for p in (mean, variance, scale, bias)]
    tensor = builder.layer("BatchNormalization", operands, {"epsilon": epsilon})
    return [Value.runtime(tensor, x.shape, layout)]


@converts("LayerNormalization")
def layer_normalization(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (LayerNormalization)"
    x, scale = inputs[0], inputs[1]
    attrs.ignore("stash_type")
    bias = inputs[2] if len(inputs) > 2 else None
    axis = _axis(attrs.int("axis", -1), x.rank, where)
    epsilon = attrs.float("epsilon", 1e-5)
    if x.is_const and scale.is_const and (bias is None or bias.is_const):
        from conformance.reference.normalization import layer_normalization as reference
        y = reference(x.const, scale.const, None if bias is None else bias.const, axis, epsilon)
        return [Value.constant(y.astype(np.float32))]
    trailing = tuple(range(axis, x.rank))
    layout = x.layout if x.layout[axis:] == trailing else tuple(range(x.rank))
    physical_axis = inverse(layout)[axis]
    operands = [builder.float_tensor(x, layout), builder.float_tensor(scale)]
    if bias is not None:
        operands.append(builder.float_tensor(bias))
    tensor = builder.layer("LayerNormalization", operands, {"axis": physical_axis,
                                                            "epsilon": epsilon})
    result = [Value.runtime(tensor, x.shape, layout)]
    if len([o for o in node.output if o]) > 1:
        from loader.onnx.ops.composite import layer_normalization_statistics
        result += layer_normalization_statistics(builder, x, axis, epsilon)
    return result
