"""Layers over the two spatial axes of NHWC tensors: Convolution2d (grouped and depthwise as
cases of it), DepthwiseConvolution2d, TransposeConvolution2d, Pooling2d and Resize."""
from loader.errors import InvalidLayerError
from loader.layers._table import LayerType
from loader.layers._values import boolean, choice, integer, pair, padding, rank, real

POOLING_TYPES = {"max": 0, "average": 1, "l2": 2}
RESIZE_MODES = {"nearest": 0, "linear": 1, "cubic": 2}
COORDINATE_TRANSFORMATIONS = {"half_pixel": 0, "half_pixel_symmetric": 1,
                              "pytorch_half_pixel": 2, "align_corners": 3, "asymmetric": 4,
                              "tf_half_pixel_for_nn": 5}
NEAREST_MODES = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}


def _window(layer, axis, size, pad_before, pad_after, extent, stride):
    padded = size + pad_before + pad_after
    if extent > padded:
        raise InvalidLayerError(f"{layer}: the kernel spans {extent} along {axis}, more than the "
                                f"padded input ({padded})")
    return (padded - extent) // stride + 1


def _convolution(depthwise):
    layer = "DepthwiseConvolution2d" if depthwise else "Convolution2d"

    def rule(d, shapes):
        stride = pair(layer, "stride", d["stride"], 1)
        dilation = pair(layer, "dilation", d["dilation"], 1)
        top, bottom, left, right = padding(layer, d["padding"])
        groups = 1 if depthwise else integer(layer, "groups", d["groups"], 1)
        x, w = shapes[0], shapes[1]
        rank(layer, "the input [N, H, W, C]", x, 4)
        if depthwise:
            rank(layer, "the weights [1, kH, kW, C*m]", w, 4)
            if w[0] != 1 or w[3] % x[3] != 0:
                raise InvalidLayerError(f"{layer}: weights {list(w)} must be [1, kH, kW, C*m] "
                                        f"with C = {x[3]}")
            channels = w[3]
        else:
            rank(layer, "the weights [O, kH, kW, C/groups]", w, 4)
            if x[3] % groups or w[0] % groups:
                raise InvalidLayerError(f"{layer}: {groups} groups do not divide the input "
                                        f"channels ({x[3]}) and the outputs ({w[0]}) evenly")
            if w[3] * groups != x[3]:
                if groups == 1:
                    raise InvalidLayerError(f"{layer}: weights {list(w)} have C = {w[3]}, the "
                                            f"input {list(x)} has C = {x[3]}")
                raise InvalidLayerError(f"{layer}: weights {list(w)} have C/groups = {w[3]}, the "
                                        f"input {list(x)} in {groups} groups has "
                                        f"{x[3] // groups} channels per group")
            channels = w[0]
        if len(shapes) == 3 and tuple(shapes[2]) != (channels,):
            raise InvalidLayerError(f"{layer}: bias must have shape [{channels}], "
                                    f"got {list(shapes[2])}")
        oh = _window(layer, "height", x[1], top, bottom, (w[1] - 1) * dilation[0] + 1, stride[0])
        ow = _window(layer, "width", x[2], left, right, (w[2] - 1) * dilation[1] + 1, stride[1])
        return (x[0], oh, ow, channels), {
            "stride_y": stride[0], "stride_x": stride[1], "pad_top": top, "pad_bottom": bottom,
            "pad_left": left, "pad_right": right, "dilation_y": dilation[0],
            "dilation_x": dilation[1], "bias_enabled": int(len(shapes) == 3),
            "groups": groups}, 3 if groups != 1 else 1
    return rule


def _transpose_convolution(d, shapes):
    layer = "TransposeConvolution2d"
    stride = pair(layer, "stride", d["stride"], 1)
    dilation = pair(layer, "dilation", d["dilation"], 1)
    output_padding = pair(layer, "output_padding", d["output_padding"], 0)
    top, bottom, left, right = padding(layer, d["padding"])
    groups = integer(layer, "groups", d["groups"], 1)
    x, w = shapes[0], shapes[1]
    rank(layer, "the input [N, H, W, C]", x, 4)
    rank(layer, "the weights [C, kH, kW, O/groups]", w, 4)
    if w[0] != x[3]:
        raise InvalidLayerError(f"{layer}: weights {list(w)} have C = {w[0]}, the input "
                                f"{list(x)} has C = {x[3]}")
    if x[3] % groups:
        raise InvalidLayerError(f"{layer}: {groups} groups do not divide the input channels "
                                f"({x[3]}) evenly")
    channels = w[3] * groups
    for axis, extra in enumerate(output_padding):
        if extra >= max(stride[axis], dilation[axis]):
            raise InvalidLayerError(f"{layer}: output_padding {output_padding} must be smaller "
                                    f"than the stride or the dilation")
    if len(shapes) == 3 and tuple(shapes[2]) != (channels,):
        raise InvalidLayerError(f"{layer}: bias must have shape [{channels}], "
                                f"got {list(shapes[2])}")
    size = []
    for axis, (inp, k, before, after) in enumerate(((x[1], w[1], top, bottom),
                                                     (x[2], w[2], left, right))):
        out = (stride[axis] * (inp - 1) + output_padding[axis] + (k - 1) * dilation[axis] + 1
               - before - after)
        if out < 1:
            raise InvalidLayerError(f"{layer}: the padding {[top, bottom, left, right]} leaves "
                                    f"no output along {('height', 'width')[axis]}")
        size.append(out)
    return (x[0], size[0], size[1], channels), {
        "stride_y": stride[0], "stride_x": stride[1], "pad_top": top, "pad_bottom": bottom,
        "pad_left": left, "pad_right": right, "output_padding_y": output_padding[0],
        "output_padding_x": output_padding[1], "dilation_y": dilation[0],
        "dilation_x": dilation[1], "groups": groups, "bias_enabled": int(len(shapes) == 3)}


