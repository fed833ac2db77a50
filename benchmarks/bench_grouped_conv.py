"""Grouped convolution on the reference backend against its plain convolution and NumPy, per FLOP,
in one run, interleaved.

    python benchmarks/bench_grouped_conv.py [--repeats N] [--threads T]

Shapes: ResNeXt-50 (32x4d)'s 3 x 3 grouped convolutions, 32 groups of 4, 8, 16 and 32 channels
(padding 1), and the strided one that opens its second stage. Each is compared with the plain
(one group) convolution of the same input and output channels, which does 32 times the work: the
figure that matters is GFLOP/s per FLOP, grouped / plain (goal: about 1). NumPy: each group's
sliding windows times its weights as one batched matmul (BLAS). Rounds alternate the contenders;
within a round each runs back to back after a pause (OpenBLAS leaves its threads spinning after a
call, which would otherwise take the cores from the next contender). --threads sets
REFERENCE_BACKEND_THREADS before the library loads.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved  # noqa: E402

SHAPES = [  # (H, W, C in, C out, groups, stride)
    (56, 56, 128, 128, 32, 1),
    (56, 56, 256, 256, 32, 2),
    (28, 28, 256, 256, 32, 1),
    (14, 14, 512, 512, 32, 1),
    (7, 7, 1024, 1024, 32, 1),
]


def numpy_grouped(x, w, groups, stride):
    """x [1, H, W, C], w [O, 3, 3, C / groups], padding 1: per group, windows @ weights."""
    n, _, _, c = x.shape
    o = w.shape[0]
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    windows = windows[:, ::stride, ::stride]                     # n oh ow c kh kw
    oh, ow = windows.shape[1:3]
    cin, cout = c // groups, o // groups
    a = windows.reshape(n * oh * ow, groups, cin, 3, 3).transpose(1, 0, 3, 4, 2)
    a = a.reshape(groups, n * oh * ow, 9 * cin)                  # g, pixels, (kh kw cin)
    b = w.reshape(groups, cout, 3, 3, cin).reshape(groups, cout, 9 * cin).transpose(0, 2, 1)
    return np.matmul(a, b).transpose(1, 0, 2).reshape(n, oh, ow, o)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads is not None:
        os.environ["REFERENCE_BACKEND_THREADS"] = str(args.threads)
    import loader
    rng = np.random.default_rng(0)
    with loader.Runtime() as runtime:
        backend = runtime.create_backend("CpuRef")

    print(f"threads: reference {os.environ.get('REFERENCE_BACKEND_THREADS', 'default')}, "
          f"cpus {os.cpu_count()}")
    print(f"{'shape':<30}{'grouped':>16}{'plain':>16}{'numpy':>16}   per FLOP: vs plain  vs numpy")
    for h, w_, c, o, groups, stride in SHAPES:
        x = rng.standard_normal((1, h, w_, c), dtype=np.float32)
        wg = rng.standard_normal((o, 3, 3, c // groups), dtype=np.float32)
        wp = rng.standard_normal((o, 3, 3, c), dtype=np.float32)
        d = {"padding": 1, "stride": stride, "groups": groups}
        dp = {"padding": 1, "stride": stride}
        ours = backend.execute("Convolution2d", [x, wg], d)[0]
        np.testing.assert_allclose(ours, numpy_grouped(x, wg, groups, stride), rtol=1e-3, atol=1e-3)
        oh, ow = ours.shape[1:3]
        flops_g = 2 * oh * ow * o * 9 * (c // groups)
        flops_p = flops_g * groups
        times = interleaved({
            "grouped": lambda: backend.execute("Convolution2d", [x, wg], d),
            "plain": lambda: backend.execute("Convolution2d", [x, wp], dp),
            "numpy": lambda: numpy_grouped(x, wg, groups, stride),
        }, repeats=args.repeats, inner=5, settle=0.3)
        rate = {"grouped": flops_g / times["grouped"], "plain": flops_p / times["plain"],
                "numpy": flops_g / times["numpy"]}
        shape = f"{h}x{w_}x{c}->{o} g{groups} s{stride}"
        print(f"{shape:<30}" + "".join(f"{rate[k] / 1e9:10.1f} GF/s" for k in ("grouped", "plain", "numpy"))
              + f"   {rate['grouped'] / rate['plain']:14.2f}  {rate['grouped'] / rate['numpy']:7.2f}")


if __name__ == "__main__":
    main()
