"""The pre-dlopen ELF checks alone: ``_core.inspect_elf_file`` per file, warm page cache, on 200
copies of the reference backend and on 200 small backends (the P2 set), optionally against the
same measurement made with another checkout's build (before/after a change of the checks).

    python benchmarks/bench_elf_checks.py [--against CHECKOUT] [--repeats 9]

CHECKOUT is a source tree whose extension modules are built in place (``python setup.py
build_ext --inplace``). Each measurement runs in a fresh process that imports the loader of one
tree, checks every file once (warm-up), then times passes over all of them and prints the median
pass; the trees take turns, round after round, and the median round is kept.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fixtures import make_backends  # noqa: E402

CHILD = """
import statistics, sys, time, loader
paths = sys.argv[2:]
inspect = loader._core.inspect_elf_file
for path in paths:
    assert inspect(path)[0] is None, (path, inspect(path))
passes = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter_ns()
    for path in paths:
        inspect(path)
    passes.append(time.perf_counter_ns() - started)
print(loader.__file__, statistics.median(passes) / len(paths))
"""


def per_file(tree, paths, passes=20):
    """Nanoseconds per file, measured in a fresh process importing the loader of ``tree``."""
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", CHILD, str(passes), *paths], capture_output=True,
                         text=True, check=True, cwd="/", env=env).stdout.split()
    assert out[0].startswith(os.path.join(tree, "loader")), (tree, out[0])
    return float(out[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="another checkout, built in place")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    trees = {"this": os.path.dirname(HERE)}
    if args.against:
        trees["against"] = os.path.abspath(args.against)
    work = tempfile.mkdtemp(prefix="bench-elf-checks-")
    try:
        import reference_backend
        sets = {}
        reference = os.path.join(work, "reference")
        os.makedirs(reference)
        sets["reference backend"] = []
        for i in range(200):
            path = os.path.join(reference, f"Acme_Ref{i}_backend.so")
            shutil.copyfile(reference_backend.LIBRARY_PATH, path)
            sets["reference backend"].append(path)
        small = os.path.join(work, "small")
        os.makedirs(small)
        sets["P2 backend"] = sorted(make_backends(small, 200))
        header = f"{'ELF checks':<20} {'files':>6} {'this/file':>11}"
        if args.against:
            header += f" {'against/file':>13} {'this/against':>13}"
        print(header)
        for name, paths in sets.items():
            samples = {tree: [] for tree in trees}
            for _ in range(args.repeats):
                for tree, root in trees.items():
                    samples[tree].append(per_file(root, paths))
            this = statistics.median(samples["this"])
            line = f"   {name:<17} {len(paths):>6} {this / 1000:8.2f} µs"
            if args.against:
                against = statistics.median(samples["against"])
                line += f" {against / 1000:10.2f} µs {this / against:12.2f}x"
            print(line)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
