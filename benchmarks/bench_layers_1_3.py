"""Reference backend layers of Backend API 1.3 against NumPy and a memcpy floor, in one run,
interleaved.

    python benchmarks/bench_layers_1_3.py [--repeats N]

Data movement on a 1x56x56x256 float32 tensor (3.2 MB): Concatenation of two 1x56x56x128 along
the channels and of two 1x28x56x256 along the height, Transpose NHWC -> NCHW and back, Slice of
every other channel, Pad of the image by 1 (constant and reflect). Each against NumPy writing
into a preallocated array (np.concatenate(out=), np.copyto of the transposed view, ...) and
against the floor: one memcpy of the output's bytes (ctypes.memmove into a preallocated
buffer). Then element-wise layers and activations on 1x56x56x256 against the NumPy expression
of the same function into a preallocated output.

The reference runs a workload created once, into a preallocated output, so the figures are the
kernels' own (plus the runtime's call, about a microsecond). Prints milliseconds, ours/floor
and ours/NumPy (below 1: faster). Rounds alternate the contenders; within a round each runs 5
times back to back after a 0.2 s pause.
"""
import argparse
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved  # noqa: E402

import loader  # noqa: E402
from conformance import reference  # noqa: E402

F = np.float32


def workload(factory, layer, inputs, descriptor=None):
    """A callable running ``layer`` on ``inputs`` into one preallocated output, and that output."""
    made = factory.create_workload(layer, inputs, descriptor)
    out = np.empty(made.layer.output_shape, F)
    made.execute(inputs, [out])
    expected = reference.evaluate(layer, inputs, descriptor)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    return (lambda: made.execute(inputs, [out])), out


