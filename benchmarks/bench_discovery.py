"""P1: discovery (loader.get_shared_objects) against the syscall floor and a hand-written
Python scan, on the standard tree (4 directories x 2,500 entries) and on 10x that; then how it
grows with the number of entries.

    python benchmarks/bench_discovery.py [--repeats N]

Goal: at most 1.5x the floor (floors/scan_floor.c), linear growth, bounded memory.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import build_floor, make_tree, run_floor  # noqa: E402
from _timing import interleaved  # noqa: E402

import loader  # noqa: E402

NAME = re.compile(r"[A-Za-z0-9]+_[A-Za-z0-9]+_backend\.so(\.[0-9]+)*", re.ASCII)


def python_scan(directories):
    """What a user would write by hand in Python."""
    seen, found = set(), []
    for directory in directories:
        for name in sorted(os.listdir(directory)):
            if NAME.fullmatch(name):
                canonical = os.path.realpath(os.path.join(directory, name))
                if os.path.isfile(canonical) and canonical not in seen:
                    seen.add(canonical)
                    found.append(canonical)
    return found


def compare(floor, directories, repeats):
    ours = loader.get_shared_objects(directories)
    assert ours == python_scan(directories)
    assert run_floor(floor, directories)[0] == len(ours)
    floor_times = []

    def floor_run():
        floor_times.append(run_floor(floor, directories)[1])

    times = interleaved({"ours": lambda: loader.get_shared_objects(directories),
                         "python": lambda: python_scan(directories),
                         "floor": floor_run}, repeats=repeats)
    floor_times.sort()
    floor_median = floor_times[len(floor_times) // 2]  # the program's own clock, not its start-up
    return len(ours), times["ours"], times["python"], floor_median


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-discovery-")
    try:
        floor = build_floor("scan_floor", work)
        print("P1 discovery                  found      ours    floor   python   ours/floor  ours/python")
        for label, directories, per in (("standard 4 x 2,500", 4, 2500), ("10x: 4 x 25,000", 4, 25000)):
            root = os.path.join(work, f"tree-{per}")
            paths = make_tree(root, directories, per)
            count, ours, python, floor_s = compare(floor, paths, args.repeats)
            print(f"   {label:<24} {count:7d} {ours * 1e3:7.2f}ms {floor_s * 1e3:6.2f}ms "
                  f"{python * 1e3:6.2f}ms {ours / floor_s:9.2f}x {ours / python:10.2f}x   (goal <= 1.5x floor)")
            shutil.rmtree(root)
        print("\nP1 growth (one directory)  entries   ours/entry  floor/entry  python-heap peak/entry")
        for entries in (10, 100, 1000, 10000, 100000):
            root = os.path.join(work, f"grow-{entries}")
            paths = make_tree(root, 1, entries)
            _, ours, _, floor_s = compare(floor, paths, max(3, args.repeats // 3))
            tracemalloc.start()
            loader.get_shared_objects(paths)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(f"   {entries:>27,d} {ours / entries * 1e9:9.0f} ns {floor_s / entries * 1e9:9.0f} ns "
                  f"{peak / entries:12.0f} B")
            shutil.rmtree(root)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
