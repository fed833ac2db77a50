"""Wall time of a conformance run on the reference backend, quick and full tier, crash isolation
on (every case after the file checks runs in a worker process).

    python benchmarks/bench_conformance.py [--repeats N]

Goals on 2 cores: the full tier at most 10 s (P4), the quick tier at most 3 s.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import reference_backend


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for tier, extra, goal in (("quick", ["--quick"], 3), ("full", [], 10)):
        command = ["backend-conformance", "run", "--backend", reference_backend.LIBRARY_PATH, "-q",
                   *extra]
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = subprocess.run(command, capture_output=True, text=True, cwd=os.sep)
            times.append(time.perf_counter() - started)
            if result.returncode != 0:
                sys.exit(f"the reference backend was not conformant:\n{result.stdout}{result.stderr}")
        median = statistics.median(times)
        print(f"{tier} tier, CLI start to exit: median {median:.2f} s, min {min(times):.2f} s over "
              f"{args.repeats} runs (goal <= {goal} s); cpus {os.cpu_count()}")

if __name__ == "__main__":
    main()