def memcpy_of(array):
    """The floor: one memcpy of as many bytes as ``array`` holds."""
    src = np.random.default_rng(1).standard_normal(array.shape).astype(F)
    dst = np.empty_like(src)
    return lambda: ctypes.memmove(dst.ctypes.data, src.ctypes.data, src.nbytes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    runtime = loader.Runtime()
    backend = runtime.create_backend("CpuRef")
    factory = backend.create_workload_factory()

    x = rng.standard_normal((1, 56, 56, 256)).astype(F)
    half_c = [rng.standard_normal((1, 56, 56, 128)).astype(F) for _ in range(2)]
    half_h = [rng.standard_normal((1, 28, 56, 256)).astype(F) for _ in range(2)]
    nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    y = rng.uniform(0.5, 2, (1, 56, 56, 256)).astype(F)
    channel = rng.uniform(0.5, 2, (256,)).astype(F)

    moves = {}   # name -> (ours, numpy, floor)

    def move(name, layer, inputs, descriptor, numpy_fn):
        ours, out = workload(factory, layer, inputs, descriptor)
        numpy_out = np.empty_like(out)
        moves[name] = (ours, lambda: numpy_fn(numpy_out), memcpy_of(out))

    move("Concatenation C (2 x 128)", "Concatenation", half_c, {"axis": 3},
         lambda o: np.concatenate(half_c, axis=3, out=o))
    move("Concatenation H (2 x 28)", "Concatenation", half_h, {"axis": 1},
         lambda o: np.concatenate(half_h, axis=1, out=o))
    move("Transpose NHWC->NCHW", "Transpose", [x], {"perm": [0, 3, 1, 2]},
         lambda o: np.copyto(o, x.transpose(0, 3, 1, 2)))
    move("Transpose NCHW->NHWC", "Transpose", [nchw], {"perm": [0, 2, 3, 1]},
         lambda o: np.copyto(o, nchw.transpose(0, 2, 3, 1)))
    move("Slice every other C", "Slice", [x], {"step": [1, 1, 1, 2]},
         lambda o: np.copyto(o, x[..., ::2]))
    move("Pad H, W by 1 (constant)", "Pad", [x], {"pads": [0, 1, 1, 0, 0, 1, 1, 0]},
         lambda o: np.copyto(o, np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))))
    move("Pad H, W by 1 (reflect)", "Pad", [x], {"pads": [0, 1, 1, 0, 0, 1, 1, 0], "mode": "reflect"},
         lambda o: np.copyto(o, np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), mode="reflect")))

    compute = {}  # name -> (ours, numpy)

    def elementwise(name, layer, inputs, descriptor, numpy_fn):
        ours, out = workload(factory, layer, inputs, descriptor)
        numpy_out = np.empty_like(out)
        compute[name] = (ours, lambda: numpy_fn(numpy_out))

    elementwise("Subtraction (same shape)", "Subtraction", [x, y], None,
                lambda o: np.subtract(x, y, out=o))
    elementwise("Division by [256]", "Division", [x, channel], None,
                lambda o: np.divide(x, channel, out=o))
    elementwise("Maximum (same shape)", "Maximum", [x, y], None, lambda o: np.maximum(x, y, out=o))
    elementwise("Prelu slope [256]", "Prelu", [x, channel], None,
                lambda o: np.copyto(o, np.where(x < 0, x * channel, x)))
    elementwise("Unary exp", "ElementwiseUnary", [x], {"function": "exp"},
                lambda o: np.exp(x, out=o))
    elementwise("Unary sqrt", "ElementwiseUnary", [y], {"function": "sqrt"},
                lambda o: np.sqrt(y, out=o))
    elementwise("Unary round", "ElementwiseUnary", [x], {"function": "round"},
                lambda o: np.round(x, out=o))
    elementwise("Activation elu", "Activation", [x], {"function": "elu"},
                lambda o: np.copyto(o, np.where(x > 0, x, np.expm1(np.minimum(x, 0)))))
    elementwise("Activation swish", "Activation", [x], {"function": "swish"},
                lambda o: np.divide(x, 1 + np.exp(-x), out=o))
    elementwise("Activation gelu (tanh)", "Activation", [x], {"function": "gelu", "approximate": "tanh"},
                lambda o: np.multiply(0.5 * x, 1 + np.tanh(0.7978846 * (x + 0.044715 * x ** 3)), out=o))
    elementwise("Activation softplus", "Activation", [x], {"function": "softplus"},
                lambda o: np.logaddexp(0, x, out=o))
    elementwise("Activation hard_swish", "Activation", [x], {"function": "hard_swish"},
                lambda o: np.multiply(x, np.clip(x / 6 + 0.5, 0, 1), out=o))

    candidates = {}
    for name, (ours, numpy_fn, floor) in moves.items():
        candidates[(name, "ours")] = ours
        candidates[(name, "numpy")] = numpy_fn
        candidates[(name, "floor")] = floor
    for name, (ours, numpy_fn) in compute.items():
        candidates[(name, "ours")] = ours
        candidates[(name, "numpy")] = numpy_fn
    times = interleaved(candidates, repeats=args.repeats, inner=5, settle=0.2)

    print(f"threads: reference {os.environ.get('REFERENCE_BACKEND_THREADS', 'default')}, "
          f"cpus {os.cpu_count()}; tensors 1x56x56x256 float32")
    print(f"{'data movement':28s} {'ours ms':>8s} {'numpy ms':>9s} {'memcpy ms':>10s} "
          f"{'ours/floor':>11s} {'ours/numpy':>11s}")
    for name in moves:
        o, n, f = (times[(name, k)] * 1e3 for k in ("ours", "numpy", "floor"))
        print(f"{name:28s} {o:8.3f} {n:9.3f} {f:10.3f} {o / f:10.2f}x {o / n:10.2f}x")
    print(f"\n{'element-wise':28s} {'ours ms':>8s} {'numpy ms':>9s} {'ours/numpy':>11s}")
    for name in compute:
        o, n = (times[(name, k)] * 1e3 for k in ("ours", "numpy"))
        print(f"{name:28s} {o:8.3f} {n:9.3f} {o / n:10.2f}x")
    factory.close()
    backend.close()
    runtime.close()


if __name__ == "__main__":
    main()
