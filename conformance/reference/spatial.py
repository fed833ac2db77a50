"""Layers over the spatial axes of NHWC tensors, in float64: convolutions (grouped, depthwise,
transposed), pooling and resize, with ONNX's (and ONNX Runtime's) semantics."""
import math

import numpy as np


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
            yield i, j, x[:, i * dy: i * dy + (oh - 1) * sy + 1: sy,
                          j * dx: j * dx + (ow - 1) * sx + 1: sx, :]


def convolution2d(x, w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1),
                  groups=1):
    """w [O, kH, kW, C / groups]: output channel o reads the input channels of group
    o // (O / groups)."""
    xp = _pad(x, padding)
    per_in, per_out = x.shape[3] // groups, w.shape[0] // groups
    outs = []
    for g in range(groups):
        part = xp[..., g * per_in:(g + 1) * per_in]
        out = 0
        for i, j, patch in _windows(part, w.shape[1], w.shape[2], stride, dilation):
            kernel = w[g * per_out:(g + 1) * per_out, i, j, :].astype(np.float64)
            out = out + np.einsum("nhwc,oc->nhwo", patch, kernel)
        outs.append(out)
    out = np.concatenate(outs, axis=3)
    return out if bias is None else out + bias


def depthwise_convolution2d(x, w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0),
                            dilation=(1, 1)):
    channels = x.shape[3]
    multiplier = w.shape[3] // channels
    xp = np.repeat(_pad(x, padding), multiplier, axis=3)  # channel c*m+j reads input channel c
    out = 0
    for i, j, patch in _windows(xp, w.shape[1], w.shape[2], stride, dilation):
        out = out + patch * w[0, i, j, :].astype(np.float64)
    return out if bias is None else out + bias


def transpose_convolution2d(x, w, bias=None, stride=(1, 1), padding=(0, 0, 0, 0),
                            dilation=(1, 1), output_padding=(0, 0), groups=1):
    """ONNX's ConvTranspose, NHWC, w [C, kH, kW, O / groups]: each input pixel scatters its
    kernel into the full output, which is then cropped by the padding."""
    n, h, wd, c = x.shape
    _, kh, kw, per_out = w.shape
    per_in = c // groups
    sy, sx = stride
    dy, dx = dilation
    full_h = sy * (h - 1) + output_padding[0] + (kh - 1) * dy + 1
    full_w = sx * (wd - 1) + output_padding[1] + (kw - 1) * dx + 1
    full = np.zeros((n, full_h, full_w, per_out * groups))
    x64 = x.astype(np.float64)
    for g in range(groups):
        xs = x64[..., g * per_in:(g + 1) * per_in]
        for i in range(kh):
            for j in range(kw):
                kernel = w[g * per_in:(g + 1) * per_in, i, j, :].astype(np.float64)
                contribution = np.einsum("nhwc,co->nhwo", xs, kernel)
                full[:, i * dy: i * dy + (h - 1) * sy + 1: sy,
                     j * dx: j * dx + (wd - 1) * sx + 1: sx,
                     g * per_out:(g + 1) * per_out] += contribution
    top, bottom, left, right = padding
    out = full[:, top:full_h - bottom, left:full_w - right, :]
    return out if bias is None else out + bias


def _pool_positions(o, stride, pad_before, kernel, dilation):
    start = o * stride - pad_before
    return [start + k * dilation for k in range(kernel)]


