"""Stress and hostile-filesystem figures for the loader.

    python benchmarks/stress.py [--cycles 1000] [--threads 8] [--per-thread 100]

1. open/close cycles of a Runtime with the reference backend: file descriptors and RSS before
   and after (a leak shows as growth);
2. many threads creating, using and closing runtimes at once: errors and time;
3. the hostile-filesystem matrix: each entry kind alone in a directory, scanned, with the time
   taken and the reason reported; plus files removed and replaced while scans run.
"""
import argparse
import gc
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

import numpy as np

import loader
import reference_backend


def fd_count():
    return len(os.listdir("/proc/self/fd"))


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cycles(directory, count):
    for _ in range(20):  # warm up allocators and imports
        with loader.Runtime(dynamic_backends_path=directory) as runtime:
            runtime.create_backend("CpuRef").close()
    gc.collect()
    fds, rss = fd_count(), rss_kib()
    started = time.perf_counter()
    for _ in range(count):
        with loader.Runtime(dynamic_backends_path=directory) as runtime:
            runtime.create_backend("CpuRef").close()
    elapsed = time.perf_counter() - started
    gc.collect()
    print(f"1. {count} runtime open/close cycles: {elapsed:.2f} s ({elapsed / count * 1e6:.0f} µs each); "
          f"fds {fds} -> {fd_count()}; RSS {rss} -> {rss_kib()} KiB")


def threads(directory, count, per_thread):
    errors, done = [], []

    def work():
        try:
            for _ in range(per_thread):
                with loader.Runtime(dynamic_backends_path=directory) as runtime:
                    backend = runtime.create_backend("CpuRef")
                    backend.execute("Activation", [np.array([1.0, -1.0], np.float32)],
                                    {"function": "relu"})
                done.append(1)
        except Exception as error:
            errors.append(error)

    started = time.perf_counter()
    workers = [threading.Thread(target=work) for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    print(f"2. {count} threads x {per_thread} runtimes (create, execute, close): {elapsed:.2f} s, "
          f"{len(done)} threads finished, {len(errors)} errors"
          + (f" (first: {errors[0]!r})" if errors else ""))


def _chain(directory, name, length):
    target = "Link_Target_backend.so"
    shutil.copy(reference_backend.LIBRARY_PATH, os.path.join(directory, target))
    previous = target
    for i in range(length - 1):
        link = f"chain{i}"
        os.symlink(previous, os.path.join(directory, link))
        previous = link
    os.symlink(previous, os.path.join(directory, name))


MATRIX = {
    "fifo": lambda d, n: os.mkfifo(os.path.join(d, n)),
    "socket": lambda d, n: socket.socket(socket.AF_UNIX).bind(os.path.join(d, n)),
    "device link": lambda d, n: os.symlink("/dev/zero", os.path.join(d, n)),
    "directory": lambda d, n: os.mkdir(os.path.join(d, n)),
    "loop": lambda d, n: os.symlink(n, os.path.join(d, n)),
    "dangling": lambda d, n: os.symlink("nowhere", os.path.join(d, n)),
    "40-link chain": lambda d, n: _chain(d, n, 40),
    "41-link chain": lambda d, n: _chain(d, n, 41),
    "text file": lambda d, n: open(os.path.join(d, n), "w").write("text"),
    "empty file": lambda d, n: open(os.path.join(d, n), "w").close(),
}


def matrix():
    print("3. hostile filesystem matrix (one entry per directory; the scan of it):")
    for kind, make in MATRIX.items():
        directory = tempfile.mkdtemp()
        try:
            make(directory, "Hostile_Entry_backend.so")
            started = time.perf_counter()
            with loader.Runtime(dynamic_backends_path=directory) as runtime:
                entry = next(e for e in runtime.report["entries"]
                             if e["file"].endswith("Hostile_Entry_backend.so"))
            elapsed = time.perf_counter() - started
            outcome = entry["reason"] or f"registered {entry['backend_id']}"
            print(f"   {kind:<16} {elapsed * 1e3:7.2f} ms  {outcome}: {entry['detail'][:70]}")
        finally:
            shutil.rmtree(directory)
    directory = tempfile.mkdtemp()
    try:
        odd = [b"Bad\xff_Name_backend.so", b"A" * 231 + b"_B_backend.so." + b"1" * 10]
        for name in odd:
            with open(os.path.join(os.fsencode(directory), name), "wb") as f:
                f.write(b"x")
        started = time.perf_counter()
        with loader.Runtime(dynamic_backends_path=directory) as runtime:
            reasons = [e["reason"] for e in runtime.report["entries"]]
        elapsed = time.perf_counter() - started
        print(f"   {'non-UTF-8 name':<16} and {'255-byte name':<14} {elapsed * 1e3:6.2f} ms  {reasons}")
    finally:
        shutil.rmtree(directory)
    churn()


def churn(seconds=2.0):
    """Files removed, recreated and replaced by a link while scans run."""
    directory = tempfile.mkdtemp()
    stop = threading.Event()
    names = [f"Churn_N{i}_backend.so" for i in range(20)]

    def mutate():
        i = 0
        while not stop.is_set():
            path = os.path.join(directory, names[i % len(names)])
            try:
                if i % 3 == 0:
                    os.unlink(path)
                elif i % 3 == 1:
                    shutil.copy(reference_backend.LIBRARY_PATH, path + ".tmp")
                    os.replace(path + ".tmp", path)
                else:
                    os.symlink("vanishing", path + ".lnk")
                    os.replace(path + ".lnk", path)
            except OSError:
                pass
            i += 1

    for name in names:
        shutil.copy(reference_backend.LIBRARY_PATH, os.path.join(directory, name))
    mutator = threading.Thread(target=mutate)
    mutator.start()
    scans, errors, reasons = 0, [], {}
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            try:
                with loader.Runtime(dynamic_backends_path=directory) as runtime:
                    for entry in runtime.report["entries"]:
                        key = entry["reason"] or "registered"
                        reasons[key] = reasons.get(key, 0) + 1
                scans += 1
            except Exception as error:
                errors.append(error)
    finally:
        stop.set()
        mutator.join()
        shutil.rmtree(directory)
    print(f"   {'churn':<16} {scans} scans in {seconds:g} s while files were removed and "
          f"replaced: {len(errors)} exceptions; outcomes {dict(sorted(reasons.items()))}")


def main():
    logging.getLogger("loader").setLevel(logging.ERROR)  # the figures, not a warning per skip
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--per-thread", type=int, default=100)
    args = parser.parse_args()
    directory = tempfile.mkdtemp()
    try:
        shutil.copy(reference_backend.LIBRARY_PATH, directory)
        cycles(directory, args.cycles)
        threads(directory, args.threads, args.per_thread)
    finally:
        shutil.rmtree(directory)
    matrix()
    return 0


if __name__ == "__main__":
    sys.exit(main())
