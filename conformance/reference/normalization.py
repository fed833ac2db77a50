"""Layers that normalize or reduce along axes, and the matrix products, in float64."""
import numpy as np


def softmax(x, beta=1.0, axis=-1, log=False):
    z = beta * x.astype(np.float64)
    z = z - z.max(axis=axis, keepdims=True)
    if log:
        return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def reduce(x, function, axes=None, keep_dims=True):
    x = x.astype(np.float64)
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    with np.errstate(all="ignore"):
        if function == "log_sum_exp":
            top = x.max(axis=axes, keepdims=True)
            top = np.where(np.isfinite(top), top, 0)
            y = np.log(np.exp(x - top).sum(axis=axes, keepdims=True)) + top
        else:
            op = {"mean": np.mean, "sum": np.sum, "max": np.max, "min": np.min,
                  "prod": np.prod}.get(function)
            if op is not None:
                y = op(x, axis=axes, keepdims=True)
            elif function == "l1":
                y = np.abs(x).sum(axis=axes, keepdims=True)
            elif function == "l2":
                y = np.sqrt((x ** 2).sum(axis=axes, keepdims=True))
            elif function == "sum_square":
                y = (x ** 2).sum(axis=axes, keepdims=True)
            else:
                raise ValueError(function)
    if not keep_dims:
        y = y.reshape([v for k, v in enumerate(x.shape) if k not in axes] or [1])
    return y


def batch_normalization(x, mean, variance, scale, bias, epsilon=1e-5):
    x = x.astype(np.float64)
    return (x - mean) / np.sqrt(variance.astype(np.float64) + epsilon) * scale + bias


def layer_normalization(x, scale, bias=None, axis=-1, epsilon=1e-5):
    x = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(variance + epsilon) * scale
    return y if bias is None else y + bias


def fully_connected(x, w, bias=None, transpose_weights=True):
    w = w.astype(np.float64)
    y = x.astype(np.float64) @ (w.T if transpose_weights else w)
    return y if bias is None else y + bias


def mat_mul(a, b):
    y = np.matmul(a.astype(np.float64), b.astype(np.float64))
    return y.reshape(1) if y.ndim == 0 else y
