"""Reference backend throughput against NumPy on the same data, in one run, interleaved.

    python benchmarks/bench_layers.py [--repeats N]

Convolution2d: x 1x56x56x64, w 64x3x3x64, padding 1 (NumPy: sliding windows + tensordot).
FullyConnected: x 512x1024, w 1024x1024 (NumPy: x @ w.T, i.e. BLAS).
Prints GFLOP/s of each and the ratio reference / NumPy (goals: FullyConnected >= 0.9,
Convolution2d >= 1.5). Rounds alternate the
contenders; within a round each runs 5 times back to back (steady state) after a 0.5 s pause
(OpenBLAS leaves its threads spinning after a call, which would otherwise take the cores from
the next contender).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved  # noqa: E402

import loader  # noqa: E402


def numpy_conv(x, w):
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # n h w c i j
    return np.tensordot(windows, w, axes=([3, 4, 5], [3, 1, 2]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with loader.Runtime() as runtime:
        backend = runtime.create_backend("CpuRef")

    x = rng.standard_normal((1, 56, 56, 64), dtype=np.float32)
    w = rng.standard_normal((64, 3, 3, 64), dtype=np.float32)
    conv_flops = 2 * 56 * 56 * 64 * 3 * 3 * 64
    ours = backend.execute("Convolution2d", [x, w], {"padding": 1})[0]
    np.testing.assert_allclose(ours, numpy_conv(x, w), rtol=1e-3, atol=1e-3)

    a = rng.standard_normal((512, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    fc_flops = 2 * 512 * 1024 * 1024
    np.testing.assert_allclose(backend.execute("FullyConnected", [a, b])[0], a @ b.T,
                               rtol=1e-3, atol=1e-2)

    times = interleaved({
        "conv reference": lambda: backend.execute("Convolution2d", [x, w], {"padding": 1}),
        "conv numpy": lambda: numpy_conv(x, w),
        "fc reference": lambda: backend.execute("FullyConnected", [a, b]),
        "fc numpy": lambda: a @ b.T,
    }, repeats=args.repeats, inner=5, settle=0.5)

    print(f"threads: reference {os.environ.get('REFERENCE_BACKEND_THREADS', 'default')}, "
          f"cpus {os.cpu_count()}")
    for layer, flops, goal in (("conv", conv_flops, 1.5), ("fc", fc_flops, 0.9)):
        ours, theirs = times[f"{layer} reference"], times[f"{layer} numpy"]
        print(f"{layer:<5} reference {ours * 1e3:8.2f} ms {flops / ours / 1e9:7.1f} GFLOP/s | "
              f"numpy {theirs * 1e3:8.2f} ms {flops / theirs / 1e9:7.1f} GFLOP/s | "
              f"ratio {theirs / ours:5.2f} (goal >= {goal})")


if __name__ == "__main__":
    main()
