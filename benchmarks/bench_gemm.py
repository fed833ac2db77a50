"""The reference GEMM alone: ``rk_fully_connected`` of this checkout (and optionally of another)
against NumPy's BLAS on the same data, interleaved, in one process, without the runtime around it.

    python benchmarks/bench_gemm.py [--against CHECKOUT] [--rounds 10] [--shape 512 1024 1024]

The kernel sources (``reference_backend/gemm*.c`` and the files they need) of each tree are compiled
into a temporary library with exported symbols (same flags as the backend: -O3, run-time ISA
dispatch) and called through ctypes with x [n, k] and weights [m, k] (y = x @ w.T, as in
bench_layers). Each round runs every contender 5 times back to back after a 0.3 s pause (NumPy's
BLAS threads spin after a call) and keeps the median of the 5; the script prints quantiles of the
rounds in GFLOP/s, because on a shared machine the spread is the information: the upper quantiles
are the rounds in which the contender had the cores. Thread counts come from the environment
(``REFERENCE_BACKEND_THREADS``, ``OPENBLAS_NUM_THREADS``).
"""
import argparse
import ctypes
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# besides gemm*.c (the driver and, since it was split off, gemm_kernels.c: older trees have one file);
# the activation files where a tree has them (the epilogue in elementwise.c calls into them)
SOURCES = ("fully_connected.c", "threading.c", "elementwise.c", "activation.c",
           "activation_avx512.c")


def build(tree, directory, name):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("bench_gemm needs a C compiler")
    out = os.path.join(directory, name + ".so")
    kernels = os.path.join(tree, "reference_backend")
    sources = sorted(glob.glob(os.path.join(kernels, "gemm*.c")))
    sources += [os.path.join(kernels, s) for s in SOURCES if os.path.exists(os.path.join(kernels, s))]
    subprocess.run([cc, "-std=c11", "-O3", "-fwrapv", "-D_GNU_SOURCE", "-shared", "-fPIC",
                    *sources, "-o", out, "-lm", "-lpthread"], check=True)
    lib = ctypes.CDLL(out)
    p = ctypes.c_void_p
    lib.rk_fully_connected.argtypes = [p, p, p, p, ctypes.c_int64, ctypes.c_int64,
                                       ctypes.c_int64, ctypes.c_int]
    return lib


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="another checkout (its reference_backend/ sources)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--shape", type=int, nargs=3, default=(512, 1024, 1024),
                        metavar=("N", "K", "M"))
    args = parser.parse_args()
    n, k, m = args.shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, k), dtype=np.float32)
    w = rng.standard_normal((m, k), dtype=np.float32)
    expected = x @ w.T
    flops = 2.0 * n * k * m

    trees = {"this": os.path.dirname(HERE)}
    if args.against:
        trees["against"] = os.path.abspath(args.against)
    work = tempfile.mkdtemp(prefix="bench-gemm-")
    try:
        contenders = {}
        for name, tree in trees.items():
            lib = build(tree, work, name)
            y = np.empty((n, m), np.float32)

            def run(lib=lib, y=y):
                lib.rk_fully_connected(x.ctypes.data, w.ctypes.data, None, y.ctypes.data,
                                       n, k, m, 1)
                return y
            np.testing.assert_allclose(run(), expected, rtol=1e-3, atol=1e-2)
            contenders[f"reference ({name})"] = run
        contenders["numpy"] = lambda: x @ w.T

        for fn in contenders.values():
            fn()
        rounds = {name: [] for name in contenders}
        for _ in range(args.rounds):
            for name, fn in contenders.items():
                time.sleep(0.3)
                block = []
                for _ in range(5):
                    start = time.perf_counter()
                    fn()
                    block.append(time.perf_counter() - start)
                rounds[name].append(statistics.median(block))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    ours = os.environ.get("REFERENCE_BACKEND_THREADS", "default")
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"{n} x {k} x {m}, threads: reference {ours}, OpenBLAS {blas}, cpus {os.cpu_count()}; "
          f"GFLOP/s over {args.rounds} rounds")
    for name, seconds in rounds.items():
        g = sorted(flops / s / 1e9 for s in seconds)
        q = lambda f: g[min(len(g) - 1, int(f * len(g)))]  # noqa: E731
        print(f"  {name:<20} min {g[0]:6.1f}  p25 {q(.25):6.1f}  median {statistics.median(g):6.1f}"
              f"  p75 {q(.75):6.1f}  max {g[-1]:6.1f}")


if __name__ == "__main__":
    main()