def _pooled_extent(size, before, after, extent, stride, ceil_mode):
    """ONNX's (and ONNX Runtime's) output extent; with ceil_mode, a last window that would
    start in the end padding is not made."""
    span = size + before + after - extent
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + before:
        out -= 1
    return out


def _pooling(d, shapes):
    layer = "Pooling2d"
    pool = choice(layer, "pool", d["pool"], POOLING_TYPES)
    kernel = pair(layer, "kernel", d["kernel"], 1)
    stride = pair(layer, "stride", d["stride"], 1)
    dilation = pair(layer, "dilation", d["dilation"], 1)
    ceil_mode = boolean(layer, "ceil_mode", d["ceil_mode"])
    include_pad = boolean(layer, "count_include_pad", d["count_include_pad"])
    top, bottom, left, right = padding(layer, d["padding"])
    x = shapes[0]
    rank(layer, "the input [N, H, W, C]", x, 4)
    if top >= kernel[0] or bottom >= kernel[0] or left >= kernel[1] or right >= kernel[1]:
        raise InvalidLayerError(f"{layer}: padding {[top, bottom, left, right]} must be smaller "
                                f"than the kernel {kernel}")
    extents = [(kernel[a] - 1) * dilation[a] + 1 for a in range(2)]
    for axis, (size, before, after) in enumerate(((x[1], top, bottom), (x[2], left, right))):
        if extents[axis] > size + before + after:
            raise InvalidLayerError(f"{layer}: the kernel spans {extents[axis]} along "
                                    f"{('height', 'width')[axis]}, more than the padded input "
                                    f"({size + before + after})")
    oh = _pooled_extent(x[1], top, bottom, extents[0], stride[0], ceil_mode)
    ow = _pooled_extent(x[2], left, right, extents[1], stride[1], ceil_mode)
    minor = 3 if (pool == 2 or ceil_mode or include_pad or dilation != [1, 1]) else 1
    return (x[0], oh, ow, x[3]), {
        "pool_type": pool, "kernel_y": kernel[0], "kernel_x": kernel[1], "stride_y": stride[0],
        "stride_x": stride[1], "pad_top": top, "pad_bottom": bottom, "pad_left": left,
        "pad_right": right, "ceil_mode": int(ceil_mode), "count_include_pad": int(include_pad),
        "dilation_y": dilation[0], "dilation_x": dilation[1]}, minor


def _resize(d, shapes):
    layer = "Resize"
    x = shapes[0]
    rank(layer, "the input [N, H, W, C]", x, 4)
    size = pair(layer, "size", d["size"], 1)
    mode = choice(layer, "mode", d["mode"], RESIZE_MODES)
    transform = d["coordinate_transformation"]
    if transform == "tf_crop_and_resize":
        raise InvalidLayerError(f"{layer}: coordinate_transformation 'tf_crop_and_resize' is not "
                                f"supported (it needs a region of interest)")
    transform = choice(layer, "coordinate_transformation", transform, COORDINATE_TRANSFORMATIONS)
    nearest = choice(layer, "nearest_mode", d["nearest_mode"], NEAREST_MODES)
    if d["scale"] is None:
        scale = [size[0] / x[1], size[1] / x[2]]
    else:
        if not isinstance(d["scale"], (list, tuple)) or len(d["scale"]) != 2:
            raise TypeError(f"{layer}: 'scale' must be [y, x], not {d['scale']!r}")
        scale = [real(layer, "scale", v, positive=True) for v in d["scale"]]
    return (x[0], size[0], size[1], x[3]), {
        "mode": mode, "coordinate_transformation": transform, "nearest_mode": nearest,
        "scale_y": scale[0], "scale_x": scale[1],
        "cubic_coeff_a": real(layer, "cubic_coeff_a", d["cubic_coeff_a"]),
        "exclude_outside": int(boolean(layer, "exclude_outside", d["exclude_outside"]))}


_CONVOLUTION_DEFAULTS = {"stride": [1, 1], "padding": 0, "dilation": [1, 1]}

LAYERS = [
    LayerType("Convolution2d", 4, ("x", "w", "bias"), {**_CONVOLUTION_DEFAULTS, "groups": 1},
              _convolution(False)),
    LayerType("DepthwiseConvolution2d", 5, ("x", "w", "bias"), _CONVOLUTION_DEFAULTS,
              _convolution(True)),
    LayerType("Pooling2d", 6, ("x",),
              {"pool": None, "kernel": None, "stride": [1, 1], "padding": 0, "ceil_mode": False,
               "count_include_pad": False, "dilation": [1, 1]},
              _pooling, required=("pool", "kernel")),
    LayerType("Resize", 20, ("x",),
              {"size": None, "mode": "nearest", "coordinate_transformation": "half_pixel",
               "nearest_mode": "round_prefer_floor", "scale": None, "cubic_coeff_a": -0.75,
               "exclude_outside": False},
              _resize, since_minor=3, required=("size",)),
    LayerType("TransposeConvolution2d", 25, ("x", "w", "bias"),
              {**_CONVOLUTION_DEFAULTS, "output_padding": [0, 0], "groups": 1},
              _transpose_convolution, since_minor=3),
]
