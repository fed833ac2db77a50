"""The ONNX importer's own cost: time to turn a model file into a ``loader.Network`` and the
memory it takes on the way, against the size of the model's weights.

    python benchmarks/bench_onnx_import.py [--models resnet50,mobilenet_v2] [--rounds 3]
                                           [--models-dir DIR]

Each model is imported in a child process of its own, so that the peak resident set it reports
(ru_maxrss) belongs to that import alone: "extra at peak" is the peak less what the process held
before the import, and "beyond the network" is the peak less what it holds after (the network's
constants, which it keeps). A copy of the weights costs their size once; the importer's goal is
at most one such copy beyond the network. Models come from bench_network.py's directory
(exported there on first use when torch is installed).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(path, rounds):
    """In the child: import ``path`` ``rounds`` times; the first import's memory, every time."""
    import loader.onnx
    import onnx  # noqa: F401  (imported before the baseline, as an application would have it)
    before = resident_mb()
    times = []
    for round_ in range(rounds):
        start = time.perf_counter()
        network = loader.onnx.load_model(path)
        times.append(time.perf_counter() - start)
        if round_ == 0:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            after = resident_mb()
            weights = sum(network.constants[name].nbytes for name in network.constants) / 2**20
            layers = len(network.layers)
        del network
    return {"seconds": statistics.median(times), "before": before, "after": after,
            "peak": peak, "weights": weights, "layers": layers,
            "file": os.path.getsize(path) / 2**20}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,mobilenet_v2,vit_b_16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models-dir", default=os.path.expanduser(
        "~/.cache/dynamic-backends/models"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.rounds)))
        return 0
    try:
        import onnx  # noqa: F401
    except ImportError:
        print("the importer needs the onnx extra: pip install -e '.[onnx]'", file=sys.stderr)
        return 2
    sys.path.insert(0, HERE)
    from bench_network import ensure_model
    print(f"{'model':<16} {'file MB':>8} {'layers':>7} {'import s':>9} {'weights MB':>11} "
          f"{'extra at peak':>14} {'beyond the network':>19}")
    for name in [m for m in args.models.split(",") if m]:
        path, why = ensure_model(args.models_dir, name)
        if path is None:
            print(f"{name:<16} skipped: {why}")
            continue
        out = subprocess.run([sys.executable, __file__, "--child", path, "--rounds",
                              str(args.rounds)], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{name:<16} FAILED: {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout)
        extra, beyond = r["peak"] - r["before"], r["peak"] - r["after"]
        print(f"{name:<16} {r['file']:>8.0f} {r['layers']:>7} {r['seconds']:>9.2f} "
              f"{r['weights']:>11.0f} {extra:>10.0f} MB {beyond:>9.0f} MB "
              f"({beyond / max(r['weights'], 1e-9):.2f} copies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
