"""Operators with no layer of their own, expressed as a few layers: RMSNormalization,
InstanceNormalization, GroupNormalization, MeanVarianceNormalization, LpNormalization, and
LayerNormalization's optional Mean and InvStdDev outputs. Each works in the logical layout."""
import numpy as np

from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.ops.shape import _reshaped
from loader.onnx.values import Unsupported, Value


class _Layers:
    """Small arithmetic over logical tensors of one node."""

    def __init__(self, builder):
        self.b = builder

    def run(self, kind, values, descriptor=None, shape=None):
        tensors = [self.b.float_tensor(v) for v in values]
        out = self.b.layer(kind, tensors, descriptor)
        return Value.runtime(out, shape if shape is not None else self.b.net.tensor(out).shape)

    def binary(self, kind, a, b):
        rank = max(a.rank, b.rank)

        def padded(v):
            if v.rank == rank:
                return v
            if v.is_const:
                return Value.constant(v.const.reshape((1,) * (rank - v.rank) + v.shape))
            return _reshaped(self.b, v, (1,) * (rank - v.rank) + v.shape)
        return self.run(kind, [padded(a), padded(b)])

    def mean(self, x, axes):
        return self.run("Reduce", [x], {"function": "mean", "axes": list(axes), "keep_dims": True})

    def rsqrt_plus(self, x, epsilon):
        shifted = self.binary("Addition", x, Value.constant(np.float32(epsilon)))
        return self.run("ElementwiseUnary", [shifted], {"function": "rsqrt"})

    def normalized(self, x, axes, epsilon):
        """(x - mean) / sqrt(variance + epsilon) over ``axes``, and the mean and 1/std."""
        mean = self.mean(x, axes)
        centered = self.binary("Subtraction", x, mean)
        variance = self.mean(self.binary("Multiplication", centered, centered), axes)
        inverse_std = self.rsqrt_plus(variance, epsilon)
        return self.binary("Multiplication", centered, inverse_std), mean, inverse_std


def _axis(axis, rank, where):
    if not -rank <= axis < rank:
        raise ModelError(f"{where}: axis {axis} is out of range for rank {rank}")
    return axis % rank


@converts("RMSNormalization")
def rms_normalization(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (RMSNormalization)"
    x, scale = inputs[0], inputs[1]
    attrs.ignore("stash_type")
    axis = _axis(attrs.int("axis", -1), x.rank, where)
    layers = _Layers(builder)
    squares = layers.binary("Multiplication", x, x)
    inverse_rms = layers.rsqrt_plus(layers.mean(squares, range(axis, x.rank)),
                                    attrs.float("epsilon", 1e-5))
    return [layers.binary("Multiplication", layers.binary("Multiplication", x, inverse_rms),
                          scale)]


@converts("InstanceNormalization")
def instance_normalization(builder, node, inputs, attrs, opset):
    x, scale, bias = inputs[:3]
    if x.rank < 3:
        raise ModelError(f"node {node.name!r} (InstanceNormalization): input of rank {x.rank}")
    layers = _Layers(builder)
    y, _, _ = layers.normalized(x, range(2, x.rank), attrs.float("epsilon", 1e-5))
    channel = (1, x.shape[1]) + (1,) * (x.rank - 2)
    y = layers.binary("Multiplication", y, _reshaped(builder, scale, channel))
    return [layers.binary("Addition", y, _reshaped(builder, bias, channel))]


@converts("GroupNormalization", since=18)
def group_normalization(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (GroupNormalization)"
    x, scale, bias = inputs[:3]
    groups = attrs.int("num_groups")
    attrs.ignore("stash_type")
    if x.rank < 3 or groups is None or groups < 1 or x.shape[1] % groups:
        raise ModelError(f"{where}: {groups} groups for input {list(x.shape)}")
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    layers = _Layers(builder)
    grouped = _reshaped(builder, x, (n, groups, c // groups) + spatial)
    y, _, _ = layers.normalized(grouped, range(2, grouped.rank), attrs.float("epsilon", 1e-5))
    y = _reshaped(builder, y, x.shape)
    per = scale.shape[0] if scale.rank == 1 else 0
    if per == groups and groups != c:       # opset 18: one scale and bias per group
        repeat = lambda v: Value.constant(np.repeat(v.const, c // groups)) if v.is_const \
            else None  # noqa: E731
        scale, bias = repeat(scale), repeat(bias)
        if scale is None or bias is None:
            raise Unsupported("per-group scale and bias given at run time")
    channel = (1, c) + (1,) * len(spatial)
    y = layers.binary("Multiplication", y, _reshaped(builder, scale, channel))
    return [layers.binary("Addition", y, _reshaped(builder, bias, channel))]


@converts("MeanVarianceNormalization")
def mean_variance_normalization(builder, node, inputs, attrs, opset):
    x = inputs[0]
    axes = [_axis(a, x.rank, f"node {node.name!r}") for a in attrs.ints("axes", [0, 2, 3])]
    layers = _Layers(builder)
    y, _, _ = layers.normalized(x, sorted(set(axes)), 1e-9)
    return [y]


@converts("LpNormalization")
def lp_normalization(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (LpNormalization)"
    x = inputs[0]
    axis = _axis(attrs.int("axis", -1), x.rank, where)
    p = attrs.int("p", 2)
    if p not in (1, 2):
        raise ModelError(f"{where}: p {p} (1 or 2)")
    layers = _Layers(builder)
    norm = layers.run("Reduce", [x], {"function": "l1" if p == 1 else "l2", "axes": [axis],
                                      "keep_dims": True})
    # ONNX gives 0 where the norm is 0 (x is 0 there too): divide by at least the smallest
    # normal float instead of 0
    floor = Value.constant(np.float32(np.finfo(np.float32).tiny))
    return [layers.binary("Division", x, layers.binary("Maximum", norm, floor))]


def layer_normalization_statistics(builder, x, axis, epsilon):
    """LayerNormalization's Mean and InvStdDev outputs (the normalized axes kept, of extent 1)."""
    layers = _Layers(builder)
    _, mean, inverse_std = layers.normalized(x, range(axis, x.rank), epsilon)
    return mean, inverse_std
