"""The convolutions real image networks spend their time in, on CpuRef, in GFLOP/s: the first
layer of an RGB image (3 channels, 3x3 and 7x7, stride 2, padded: read through a zero-bordered
copy), pointwise expansions and projections (to at most 32 channels the kernel reads the input
rows directly), ResNet's 3x3 layers and MobileNetV2's depthwise ones; with the time NumPy's matrix product takes for the same
multiply-adds (an im2col matrix made beforehand, not timed) as a yardstick. "layer" runs the
workload alone (its weights packed on every call), "compiled" the one-layer network that
load_network compiles (its constant weights packed once, when compiled: for ResNet's 3x3
stride-1 layers, transformed for the Winograd convolution, which only the compiled form takes;
GFLOP/s count the direct convolution's multiply-adds throughout).

--against BACKEND.so also loads another build of the reference backend (a copy of an older
reference_backend/backends/Reference_CpuRef_backend.so) and times its compiled network
interleaved with this checkout's, the before and after on the same load:

    REFERENCE_BACKEND_THREADS=1 python benchmarks/bench_conv_shapes.py [--rounds 15] \
        [--against /tmp/old/Reference_CpuRef_backend.so]
"""
import argparse
import contextlib
import os
import shutil
import sys
import tempfile

import numpy as np

import loader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved  # noqa: E402

# (name, h, w, c, o, kernel, stride, pad)
SHAPES = [("RGB 3x3 s2 (MobileNet)", 224, 224, 3, 32, 3, 2, 1),
          ("RGB 7x7 s2 (ResNet)", 224, 224, 3, 64, 7, 2, 3),
          ("1x1 16->96 (expansion)", 112, 112, 16, 96, 1, 1, 0),
          ("1x1 32->16 (projection)", 112, 112, 32, 16, 1, 1, 0),
          ("1x1 144->24 (projection)", 56, 56, 144, 24, 1, 1, 0),
          ("1x1 320->1280", 7, 7, 320, 1280, 1, 1, 0),
          ("3x3 64->64", 56, 56, 64, 64, 3, 1, 1),
          ("3x3 128->128", 28, 28, 128, 128, 3, 1, 1),
          ("3x3 256->256", 14, 14, 256, 256, 3, 1, 1),
          ("3x3 512->512", 7, 7, 512, 512, 3, 1, 1),
          ("3x3 s2 128->128", 56, 56, 128, 128, 3, 2, 1)]

# MobileNetV2's depthwise layers (padding 1): (name, h, w, c, stride)
DEPTHWISE = [("112x112x96 s2", 112, 112, 96, 2),
             ("56x56x144 s1", 56, 56, 144, 1),
             ("28x28x192 s1", 28, 28, 192, 1),
             ("14x14x576 s1", 14, 14, 576, 1),
             ("7x7x960 s1", 7, 7, 960, 1)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--against", metavar="BACKEND.so",
                        help="another build of the reference backend, timed compiled alongside")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    other_dir = None
    if args.against:
        other_dir = tempfile.mkdtemp(prefix="bench-conv-")
        shutil.copy(args.against, os.path.join(other_dir, "Reference_CpuRef_backend.so"))
    try:
        with loader.Runtime() as runtime:
            other = loader.Runtime(dynamic_backends_path=other_dir) if other_dir else None
            try:
                run(args, rng, runtime, other)
            finally:
                if other is not None:
                    other.close()
    finally:
        if other_dir:
            shutil.rmtree(other_dir)
    return 0


def run(args, rng, runtime, other):
    backend = runtime.create_backend("CpuRef")
    print(f"{'layer':<26} {'layer ms':>8} {'GFLOP/s':>8} {'compiled':>8} {'GFLOP/s':>8} "
          f"{'NumPy ms':>9} {'GFLOP/s':>8}" + (f" {'against':>8} {'GFLOP/s':>8}" if other else ""))
    for name, h, w, c, o, k, s, p in SHAPES:
        x = rng.standard_normal((1, h, w, c)).astype(np.float32)
        wt = rng.standard_normal((o, k, k, c)).astype(np.float32)
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        a = rng.standard_normal((oh * ow, k * k * c)).astype(np.float32)
        b = wt.reshape(o, -1).T.copy()
        d = {"stride": s, "padding": p}
        net = loader.Network()
        y = net.add_layer("Convolution2d", [net.add_input("x", x.shape),
                                            net.add_constant("w", wt)], d, name="conv")
        net.add_output(y, "y")
        with contextlib.ExitStack() as stack:
            compiled = stack.enter_context(runtime.load_network(net, backends=["CpuRef"]))
            contenders = {"ours": lambda: backend.execute("Convolution2d", [x, wt], d),
                          "compiled": lambda: compiled.execute({"x": x}),
                          "numpy": lambda: a @ b}
            if other is not None:
                before = stack.enter_context(other.load_network(net, backends=["CpuRef"]))
                contenders["against"] = lambda: before.execute({"x": x})
            times = interleaved(contenders, repeats=args.rounds, warmup=2)
        flop = 2.0 * oh * ow * o * k * k * c
        print(f"{name:<26} " + " ".join(
            f"{times[n] * 1e3:>{9 if n == 'numpy' else 8}.3f} {flop / times[n] / 1e9:>8.1f}"
            for n in contenders), flush=True)
    print(f"\n{'depthwise 3x3':<26} {'layer ms':>8} {'GFLOP/s':>8} {'GB/s':>8}")
    for name, h, w, c, s in DEPTHWISE:
        x = rng.standard_normal((1, h, w, c)).astype(np.float32)
        wt = rng.standard_normal((1, 3, 3, c)).astype(np.float32)
        d = {"stride": s, "padding": 1}
        times = interleaved({"ours": lambda: backend.execute("DepthwiseConvolution2d",
                                                             [x, wt], d)},
                            repeats=args.rounds, warmup=2)
        oh, ow = (h - 1) // s + 1, (w - 1) // s + 1
        flop, moved = 2.0 * oh * ow * c * 9, 4.0 * (h * w + oh * ow) * c
        print(f"{name:<26} {times['ours'] * 1e3:>8.3f} {flop / times['ours'] / 1e9:>8.1f} "
              f"{moved / times['ours'] / 1e9:>8.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
