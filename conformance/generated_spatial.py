"""Generated cases (LAYER-3) of the spatial layers and members of Backend API 1.3: grouped
convolution (depthwise as the case groups = channels), transposed convolution (stride, padding,
output_padding, dilation, groups), the pooling members (ceil_mode with windows that start in the
padding, count_include_pad, dilation, L2 pooling) and Resize (every mode, coordinate
transformation and nearest mode, up and down, non-integer ratios, a given scale, cubic's
coefficient and exclude_outside).
"""
import math

import numpy as np

from conformance.families import register_families
from conformance.layer_runs import spec
from conformance.sweeps import fixed_rng


def _grouped_convolution():
    rng = fixed_rng("grouped-convolution")
    specs = []

    def add(x, groups, per_group_out, kernel, bias=False, **d):
        o = groups * per_group_out
        shapes = [x, [o, kernel[0], kernel[1], x[3] // groups]] + ([[o]] if bias else [])
        specs.append(spec("gconv", len(specs), "Convolution2d", shapes, {"groups": groups, **d}))
    for c, groups in ((4, 2), (6, 3), (8, 4), (6, 2), (9, 3), (16, 8)):
        for per_group_out in (1, 2, 3):
            add([1, 6, 5, c], groups, per_group_out, (3, 3), bias=per_group_out == 2,
                padding=[1, 1, 1, 1])
    for c in (3, 8, 17):  # depthwise, as a grouped convolution with one group per channel
        for multiplier in (1, 2):
            add([1, 7, 6, c], c, multiplier, (3, 3), bias=multiplier == 1, padding=[1, 0, 2, 1])
    for stride, dilation in (([2, 2], [1, 1]), ([1, 2], [2, 1]), ([3, 1], [1, 3])):
        add([2, 9, 8, 6], 3, 2, (3, 2), stride=stride, dilation=dilation,
            padding=[rng.randint(0, 2) for _ in range(4)])
    add([1, 5, 5, 4], 2, 2, (1, 1))
    add([1, 6, 6, 12], 4, 5, (5, 5), padding=[2, 2, 2, 2])
    return specs


def _deconvolution():
    rng = fixed_rng("deconvolution")
    specs = []

    def add(x, per_group_out, kernel, groups=1, bias=False, **d):
        shapes = [x, [x[3], kernel[0], kernel[1], per_group_out]] + \
            ([[per_group_out * groups]] if bias else [])
        specs.append(spec("deconv", len(specs), "TransposeConvolution2d", shapes,
                          {"groups": groups, **d}))
    for stride in ([1, 1], [2, 2], [3, 2], [1, 3]):
        add([1, 4, 3, 3], 2, (3, 3), stride=stride)
        add([1, 3, 4, 2], 3, (2, 3), stride=stride, padding=[1, 0, 1, 1], bias=True)
    for stride, output_padding in (([2, 2], [1, 1]), ([3, 3], [2, 1]), ([2, 3], [0, 2])):
        add([1, 3, 3, 4], 2, (3, 3), stride=stride, output_padding=output_padding,
            padding=[1, 1, 1, 1])
    for dilation in ([2, 2], [1, 3]):
        add([1, 4, 4, 2], 2, (3, 2), dilation=dilation, stride=[2, 1],
            output_padding=[1, 0])
    for groups, per_group_out in ((2, 1), (2, 3), (3, 2), (4, 1)):
        add([1, 4, 3, groups * 2], per_group_out, (3, 3), groups=groups, stride=[2, 2],
            output_padding=[1, 0], padding=[rng.randint(0, 1) for _ in range(4)],
            bias=groups == 2)
    add([2, 5, 5, 8], 8, (1, 1))
    return specs


def _pool_modes():
    specs = []

    def add(pool, x, kernel, **d):
        specs.append(spec("pool13", len(specs), "Pooling2d", [x], {"pool": pool, "kernel": kernel,
                                                                   **d}))
    # ceil_mode: a last window that starts in the input or the top padding but ends past it,
    # and sizes where ceil would start one in the end padding (not made).
    for pool in ("max", "average", "l2"):
        for x, kernel, stride, padding in (([1, 5, 5, 2], [2, 2], [2, 2], [0, 0, 0, 0]),
                                           ([1, 6, 7, 3], [3, 3], [2, 2], [1, 1, 1, 1]),
                                           ([1, 5, 6, 2], [3, 2], [3, 2], [1, 0, 1, 1]),
                                           ([2, 4, 4, 2], [2, 2], [3, 3], [1, 1, 1, 1]),
                                           ([1, 7, 5, 2], [3, 3], [2, 3], [2, 1, 0, 2])):
            add(pool, x, kernel, stride=stride, padding=padding, ceil_mode=True)
    # count_include_pad, with and without ceil_mode, each padding side alone.
    for include in (True, False):
        for padding in ([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 1, 1, 1],
                        [2, 1, 1, 2]):
            add("average", [1, 6, 5, 3], [3, 3], stride=[2, 1], padding=padding,
                count_include_pad=include)
        add("average", [1, 5, 5, 2], [2, 2], stride=[2, 2], padding=[1, 1, 1, 1],
            ceil_mode=True, count_include_pad=include)
    # dilation, for every pool type.
    for pool in ("max", "average", "l2"):
        for dilation in ([2, 2], [1, 3], [3, 1]):
            add(pool, [1, 9, 9, 2], [2, 3], dilation=dilation, padding=[1, 1, 1, 1],
                stride=[1, 2])
        add(pool, [1, 8, 8, 3], [3, 3], dilation=[2, 2], stride=[2, 2], padding=[2, 2, 2, 2],
            ceil_mode=True, count_include_pad=pool == "average")
    # L2 pooling without the other members.
    for x, kernel, stride, padding in (([1, 6, 6, 4], [2, 2], [2, 2], [0, 0, 0, 0]),
                                       ([2, 5, 7, 3], [3, 3], [1, 2], [1, 1, 1, 1])):
        add("l2", x, kernel, stride=stride, padding=padding)
    return specs


TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
# (input H, W) -> output (H, W): up, down, by non-integer ratios, to 1
EXTENTS = [((4, 5), (8, 10)), ((8, 6), (4, 3)), ((5, 7), (7, 3)), ((3, 4), (9, 6)),
           ((6, 4), (4, 7)), ((4, 4), (1, 3))]


def _stable_nearest(in_len, out_len, transform, mode) -> bool:
    """Whether no output of one axis lies on a rounding boundary of ``mode`` (a half for the
    round modes, an integer for floor and ceil), unless the scale a backend is given, a float32,
    is the exact ratio (then the coordinates are exact in any precision). On a boundary, the
    index would depend on how the coordinate was computed, not on the layer."""
    from conformance.reference.spatial import _source_coordinate
    ratio = out_len / in_len
    if float(np.float32(ratio)) == ratio:
        return True
    for x in range(out_len):
        position = _source_coordinate(x, ratio, in_len, out_len, transform)
        fraction = position - math.floor(position)
        boundary = 0.5 if mode.startswith("round") else 0.0
        if min(abs(fraction - boundary), abs(fraction - boundary - 1)) < 1e-5:
            return False
    return True


def _resize():
    specs = []

    def add(size_in, size_out, **d):
        x = [1 + len(specs) % 2, size_in[0], size_in[1], 2]
        specs.append(spec("resize", len(specs), "Resize", [x], {"size": list(size_out), **d}))
    for transform in TRANSFORMS:
        for mode in NEAREST_MODES:
            for size_in, size_out in EXTENTS:
                if all(_stable_nearest(i, o, transform, mode) for i, o in zip(size_in, size_out)):
                    add(size_in, size_out, mode="nearest", coordinate_transformation=transform,
                        nearest_mode=mode)
    for transform in TRANSFORMS[:5]:  # tf_half_pixel_for_nn is for nearest
        for size_in, size_out in EXTENTS:
            add(size_in, size_out, mode="linear", coordinate_transformation=transform)
        for exclude in (False, True):
            for size_in, size_out in EXTENTS[:4]:
                add(size_in, size_out, mode="cubic", coordinate_transformation=transform,
                    exclude_outside=exclude, cubic_coeff_a=-0.5 if exclude else -0.75)
    # A scale given beside the size (ONNX's scales input), which the coordinates follow.
    add((4, 5), (7, 9), mode="linear", scale=[1.7, 1.9])
    add((4, 5), (7, 9), mode="cubic", coordinate_transformation="asymmetric", scale=[1.6, 2.0])
    return specs


register_families({"grouped-convolution": _grouped_convolution,
                   "deconvolution": _deconvolution, "pool-modes": _pool_modes,
                   "resize": _resize}, "LAYER-3")
