"""Convolutions, pooling and Resize: NCHW in the model, NHWC on the backends. Each takes its
input in NHWC (one transpose where the layout is not that already) and leaves its output there,
so a chain of such layers pays for no transpose between them. A BatchNormalization that alone
reads a convolution's output is folded into the convolution's weights."""
import numpy as np

from loader.onnx.builder import NHWC, ints_of, require_const
from loader.onnx.errors import ModelError
from loader.onnx.ops import converts
from loader.onnx.values import Unsupported, Value


def _spatial_rank(x: Value, where):
    if x.rank == 4:
        return
    if x.rank >= 3:
        raise Unsupported(f"a {x.rank - 2}-D window (2-D windows over NCHW tensors are "
                          f"supported)")
    raise ModelError(f"{where}: input of rank {x.rank}")


def _pads(attrs, x_hw, kernel, strides, dilations, where, transposed=False):
    """[top, bottom, left, right] from ONNX's pads ([y_begin, x_begin, y_end, x_end]) or
    auto_pad."""
    auto = attrs.string("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = attrs.ints("pads", [0, 0, 0, 0])
        if len(pads) != 4 or any(p < 0 for p in pads):
            raise ModelError(f"{where}: pads {pads} (four non-negative values for 2-D)")
        return [pads[0], pads[2], pads[1], pads[3]]
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ModelError(f"{where}: auto_pad {auto!r}")
    result = []
    for size, k, s, d in zip(x_hw, kernel, strides, dilations):
        extent = (k - 1) * d + 1
        total = max((-(-size // s) - 1) * s + extent - size, 0)
        small, large = total // 2, total - total // 2
        result += [small, large] if auto == "SAME_UPPER" else [large, small]
    return result


def _window_attrs(attrs, x: Value, where, kernel=None):
    kernel = attrs.ints("kernel_shape", kernel)
    if kernel is None or len(kernel) != 2 or any(k < 1 for k in kernel):
        raise ModelError(f"{where}: kernel_shape {kernel} (two positive values for 2-D)")
    strides = attrs.ints("strides", [1, 1])
    dilations = attrs.ints("dilations", [1, 1])
    if len(strides) != 2 or len(dilations) != 2 or min(strides + dilations) < 1:
        raise ModelError(f"{where}: strides {strides} and dilations {dilations}")
    pads = _pads(attrs, x.shape[2:], kernel, strides, dilations, where)
    return kernel, strides, dilations, pads


def _folded_batch_norm(builder, node):
    """The BatchNormalization that alone reads this node's output, when its parameters are
    constants: (scale, shift, its output name), so that conv * scale + shift replaces both."""
    readers = builder.readers.get(node.output[0], [])
    if len(readers) != 1 or node.output[0] in builder.graph_outputs:
        return None
    bn = readers[0]
    if bn.op_type != "BatchNormalization" or len(bn.input) < 5 or len(
            [o for o in bn.output if o]) != 1:
        return None
    params = [builder.constant_of(name) for name in bn.input[1:5]]
    if any(p is None for p in params):
        return None
    epsilon = 1e-5
    for attribute in bn.attribute:
        if attribute.name == "epsilon":
            epsilon = attribute.f
    gamma, beta, mean, variance = (p.astype(np.float64).reshape(-1) for p in params)
    scale = gamma / np.sqrt(variance + epsilon)
    return scale, beta - mean * scale, bn.output[0]


@converts("Conv")
def conv(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Conv)"
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    _spatial_rank(x, where)
    if w.rank != 4:
        raise ModelError(f"{where}: weights of rank {w.rank}")
    groups = attrs.int("group", 1)
    out_channels, per_group, kh, kw = w.shape
    if groups < 1 or x.shape[1] % groups or out_channels % groups or per_group * groups != \
            x.shape[1]:
        raise ModelError(f"{where}: {groups} groups for {x.shape[1]} input channels and weights "
                         f"{list(w.shape)}")
    kernel, strides, dilations, pads = _window_attrs(attrs, x, where, [kh, kw])
    if kernel != [kh, kw]:
        raise ModelError(f"{where}: kernel_shape {kernel} differs from the weights {list(w.shape)}")
    weights = w.const
    bias_const = require_const(bias, where, "the bias") if bias is not None else None
    folded = _folded_batch_norm(builder, node) if weights is not None and \
        (bias is None or bias.is_const) else None
    if folded is not None:
        scale, shift, bn_output = folded
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
    result = Value.runtime(tensor, shape, NHWC)
    if folded is not None:
        builder.absorbed[folded[2]] = result
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
    if w.rank != 4 or w.shape[0] != x.shape[1] or groups < 1 or x.shape[1] % groups:
        raise ModelError(f"{where}: weights {list(w.shape)} with {groups} groups for input "
                         f"{list(x.shape)}")
    kernel = attrs.ints("kernel_shape", list(w.shape[2:]))
    strides = attrs.ints("strides", [1, 1])
    dilations = attrs.ints("dilations", [1, 1])
    output_padding = attrs.ints("output_padding", [0, 0])
    if kernel != list(w.shape[2:]) or len(strides) != 2 or len(dilations) != 2 or \
            len(output_padding) != 2:
        raise ModelError(f"{where}: kernel_shape, strides, dilations or output_padding")
    output_shape = attrs.ints("output_shape")
    auto = attrs.string("auto_pad", "NOTSET")
    if output_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        if output_shape is None:
            output_shape = [s * i for s, i in zip(strides, x.shape[2:])]
        output_shape = output_shape[-2:]
        pads = []
        for i in range(2):
            total = (strides[i] * (x.shape[2 + i] - 1) + output_padding[i]
                     + (kernel[i] - 1) * dilations[i] + 1 - output_shape[i])
            if total < 0:
                raise Unsupported(f"an output_shape {output_shape} larger than the full output")
            small, large = total // 2, total - total // 2
            pads += [small, large] if auto == "SAME_UPPER" else [large, small]
    else:
        pads = _pads(attrs, x.shape[2:], kernel, strides, dilations, where)
    operands = [builder.nhwc(x), builder.float_tensor(w, NHWC)]
    if bias is not None:
        operands.append(builder.float_tensor(bias))
    tensor = builder.layer("TransposeConvolution2d", operands, {
        "stride": strides, "dilation": dilations, "padding": pads,
        "output_padding": output_padding, "groups": groups})
    return [Value.runtime(tensor, _nchw_shape(builder, tensor), NHWC)]


def _pool(builder, node, attrs, x, pool, extra):
    where = f"node {node.name!r} ({node.op_type})"
    _spatial_rank(x, where)
    if len([o for o in node.output if o]) > 1:
        raise Unsupported("MaxPool's indices output")
    kernel, strides, dilations, pads = _window_attrs(attrs, x, where)
    descriptor = {"pool": pool, "kernel": kernel, "stride": strides, "padding": pads,
                  "dilation": dilations, "ceil_mode": bool(attrs.int("ceil_mode", 0)), **extra}
    tensor = builder.layer("Pooling2d", [builder.nhwc(x)], descriptor)
    return [Value.runtime(tensor, _nchw_shape(builder, tensor), NHWC)]


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


@converts("GlobalAveragePool", "GlobalMaxPool")
def global_pool(builder, node, inputs, attrs, opset):
    x = inputs[0]
    _spatial_rank(x, f"node {node.name!r} ({node.op_type})")
    function = "mean" if node.op_type == "GlobalAveragePool" else "max"
    tensor = builder.layer("Reduce", [builder.nhwc(x)],
                           {"function": function, "axes": [1, 2], "keep_dims": True})
    return [Value.runtime(tensor, (x.shape[0], x.shape[1], 1, 1), NHWC)]


@converts("Resize", since=11)
def resize(builder, node, inputs, attrs, opset):
    where = f"node {node.name!r} (Resize)"
    x = inputs[0]
    _spatial_rank(x, where)
    if attrs.int("antialias", 0):
        raise Unsupported("antialias")
    axes = attrs.ints("axes")
    if axes is not None:
        axes = [a % 4 for a in axes]
        if sorted(axes) != [2, 3]:
            raise Unsupported(f"Resize over axes {attrs.ints('axes')} (H and W are supported)")
    mode = attrs.string("mode", "nearest")
    transform = attrs.string("coordinate_transformation_mode", "half_pixel")
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
