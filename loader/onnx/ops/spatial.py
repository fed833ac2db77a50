"""Convolutions, pooling and Resize: NCHW in the model, NHWC on the backends. Each takes its
input in NHWC (one transpose where the layout is not that already) and leaves its output there,
so a chain of such layers pays for no transpose between them. The per-channel affine layers that
alone read a convolution's output (a BatchNormalization, or the Mul and Add tf2onnx writes for
one) are folded into the convolution's weights and bias, and a zero Pad that only a convolution
reads into its padding."""
import numpy as np

from loader.onnx.builder import NHWC, ints_of, require_const
from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.values import Unsupported, Value


def _spatial_rank(x: Value, where):
    if x.rank in (3, 4):
        return
    if x.rank >= 5:
        raise Unsupported(f"a {x.rank - 2}-D window (1-D and 2-D windows over NCL and NCHW "
                          f"tensors are supported)")
    raise ModelError(f"{where}: input of rank {x.rank}")


def _lift(builder, x: Value) -> Value:
    """A 1-D window's input [N, C, L] as the 2-D one [N, C, 1, L] (in NHWC: a reshape)."""
    if x.rank == 4:
        return x
    n, c, length = x.shape
    if x.is_const:
        return Value.constant(x.const[:, :, None, :])
    tensor = builder.physical(x, (0, 2, 1))
    tensor = builder.layer("Reshape", [tensor], {"shape": [n, 1, length, c]}, "/as_2d")
    return Value.runtime(tensor, (n, c, 1, length), NHWC)


def _lower(builder, y: Value, one_d: bool) -> Value:
    """The 2-D result [N, O, 1, L] of a lifted 1-D window as [N, O, L]."""
    if not one_d:
        return y
    n, o, _, length = y.shape
    tensor = builder.layer("Reshape", [y.tensor], {"shape": [n, length, o]}, "/as_1d")
    return Value.runtime(tensor, (n, o, length), (0, 2, 1))


def _per_axis(attrs, name, default, dims, where, minimum):
    """A window attribute with one value per spatial axis, as the 2-D one."""
    values = attrs.ints(name, default)
    if values is None or len(values) != dims or any(v < minimum for v in values):
        raise ModelError(f"{where}: {name} {values} ({dims} value(s) of at least {minimum})")
    return [1] * (2 - dims) + list(values) if minimum >= 1 else [0] * (2 - dims) + list(values)


