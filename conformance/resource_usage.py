"""What this process holds, counted the same way by every loop of the kit that creates and
destroys backend objects, or runs one over and over (LIFE-1, LIFE-6): heap in use (mallinfo2),
memory mappings (/proc/self/maps: how many, and how many bytes), open file descriptors
(/proc/self/fd) and threads (/proc/self/task); of the backend host instead when the kit runs
the backend in one (there the heap is not counted).

A loop runs twice after settling; a kind of resource leaks when it grew by more than its limit in
both runs, so that a one-off (an arena, a cache, a pool started on first use) is not taken for a
leak. File descriptors and threads are also watched while a run goes on: a run stops as soon as
either grew past its limit, so that a leak cannot exhaust the worker's limits before it is
reported.
"""
import ctypes
import gc
import os
from typing import Callable, List, NamedTuple, Optional

HEAP_BYTES = 16            # heap growth per cycle
MAPPED_BYTES = 1 << 20     # mapped bytes added in a run
MAPPINGS = 32              # mappings added in a run
FDS = 8                    # file descriptors left open in a run
THREADS = 8                # threads left running in a run
WATCH_EVERY = 16           # cycles between looks at the descriptors and threads during a run


class Usage(NamedTuple):
    heap: Optional[int]    # bytes in use; None where the C library cannot tell (no mallinfo2)
    mappings: int
    mapped: int            # bytes
    fds: int
    threads: int


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_libc = ctypes.CDLL(None)
_mallinfo2 = getattr(_libc, "mallinfo2", None)
if _mallinfo2 is not None:
    _mallinfo2.restype = _MallInfo2


def heap_in_use() -> Optional[int]:
    if _mallinfo2 is None:
        return None
    info = _mallinfo2()
    return info.uordblks + info.hblkhd


def _entries(directory) -> int:
    return len(os.listdir(directory))


# Where the backend runs: this process, or (backend-conformance run --backend-host process) the
# backend host that serves it, whose process id this gives (its heap cannot be counted from here).
_host_pid: Optional[Callable[[], Optional[int]]] = None


def watch_host(pid: Optional[Callable[[], Optional[int]]]) -> None:
    """Count the resources of the process ``pid()`` names instead of this one (None: this)."""
    global _host_pid
    _host_pid = pid


def _proc() -> str:
    pid = _host_pid() if _host_pid is not None else None
    return "/proc/self" if pid is None else f"/proc/{pid}"


def usage() -> Usage:
    mappings = mapped = 0
    proc = _proc()
    with open(f"{proc}/maps") as f:
        for line in f:
            start, _, end = line.partition(" ")[0].partition("-")
            mappings += 1
            mapped += int(end, 16) - int(start, 16)
    return Usage(heap_in_use() if proc == "/proc/self" else None, mappings, mapped,
                 _entries(f"{proc}/fd"), _entries(f"{proc}/task"))


def _run(cycle: Callable[[], None], cycles: int, before: Usage):
    """(cycles run, usage after) for one run of ``cycle`` that started at ``before``."""
    ran = 0
    while ran < cycles:
        cycle()
        ran += 1
        if ran % WATCH_EVERY == 0 and (
                _entries(f"{_proc()}/fd") - before.fds > FDS
                or _entries(f"{_proc()}/task") - before.threads > THREADS):
            break
    gc.collect()
    return ran, usage()


def _growth(before: Usage, after: Usage) -> Usage:
    heap = None if before.heap is None or after.heap is None else after.heap - before.heap
    return Usage(heap, after.mappings - before.mappings, after.mapped - before.mapped,
                 after.fds - before.fds, after.threads - before.threads)


def leaks(cycle: Callable[[], None], cycles: int, what: str, unit: str, units: str,
          settle: int = 50) -> List[str]:
    """Run ``cycle`` ``settle`` times, then twice ``cycles`` times; one finding per kind of
    resource that grew past its limit in both runs (none: no leak). ``what`` names the objects
    (``workload factories``), ``unit`` one cycle (``create/destroy cycle``), ``units`` a run of
    them (``cycles``)."""
    for _ in range(settle):
        cycle()
    gc.collect()
    start = usage()
    ran1, middle = _run(cycle, cycles, start)
    ran2, end = _run(cycle, cycles, middle)
    first, second = _growth(start, middle), _growth(middle, end)
    runs = f"each of two runs of {ran1} {units}" if ran1 == ran2 == cycles else \
        f"a run of {ran1} {units}, then one of {ran2}"
    findings = []
    fds = min(first.fds, second.fds)
    if fds > FDS:
        findings.append(f"{what}: {first.fds} file descriptors opened and never closed over "
                        f"{ran1} {units}, then {second.fds} over {ran2} more "
                        f"({first.fds / ran1:.2g} per {unit})")
    threads = min(first.threads, second.threads)
    if threads > THREADS:
        findings.append(f"{what}: {first.threads} threads started and never ended over {ran1} "
                        f"{units}, then {second.threads} over {ran2} more "
                        f"({first.threads / ran1:.2g} per {unit})")
    mapped, mappings = min(first.mapped, second.mapped), min(first.mappings, second.mappings)
    if mapped > MAPPED_BYTES or mappings > MAPPINGS:
        more = f" in {mappings} more mappings" if mappings > 0 else ""
        findings.append(f"{what}: memory mapped and never unmapped, {mapped >> 10} KiB{more} in "
                        f"{runs} ({mapped / max(ran1, ran2):.0f} bytes per {unit})")
    if first.heap is not None:
        growth = min(first.heap, second.heap)
        if growth > HEAP_BYTES * max(ran1, ran2):
            findings.append(f"{what}: the heap grew by {growth / max(ran1, ran2):.0f} bytes per "
                            f"{unit} (at least {growth} bytes in {runs})")
    return findings
