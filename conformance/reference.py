"""Plain NumPy implementations of the layers, written from their definitions: the ground truth
the kit (and the test suite) compares backends with. Clarity over speed; float64 inside."""
import numpy as np


def activation(x, function, a=0.0, b=0.0):
    x = x.astype(np.float64)
    if function == "relu":
        return np.maximum(x, 0)
    if function == "bounded_relu":
        return np.minimum(a, np.maximum(b, x))
    if function == "sigmoid":
        return np.exp(-np.logaddexp(0, -x))  # 1 / (1 + e^-x) without overflow
    if function == "tanh":
        return np.tanh(x)
    if function == "leaky_relu":
        return np.where(x > 0, x, a * x)
    raise ValueError(function)


def fully_connected(x, w, bias=None, transpose_weights=True):
    w = w.astype(np.float64)
    y = x.astype(np.float64) @ (w.T if transpose_weights else w)
    return y if bias is None else y + bias


def _pad(x, padding, value=0.0):
    top, bottom, left, right = padding
    return np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)),
                  constant_values=value)


def _windows(x, kh, kw, stride, dilation):
    """For each kernel offset (i, j): the input rows/columns it sees, over all outputs."""
    sy, sx = stride
    dy, dx = dilation
    oh = (x.shape[1] - ((kh - 1) * dy + 1)) // sy + 1
    ow = (x.shape[2] - ((kw - 1) * dx + 1)) // sx + 1
    for i in range(kh):
        for j in range(kw):
            yield i, j, x[:, i * dy: i * dy + (oh - 1) * sy + 1: sy, j * dx: j * dx + (ow - 1) * sx + 1: sx, :]


def convolution2d(x, w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1)):
    xp = _pad(x, padding)
    out = 0
    for i, j, patch in _windows(xp, w.shape[1], w.shape[2], stride, dilation):
        out = out + np.einsum("nhwc,oc->nhwo", patch, w[:, i, j, :].astype(np.float64))
    return out if bias is None else out + bias


def depthwise_convolution2d(x, w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1)):
    channels = x.shape[3]
    multiplier = w.shape[3] // channels
    xp = np.repeat(_pad(x, padding), multiplier, axis=3)  # channel c*m+j reads input channel c
    out = 0
    for i, j, patch in _windows(xp, w.shape[1], w.shape[2], stride, dilation):
        out = out + patch * w[0, i, j, :].astype(np.float64)
    return out if bias is None else out + bias


def pooling2d(x, pool, kernel, stride=(1, 1), padding=(0, 0, 0, 0)):
    kh, kw = kernel
    if pool == "max":
        xp = _pad(x, padding, -np.inf)
        return np.max([p for _, _, p in _windows(xp, kh, kw, stride, (1, 1))], axis=0)
    xp = _pad(x, padding)
    ones = _pad(np.ones_like(x), padding)
    total = np.sum([p for _, _, p in _windows(xp, kh, kw, stride, (1, 1))], axis=0)
    count = np.sum([p for _, _, p in _windows(ones, kh, kw, stride, (1, 1))], axis=0)
    return total / count


def softmax(x, beta=1.0):
    z = beta * x.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def reshape(x, shape):
    return np.reshape(x.astype(np.float64), shape)


def evaluate(layer, inputs, descriptor):
    """The reference output of ``layer`` for ``inputs`` (a list of arrays) and ``descriptor``."""
    d = dict(descriptor or {})
    if layer == "Activation":
        return activation(inputs[0], d["function"], d.get("a", 0.0), d.get("b", 0.0))
    if layer == "Addition":
        return inputs[0].astype(np.float64) + inputs[1]
    if layer == "Multiplication":
        return inputs[0].astype(np.float64) * inputs[1]
    if layer == "FullyConnected":
        return fully_connected(*inputs[:2], inputs[2] if len(inputs) > 2 else None,
                               d.get("transpose_weights", True))
    if layer in ("Convolution2d", "DepthwiseConvolution2d"):
        fn = convolution2d if layer == "Convolution2d" else depthwise_convolution2d
        return fn(inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None,
                  _pair(d.get("stride", 1)), _sides(d.get("padding", 0)), _pair(d.get("dilation", 1)))
    if layer == "Pooling2d":
        return pooling2d(inputs[0], d["pool"], _pair(d["kernel"]), _pair(d.get("stride", 1)),
                         _sides(d.get("padding", 0)))
    if layer == "Softmax":
        return softmax(inputs[0], d.get("beta", 1.0))
    if layer == "Reshape":
        return reshape(inputs[0], d["shape"])
    raise ValueError(f"no reference for {layer}")


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


def _sides(value):
    if isinstance(value, int):
        return (value,) * 4
    return (value[0], value[0], value[1], value[1]) if len(value) == 2 else tuple(value)