def _pads(attrs, spatial, kernel, strides, dilations, where):
    """[top, bottom, left, right] from ONNX's pads ([begins..., ends...]) or auto_pad; for a
    1-D window the first axis is the lifted one (no padding)."""
    dims = len(spatial)
    auto = attrs.string("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = attrs.ints("pads", [0] * 2 * dims)
        if len(pads) != 2 * dims or any(p < 0 for p in pads):
            raise ModelError(f"{where}: pads {pads} ({2 * dims} non-negative values)")
        if dims == 1:
            return [0, 0, pads[0], pads[1]]
        return [pads[0], pads[2], pads[1], pads[3]]
    attrs.ignore("pads")
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ModelError(f"{where}: auto_pad {auto!r}")
    result = [0, 0] if dims == 1 else []
    for size, k, s, d in zip(spatial, kernel[2 - dims:], strides[2 - dims:], dilations[2 - dims:]):
        extent = (k - 1) * d + 1
        total = max((-(-size // s) - 1) * s + extent - size, 0)
        small, large = total // 2, total - total // 2
        result += [small, large] if auto == "SAME_UPPER" else [large, small]
    return result


def _window_attrs(attrs, x: Value, where, kernel=None):
    """(kernel, strides, dilations, pads) of a window over the 2-D (or lifted 1-D) input."""
    dims = x.rank - 2
    kernel = _per_axis(attrs, "kernel_shape", kernel, dims, where, 1)
    strides = _per_axis(attrs, "strides", [1] * dims, dims, where, 1)
    dilations = _per_axis(attrs, "dilations", [1] * dims, dims, where, 1)
    pads = _pads(attrs, x.shape[2:], kernel, strides, dilations, where)
    return kernel, strides, dilations, pads


def _per_channel(array, channels):
    """A constant that broadcasts over NCHW as one value per channel, as a [channels] vector;
    None for any other shape."""
    if array is None or array.dtype.kind != "f" or array.ndim > 4:
        return None
    padded = (1,) * (4 - array.ndim) + array.shape
    if padded[0] != 1 or padded[2:] != (1, 1) or padded[1] not in (1, channels):
        return None
    return np.broadcast_to(array.reshape(-1).astype(np.float64), (channels,))


def _batch_norm_affine(builder, bn, channels):
    if len(bn.input) < 5 or len([o for o in bn.output if o]) != 1:
        return None
    epsilon = 1e-5
    for attribute in bn.attribute:
        if attribute.name == "epsilon":
            epsilon = attribute.f
        elif attribute.name == "training_mode" and attribute.i:
            return None
        elif attribute.name not in ("momentum", "spatial", "training_mode"):
            return None
    params = [builder.constant_of(name) for name in bn.input[1:5]]
    if any(p is None or p.dtype.kind != "f" or p.shape != (channels,) for p in params):
        return None
    gamma, beta, mean, variance = (p.astype(np.float64) for p in params)
    scale = gamma / np.sqrt(variance + epsilon)
    return scale, beta - mean * scale


def _folded_affine(builder, node, channels):
    """The per-channel affine layers that follow a convolution, each the only reader of what
    comes before it (a BatchNormalization with constant statistics; a Mul, Div, Add or Sub by a
    constant of one value per channel: how tf2onnx writes batch normalization): (scale, shift,
    the outputs they produce), so that conv * scale + shift replaces them all; None if there is
    none."""
    scale, shift, absorbed = np.ones(channels), np.zeros(channels), []
    current = node.output[0]
    while True:
        readers = builder.readers.get(current, [])
        if len(readers) != 1 or current in builder.graph_outputs:
            break
        reader = readers[0]
        if reader.op_type == "BatchNormalization":
            step = _batch_norm_affine(builder, reader, channels)
            if step is None:
                break
            scale, shift = scale * step[0], shift * step[0] + step[1]
        elif reader.op_type in ("Mul", "Div", "Add", "Sub") and len(reader.input) == 2 \
                and not reader.attribute:
            first = reader.input[0] == current
            other = _per_channel(builder.constant_of(reader.input[1 if first else 0]), channels)
            if other is None or (reader.op_type in ("Div", "Sub") and not first):
                break
            if reader.op_type == "Mul":
                scale, shift = scale * other, shift * other
            elif reader.op_type == "Div":
                scale, shift = scale / other, shift / other
            elif reader.op_type == "Add":
                shift = shift + other
            else:
                shift = shift - other
        else:
            break
        absorbed.append(reader.output[0])
        current = reader.output[0]
    return (scale, shift, absorbed) if absorbed else None


@converts("Conv")
def conv(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Conv)"
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    _spatial_rank(x, where)
    if w.rank != x.rank:
        raise ModelError(f"{where}: weights of rank {w.rank} for an input of rank {x.rank}")
    groups = attrs.int("group", 1)
    out_channels, per_group = w.shape[:2]
    if groups < 1 or x.shape[1] % groups or out_channels % groups or per_group * groups != \
            x.shape[1]:
        raise ModelError(f"{where}: {groups} groups for {x.shape[1]} input channels and weights "
                         f"{list(w.shape)}")
    kernel, strides, dilations, pads = _window_attrs(attrs, x, where, list(w.shape[2:]))
    extra = builder.folded_pads.get(node.input[0])     # a zero Pad before it, folded in
    if extra is not None:
        pads = [p + q for p, q in zip(pads, extra)]
    one_d = x.rank == 3
    x, w = _lift(builder, x), _lift(builder, w) if w.is_const or one_d else w
    if kernel != list(w.shape[2:]):
        raise ModelError(f"{where}: kernel_shape {kernel} differs from the weights {list(w.shape)}")
    weights = w.const
    bias_const = bias.const if bias is not None and bias.is_const else None
    folded = _folded_affine(builder, node, out_channels) if weights is not None and \
        (bias is None or bias.is_const) else None
    if folded is not None:
        scale, shift, _ = folded
        weights = (weights.astype(np.float64) * scale.reshape(-1, 1, 1, 1)).astype(np.float32)
        base = bias_const.astype(np.float64) if bias_const is not None else 0.0
        bias_const = (base * scale + shift).astype(np.float32)
    descriptor = {"stride": strides, "dilation": dilations, "padding": pads}
    depthwise = groups == x.shape[1] and per_group == 1 and groups > 1
    if depthwise:
        w_tensor = builder.float_tensor(Value.constant(weights) if weights is not None else w,
                                        (1, 2, 3, 0))
        kind = "DepthwiseConvolution2d"
    else:
        w_tensor = builder.float_tensor(Value.constant(weights) if weights is not None else w,
                                        NHWC)
        kind = "Convolution2d"
        if groups != 1:
            descriptor["groups"] = groups
    operands = [builder.nhwc(x), w_tensor]
    if bias_const is not None:
        operands.append(builder.constant(bias_const.reshape(-1)))
    elif bias is not None:
        operands.append(builder.float_tensor(bias))
    tensor = builder.layer(kind, operands, descriptor)
    shape = _nchw_shape(builder, tensor)
    result = _lower(builder, Value.runtime(tensor, shape, NHWC), one_d)
    for name in (folded[2] if folded is not None else ()):
        builder.absorbed[name] = result
    return [result]


def _nchw_shape(builder, tensor):
    n, h, w, c = builder.net.tensor(tensor).shape
    return (n, c, h, w)


@converts("ConvTranspose")
def conv_transpose(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (ConvTranspose)"
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    _spatial_rank(x, where)
    groups = attrs.int("group", 1)
    if w.rank != x.rank or w.shape[0] != x.shape[1] or groups < 1 or x.shape[1] % groups:
        raise ModelError(f"{where}: weights {list(w.shape)} with {groups} groups for input "
                         f"{list(x.shape)}")
    dims = x.rank - 2
    kernel = _per_axis(attrs, "kernel_shape", list(w.shape[2:]), dims, where, 1)
    strides = _per_axis(attrs, "strides", [1] * dims, dims, where, 1)
    dilations = _per_axis(attrs, "dilations", [1] * dims, dims, where, 1)
    output_padding = _per_axis(attrs, "output_padding", [0] * dims, dims, where, 0)
    if kernel[2 - dims:] != list(w.shape[2:]):
        raise ModelError(f"{where}: kernel_shape {kernel} differs from the weights")
    one_d = dims == 1
    x, w = _lift(builder, x), _lift(builder, w)
    output_shape = attrs.ints("output_shape")
    auto = attrs.string("auto_pad", "NOTSET")
    if output_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        attrs.ignore("pads")
        if output_shape is None:
            output_shape = [s * i for s, i in zip(strides, x.shape[2:])]
        output_shape = [1] * (2 - len(output_shape[-dims:])) + list(output_shape[-dims:])
        pads = []
        for i in range(2):
            total = (strides[i] * (x.shape[2 + i] - 1) + output_padding[i]
                     + (kernel[i] - 1) * dilations[i] + 1 - output_shape[i])
            if total < 0:
                raise Unsupported(f"an output_shape {output_shape} larger than the full output")
            small, large = total // 2, total - total // 2
            pads += [small, large] if auto == "SAME_UPPER" else [large, small]
    else:
        pads = _pads(attrs, x.shape[4 - dims:], kernel, strides, dilations, where)
    operands = [builder.nhwc(x), builder.float_tensor(w, NHWC)]
    if bias is not None:
        operands.append(builder.float_tensor(bias))
    tensor = builder.layer("TransposeConvolution2d", operands, {
        "stride": strides, "dilation": dilations, "padding": pads,
        "output_padding": output_padding, "groups": groups})
    return [_lower(builder, Value.runtime(tensor, _nchw_shape(builder, tensor), NHWC), one_d)]


def _pool(builder, node, attrs, x, pool, extra):
    where = f"node {node.name!r} ({node.op_type})"
    _spatial_rank(x, where)
    if len([o for o in node.output if o]) > 1:
        raise Unsupported("MaxPool's indices output")
    kernel, strides, dilations, pads = _window_attrs(attrs, x, where)
    descriptor = {"pool": pool, "kernel": kernel, "stride": strides, "padding": pads,
                  "dilation": dilations, "ceil_mode": bool(attrs.int("ceil_mode", 0)), **extra}
    one_d = x.rank == 3
    tensor = builder.layer("Pooling2d", [builder.nhwc(_lift(builder, x))], descriptor)
    return [_lower(builder, Value.runtime(tensor, _nchw_shape(builder, tensor), NHWC), one_d)]


@converts("MaxPool")
def max_pool(builder, node, inputs, attrs, opset):
    if attrs.int("storage_order", 0):
        raise Unsupported("storage_order 1 (it only affects the indices output)")
    return _pool(builder, node, attrs, inputs[0], "max", {})


@converts("AveragePool")
def average_pool(builder, node, inputs, attrs, opset):
    return _pool(builder, node, attrs, inputs[0], "average",
                 {"count_include_pad": bool(attrs.int("count_include_pad", 0))})


@converts("LpPool")
def lp_pool(builder, node, inputs, attrs, opset):
    if attrs.int("p", 2) != 2:
        raise Unsupported(f"LpPool with p = {attrs.int('p', 2)} (p = 2 is supported)")
    return _pool(builder, node, attrs, inputs[0], "l2", {})


@converts("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(builder, node, inputs, attrs, opset):
    """A reduction over every spatial axis, in the input's own layout."""
    x = inputs[0]
    if x.rank < 3:
        raise ModelError(f"node {node.name!r} ({node.op_type}): input of rank {x.rank}")
    if node.op_type == "GlobalLpPool" and attrs.int("p", 2) != 2:
        raise Unsupported(f"GlobalLpPool with p = {attrs.int('p', 2)} (p = 2 is supported)")
    function = {"GlobalAveragePool": "mean", "GlobalMaxPool": "max", "GlobalLpPool": "l2"}[
        node.op_type]
    if x.rank == 4 and x.layout != NHWC and not x.is_const:
        x = Value.runtime(builder.nhwc(x), x.shape, NHWC)   # where a convolution will want it
    layout = x.layout
    physical = sorted(layout.index(a) for a in range(2, x.rank))
    tensor = builder.layer("Reduce", [builder.float_tensor(x, layout)],
                           {"function": function, "axes": physical, "keep_dims": True})
    return [Value.runtime(tensor, x.shape[:2] + (1,) * (x.rank - 2), layout)]


@converts("Resize", since=11)
def resize(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Resize)"
    x = inputs[0]
    if x.rank != 4:
        raise Unsupported(f"a Resize of a rank {x.rank} tensor (NCHW images are supported)")
    if attrs.int("antialias", 0):
        raise Unsupported("antialias")
    axes = attrs.ints("axes")
    if axes is not None:
        axes = [a % 4 for a in axes]
        if sorted(axes) != [2, 3]:
            raise Unsupported(f"Resize over axes {attrs.ints('axes')} (H and W are supported)")
    mode = attrs.string("mode", "nearest")
    transform = attrs.string("coordinate_transformation_mode", "half_pixel")
    attrs.ignore("extrapolation_value")      # used by tf_crop_and_resize alone
    if transform == "tf_crop_and_resize":
        raise Unsupported("coordinate_transformation_mode tf_crop_and_resize")
    scales = inputs[2] if len(inputs) > 2 else None
    sizes = inputs[3] if len(inputs) > 3 else None
    for given, what in ((scales, "scales"), (sizes, "sizes")):
        if given is not None and not given.is_const:
            raise Unsupported(f"the {what} must be a constant (known when the model is loaded)")
    scales = [float(v) for v in require_const(scales, where, "the scales").reshape(-1)] \
        if scales is not None and scales.const is not None and scales.const.size else None
    sizes = ints_of(sizes, where, "the sizes") if sizes is not None else None
    if axes == [3, 2]:          # scales and sizes list the axes in the order of ``axes``
        scales = scales[::-1] if scales is not None else None
        sizes = sizes[::-1] if sizes is not None else None
    if sizes is not None:
        sizes = sizes[-2:] if len(sizes) in (2, 4) else None
        if sizes is None:
            raise ModelError(f"{where}: sizes for a 4-D input")
        if len(inputs[3].const.reshape(-1)) == 4 and \
                list(inputs[3].const.reshape(-1)[:2]) != list(x.shape[:2]):
            raise Unsupported("a Resize of N or C")
        policy = attrs.string("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            ratio = (min if policy == "not_larger" else max)(
                sizes[0] / x.shape[2], sizes[1] / x.shape[3])
            sizes = [int(round(ratio * x.shape[2])), int(round(ratio * x.shape[3]))]
            scale = [ratio, ratio]
        else:
            scale = [sizes[0] / x.shape[2], sizes[1] / x.shape[3]]
    elif scales is not None:
        if len(scales) == 4 and scales[:2] != [1.0, 1.0]:
            raise Unsupported("a Resize of N or C")
        scale = scales[-2:]
        if min(scale) <= 0:
            raise ModelError(f"{where}: scales {scales}")
        sizes = [int(np.floor(x.shape[2] * scale[0])), int(np.floor(x.shape[3] * scale[1]))]
    else:
        raise ModelError(f"{where}: neither scales nor sizes")
    if min(sizes) < 1:
        raise Unsupported(f"a Resize to an empty output ({sizes})")
    descriptor = {"size": sizes, "mode": mode, "coordinate_transformation": transform,
                  "nearest_mode": attrs.string("nearest_mode", "round_prefer_floor"),
                  "scale": scale, "cubic_coeff_a": attrs.float("cubic_coeff_a", -0.75),
                  "exclude_outside": bool(attrs.int("exclude_outside", 0))}
    tensor = builder.layer("Resize", [builder.nhwc(x)], descriptor)
    return [Value.runtime(tensor, _nchw_shape(builder, tensor), NHWC)]
