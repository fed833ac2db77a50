"""Plain NumPy implementations of the layers, written from their definitions (ONNX's where ONNX
has the operator): the ground truth the kit (and the test suite) compares backends with.
Clarity over speed; float64 inside. One module per family, as in ``loader.layers``; the
descriptor defaults are the layer table's."""
from conformance.reference import elementwise, normalization, spatial, tensor
from conformance.reference.elementwise import activation, binary, prelu, unary
from conformance.reference.normalization import (batch_normalization, fully_connected,
                                                 layer_normalization, mat_mul, reduce, softmax)
from conformance.reference.spatial import (convolution2d, depthwise_convolution2d, pooling2d,
                                           resize, transpose_convolution2d)
from conformance.reference.tensor import concatenation, pad, reshape, slice_, transpose

BINARY = ("Addition", "Multiplication", "Subtraction", "Division", "Maximum", "Minimum", "Power")


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def _sides(value):
    if isinstance(value, int):
        return (value,) * 4
    return (value[0], value[0], value[1], value[1]) if len(value) == 2 else tuple(value)


def _optional(inputs, index):
    return inputs[index] if len(inputs) > index else None


def evaluate(layer, inputs, descriptor):
    """The reference output of ``layer`` for ``inputs`` (a list of arrays) and ``descriptor``."""
    from loader.layers import LAYERS
    d = dict(LAYERS[layer].defaults)
    d.update(descriptor or {})
    x = inputs[0]
    if layer == "Activation":
        return elementwise.activation(x, d["function"], d["a"], d["b"], d["approximate"])
    if layer in BINARY:
        return elementwise.binary(layer, x, inputs[1])
    if layer == "ElementwiseUnary":
        return elementwise.unary(x, d["function"])
    if layer == "Prelu":
        return elementwise.prelu(x, inputs[1])
    if layer == "FullyConnected":
        return normalization.fully_connected(x, inputs[1], _optional(inputs, 2),
                                             d["transpose_weights"])
    if layer == "MatMul":
        return normalization.mat_mul(x, inputs[1])
    if layer == "Convolution2d":
        return spatial.convolution2d(x, inputs[1], _optional(inputs, 2), _pair(d["stride"]),
                                     _sides(d["padding"]), _pair(d["dilation"]), d["groups"])
    if layer == "DepthwiseConvolution2d":
        return spatial.depthwise_convolution2d(x, inputs[1], _optional(inputs, 2),
                                               _pair(d["stride"]), _sides(d["padding"]),
                                               _pair(d["dilation"]))
    if layer == "TransposeConvolution2d":
        return spatial.transpose_convolution2d(
            x, inputs[1], _optional(inputs, 2), _pair(d["stride"]), _sides(d["padding"]),
            _pair(d["dilation"]), _pair(d["output_padding"]), d["groups"])
    if layer == "Pooling2d":
        return spatial.pooling2d(x, d["pool"], _pair(d["kernel"]), _pair(d["stride"]),
                                 _sides(d["padding"]), d["ceil_mode"], d["count_include_pad"],
                                 _pair(d["dilation"]))
    if layer == "Resize":
        return spatial.resize(x, _pair(d["size"]), d["mode"], d["coordinate_transformation"],
                              d["nearest_mode"], d["scale"], d["cubic_coeff_a"],
                              d["exclude_outside"])
    if layer == "Softmax":
        return normalization.softmax(x, d["beta"], d["axis"], d["log"])
    if layer == "Reduce":
        return normalization.reduce(x, d["function"], d["axes"], d["keep_dims"])
    if layer == "BatchNormalization":
        return normalization.batch_normalization(*inputs[:5], d["epsilon"])
    if layer == "LayerNormalization":
        return normalization.layer_normalization(x, inputs[1], _optional(inputs, 2), d["axis"],
                                                 d["epsilon"])
    if layer == "Reshape":
        return tensor.reshape(x, d["shape"])
    if layer == "Concatenation":
        return tensor.concatenation(inputs, d["axis"])
    if layer == "Slice":
        return tensor.slice_(x, d["begin"], d["end"], d["step"])
    if layer == "Transpose":
        return tensor.transpose(x, d["perm"])
    if layer == "Pad":
        return tensor.pad(x, d["pads"], d["mode"], d["value"])
    raise ValueError(f"no reference for {layer}")


__all__ = ["activation", "batch_normalization", "binary", "concatenation", "convolution2d",
           "depthwise_convolution2d", "evaluate", "fully_connected", "layer_normalization",
           "mat_mul", "pad", "pooling2d", "prelu", "reduce", "reshape", "resize", "slice_",
           "softmax", "transpose", "transpose_convolution2d", "unary"]