def pooling2d(x, pool, kernel, stride=(1, 1), padding=(0, 0, 0, 0), ceil_mode=False,
              count_include_pad=False, dilation=(1, 1), output_shape=None):
    """Window by window, as ONNX Runtime computes them: positions outside the input are
    skipped (max never picks them, l2 adds 0), the average divides by the positions inside the
    input, or with count_include_pad by those inside the padded input."""
    from loader.layers.spatial import _pooled_extent
    x = x.astype(np.float64)
    n, h, w, c = x.shape
    top, bottom, left, right = padding
    extents = [(kernel[a] - 1) * dilation[a] + 1 for a in range(2)]
    oh = _pooled_extent(h, top, bottom, extents[0], stride[0], ceil_mode)
    ow = _pooled_extent(w, left, right, extents[1], stride[1], ceil_mode)
    out = np.empty((n, oh, ow, c))
    for i in range(oh):
        rows = _pool_positions(i, stride[0], top, kernel[0], dilation[0])
        for j in range(ow):
            cols = _pool_positions(j, stride[1], left, kernel[1], dilation[1])
            inside = [(r, q) for r in rows for q in cols if 0 <= r < h and 0 <= q < w]
            values = np.stack([x[:, r, q, :] for r, q in inside]) if inside else np.zeros((1, n, c))
            if pool == "max":
                out[:, i, j, :] = values.max(axis=0)
            elif pool == "l2":
                out[:, i, j, :] = np.sqrt((values ** 2).sum(axis=0))
            else:
                if count_include_pad:
                    count = sum(1 for r in rows for q in cols
                                if -top <= r < h + bottom and -left <= q < w + right)
                else:
                    count = len(inside)
                out[:, i, j, :] = values.sum(axis=0) / count
    return out


def _source_coordinate(x, scale, in_len, out_len, transform):
    """ONNX's coordinate_transformation_mode: where output index ``x`` lies in the input. The
    output extent the transforms use is scale * in_len (the scale the model gave)."""
    length = scale * in_len
    if transform == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if transform == "half_pixel_symmetric":
        adjustment = out_len / length
        return in_len / 2 * (1 - adjustment) + (x + 0.5) / scale - 0.5
    if transform == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else 0.0
    if transform == "align_corners":
        return 0.0 if length == 1 else x * (in_len - 1) / (length - 1)
    if transform == "asymmetric":
        return x / scale
    if transform == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    raise ValueError(transform)


def _nearest_index(position, mode):
    base = math.floor(position)
    fraction = position - base
    if fraction == 0:
        return base
    if mode == "round_prefer_floor":
        return base if fraction <= 0.5 else base + 1
    if mode == "round_prefer_ceil":
        return base if fraction < 0.5 else base + 1
    if mode == "floor":
        return base
    if mode == "ceil":
        return base + 1
    raise ValueError(mode)


def _cubic_weights(t, a):
    return np.array([
        ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
        ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a])


def _resize_matrix(in_len, out_len, scale, mode, transform, nearest_mode, cubic_a, exclude):
    """The [out_len, in_len] matrix of one axis: row x holds the weights of the input indices
    output x reads (indices past an edge read the edge)."""
    matrix = np.zeros((out_len, in_len))
    for x in range(out_len):
        position = _source_coordinate(x, scale, in_len, out_len, transform)
        if mode == "nearest":
            matrix[x, min(max(_nearest_index(position, nearest_mode), 0), in_len - 1)] = 1
            continue
        base = math.floor(position)
        t = position - base
        if mode == "linear":
            indices, weights = [base, base + 1], np.array([1 - t, t])
        else:
            indices, weights = [base - 1, base, base + 1, base + 2], _cubic_weights(t, cubic_a)
        if exclude:
            weights = np.array([wt if 0 <= i < in_len else 0.0 for i, wt in zip(indices, weights)])
            weights = weights / weights.sum()
        for i, wt in zip(indices, weights):
            matrix[x, min(max(i, 0), in_len - 1)] += wt
    return matrix


def resize(x, size, mode="nearest", coordinate_transformation="half_pixel",
           nearest_mode="round_prefer_floor", scale=None, cubic_coeff_a=-0.75,
           exclude_outside=False):
    """H and W of an NHWC tensor to ``size``; separable, one axis after the other."""
    x = x.astype(np.float64)
    _, h, w, _ = x.shape
    sy, sx = scale if scale is not None else (size[0] / h, size[1] / w)
    rows = _resize_matrix(h, size[0], sy, mode, coordinate_transformation, nearest_mode,
                          cubic_coeff_a, exclude_outside)
    cols = _resize_matrix(w, size[1], sx, mode, coordinate_transformation, nearest_mode,
                          cubic_coeff_a, exclude_outside)
    return np.einsum("yh,nhwc,xw->nyxc", rows, x, cols)
