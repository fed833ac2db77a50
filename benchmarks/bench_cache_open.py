"""Opening the backend cache in a fresh process: ``loader.cache.open_cache(False)``, the first call
of the process, timed inside it after ``import loader``, with a cache of 200 records (written by a
deferred ``Runtime`` over 200 installed backends), and with no cache directory at all (what the
Python around the read costs, plus one failed open). Medians of fresh processes.

    python benchmarks/bench_cache_open.py [--runs 20] [--against CHECKOUT]

With ``--against`` (another checkout, built in place), the same runs with that checkout's loader
first on ``PYTHONPATH``, interleaved with this one's, and the ratio.
"""
import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import make_backends_with_dependencies  # noqa: E402

OPEN = """
import time, loader, loader.cache
started = time.perf_counter_ns()
cache = loader.cache.open_cache(False)
elapsed = time.perf_counter_ns() - started
print(len(cache.records), elapsed)
"""

FILL = """
import sys, loader
loader.Runtime(dynamic_backends_path=sys.argv[1], load="deferred").close()
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--against", help="another checkout, built in place")
    args = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here}
    if args.against:
        trees["against"] = os.path.abspath(args.against)
    for tree in trees.values():  # as an installation does; no module compiled in a timed run
        compileall.compile_dir(os.path.join(tree, "loader"), quiet=2)
    work = tempfile.mkdtemp(prefix="bench-cache-open-")
    try:
        installed = os.path.join(work, "installed")
        os.makedirs(installed)
        make_backends_with_dependencies(installed, 200)
        base = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_BACKEND_")}
        cases = {"200 records": dict(base, XDG_CACHE_HOME=os.path.join(work, "cache")),
                 "no cache directory": dict(base, XDG_CACHE_HOME=os.path.join(work, "none"))}

        def run(tree, env, code, *argv):
            env = dict(env, PYTHONPATH=tree)
            return subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd="/",
                                  capture_output=True, text=True, check=True).stdout

        run(here, cases["200 records"], FILL, installed)
        print(f"open_cache(False), first call in a fresh process; median of {args.runs}")
        for case, env in cases.items():
            samples = {name: [] for name in trees}
            for i in range(args.runs):  # interleaved, the order alternating
                for name in (list(trees) if i % 2 == 0 else list(reversed(trees))):
                    records, nanoseconds = run(trees[name], env, OPEN).split()
                    assert int(records) == (200 if case == "200 records" else 0), records
                    samples[name].append(int(nanoseconds) / 1e3)
            medians = {name: statistics.median(values) for name, values in samples.items()}
            line = "   ".join(f"{name} {median:6.1f} µs (min {min(samples[name]):6.1f})"
                               for name, median in medians.items())
            if args.against:
                line += f"   against/this {medians['against'] / medians['this']:5.2f}x"
            print(f"   {case:<20} {line}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
