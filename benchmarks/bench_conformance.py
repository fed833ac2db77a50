"""Wall time of a full conformance run on the reference backend, crash isolation on (every case
after the file checks runs in a worker process).

    python benchmarks/bench_conformance.py [--repeats N]

Goal: at most 3 s on 2 cores.
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
    command = ["backend-conformance", "run", "--backend", reference_backend.LIBRARY_PATH, "-q"]
    times = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, cwd=os.sep)
        times.append(time.perf_counter() - started)
        if result.returncode != 0:
            sys.exit(f"the reference backend was not conformant:\n{result.stdout}{result.stderr}")
    median = statistics.median(times)
    print(f"full run, CLI start to exit: median {median:.2f} s, min {min(times):.2f} s over "
          f"{args.repeats} runs (goal <= 3 s); cpus {os.cpu_count()}")


if __name__ == "__main__":
    main()
