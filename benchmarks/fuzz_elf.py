"""Hostile files: corrupted copies of the reference backend, each scanned alone in a child
process, in default (in-process) and isolated mode. Counts, per mode, host deaths (the scanning
process killed by a signal or gone without a report), hangs (no report within the timeout) and
escaped exceptions (a traceback out of ``loader.Runtime``), and saves each such mutant.

    python benchmarks/fuzz_elf.py [--mutants 2000] [--seed 1] [--jobs 2] [--save DIR]
    python benchmarks/fuzz_elf.py --only 137 --save DIR      # one mutant again, by its index

Mutant ``i`` of seed ``s`` is always the same bytes: truncations; byte flips concentrated in the
ELF header, the program headers, the dynamic section and the symbol, string, hash, version and
relocation tables; fields of those structures set to huge, wrapping or off-by-one values.
The test suite runs a small fixed set through ``run``; the full run is this script.
"""
import argparse
import collections
import json
import multiprocessing
import os
import random
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback

import reference_backend

BACKEND_NAME = "Acme_Fuzz_backend.so"
MODES = ("default", "isolated")
OUTCOMES = ("death", "hang", "exception")

# Sections whose bytes the dynamic linker reads while loading, by ELF section name.
# (Not code or data: a flipped byte there is a broken program, not a malformed file.)
_DYNAMIC_SECTIONS = (".dynamic", ".dynsym", ".dynstr", ".gnu.hash", ".hash", ".gnu.version",
                     ".gnu.version_r", ".gnu.version_d", ".rela.dyn", ".rela.plt", ".rel.dyn",
                     ".rel.plt")

# Field layouts (offset, size) of the 64-bit structures the mutations aim at.
_EHDR_FIELDS = [(4, 1), (5, 1), (6, 1), (16, 2), (18, 2), (20, 4), (24, 8), (32, 8), (40, 8),
                (48, 4), (52, 2), (54, 2), (56, 2), (58, 2), (60, 2), (62, 2)]
_PHDR_FIELDS = [(0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8), (48, 8)]
_ENTRY_FIELDS = {".dynamic": (16, [(0, 8), (8, 8)]),
                 ".dynsym": (24, [(0, 4), (4, 1), (5, 1), (6, 2), (8, 8), (16, 8)]),
                 ".rela.dyn": (24, [(0, 8), (8, 4), (12, 4), (16, 8)]),
                 ".rela.plt": (24, [(0, 8), (8, 4), (12, 4), (16, 8)]),
                 ".gnu.hash": (4, [(0, 4)]),
                 ".gnu.version": (2, [(0, 2)]),
                 ".gnu.version_r": (4, [(0, 2), (2, 2), (0, 4)])}


class Layout:
    """Where the interesting structures of the original file are."""

    def __init__(self, data):
        self.size = len(data)
        (self.phoff, self.shoff, _, _, self.phentsize, self.phnum, self.shentsize, self.shnum,
         shstrndx) = struct.unpack_from("<QQIHHHHHH", data, 32)
        self.regions = {"ehdr": (0, 64), "phdrs": (self.phoff, self.phnum * self.phentsize)}
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, self.shoff + i * self.shentsize)
                    for i in range(self.shnum)]
        names = sections[shstrndx]
        for section in sections:
            start = names[4] + section[0]
            name = data[start:data.index(b"\0", start)].decode()
            if name in _DYNAMIC_SECTIONS and section[1] != 8 and section[5]:  # not NOBITS
                self.regions[name] = (section[4], section[5])


_INTERESTING = (0, 1, 2, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFF, 0x1000, 0x7FFF, 0x8000, 0xFFFF,
                0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 32, 1 << 40, 1 << 63,
                (1 << 64) - 1, (1 << 64) - 8, (1 << 64) - 504, (1 << 64) - 0x1000)


def _value(rng, size, file_size):
    choice = rng.random()
    if choice < 0.5:
        value = rng.choice(_INTERESTING)
    elif choice < 0.7:
        value = file_size + rng.randint(-64, 64)
    elif choice < 0.85:
        value = rng.getrandbits(8 * size)
    else:
        value = rng.randint(0, 0x20000)
    return value & ((1 << (8 * size)) - 1)


def mutate(original, layout, seed, index):
    """(bytes, description) of mutant ``index`` of ``seed``: the same every time."""
    rng = random.Random(f"{seed}:{index}")
    data = bytearray(original)
    steps = []
    if rng.random() < 0.12:
        cut = rng.choice([rng.randint(0, 0x1000), rng.randint(0, layout.size),
                          layout.size - rng.randint(1, 0x4000)])
        cut = max(0, min(cut, layout.size - 1))
        steps.append(f"truncate {cut}")
        return bytes(data[:cut]), "; ".join(steps)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        region = rng.choice(["ehdr", "phdrs", "phdrs", ".dynamic", ".dynamic"] +
                            [name for name in layout.regions if name.startswith(".")])
        start, length = layout.regions.get(region, layout.regions[".dynamic"])
        if rng.random() < 0.55:
            if region == "ehdr":
                stride, fields = 64, _EHDR_FIELDS
            elif region == "phdrs":
                stride, fields = layout.phentsize, _PHDR_FIELDS
            else:
                stride, fields = _ENTRY_FIELDS.get(region, (8, [(0, 8), (0, 4)]))
            record = rng.randrange(max(1, length // stride))
            offset, size = rng.choice(fields)
            at = start + record * stride + offset
            if at + size > len(data):
                continue
            value = _value(rng, size, layout.size)
            data[at:at + size] = value.to_bytes(size, "little")
            steps.append(f"{region}+{at - start:#x} = {value:#x} ({size} bytes)")
        else:
            for _ in range(rng.randint(1, 4)):
                at = start + rng.randrange(max(1, length))
                value = (data[at] ^ (1 << rng.randrange(8)) if rng.random() < 0.5
                         else rng.randrange(256))
                data[at] = value
                steps.append(f"{region}+{at - start:#x} byte = {value:#x}")
    return bytes(data), "; ".join(steps) or "unchanged"


def _scan_in_child(directory, mode, probe_timeout):
    """Runs in the forked child: scan, write one JSON line to fd 1 of the pipe, exit."""
    import loader
    try:
        kwargs = {"probe": "isolated", "probe_timeout": probe_timeout} if mode == "isolated" else {}
        with loader.Runtime(dynamic_backends_path=directory, **kwargs) as runtime:
            entries = runtime.report["entries"]
        entry = entries[0] if entries else {}
        return {"reason": entry.get("reason"), "detail": entry.get("detail", "")}
    except BaseException:  # noqa: B902 - an escaped exception is what is being counted
        return {"exception": traceback.format_exc()}


def scan_alone(path, mode, timeout, probe_timeout):
    """Scan the directory holding ``path`` in a forked child. Returns (outcome, result) where
    outcome is None (a report came back), "death", "hang" or "exception"."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read_end)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            result = _scan_in_child(os.path.dirname(path), mode, probe_timeout)
            os.write(write_end, json.dumps(result).encode() + b"\n")
        finally:
            os._exit(0)
    os.close(write_end)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                os.killpg(pid, signal.SIGKILL) if _is_group_leader(pid) else os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "hang", {"detail": f"no report within {timeout:g} s"}
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        return "death", {"detail": f"killed by {signal.Signals(os.WTERMSIG(status)).name}"}
    if not text.strip():
        return "death", {"detail": f"exited with status {os.WEXITSTATUS(status)} and no report"}
    result = json.loads(text)
    return ("exception" if "exception" in result else None), result


def _is_group_leader(pid):
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


_worker = {}


def _init_worker(seed, timeout, probe_timeout, modes, parent):
    import loader  # noqa: F401 - imported once per worker, inherited by every child
    directory = tempfile.mkdtemp(dir=parent)
    original = open(reference_backend.LIBRARY_PATH, "rb").read()
    _worker.update(seed=seed, timeout=timeout, probe_timeout=probe_timeout, modes=modes,
                   directory=directory, original=original, layout=Layout(original))


def _run_one(index):
    w = _worker
    data, description = mutate(w["original"], w["layout"], w["seed"], index)
    subdir = os.path.join(w["directory"], str(index))
    os.mkdir(subdir)
    path = os.path.join(subdir, BACKEND_NAME)
    with open(path, "wb") as f:
        f.write(data)
    results = {}
    for mode in w["modes"]:
        results[mode] = scan_alone(path, mode, w["timeout"], w["probe_timeout"])
    shutil.rmtree(subdir)
    return index, description, data if any(r[0] for r in results.values()) else None, results


def run(indices, seed=1, jobs=2, timeout=20.0, probe_timeout=5.0, modes=MODES, save=None,
        progress=None):
    """Scan the mutants ``indices`` of ``seed``; returns the summary (see ``main``)."""
    summary = {"seed": seed, "mutants": 0, "modes": {
        mode: {"outcomes": {o: [] for o in OUTCOMES}, "reasons": collections.Counter()}
        for mode in modes}}
    if save:
        os.makedirs(save, exist_ok=True)
    context = multiprocessing.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="fuzz-elf-") as parent, \
            context.Pool(jobs, _init_worker, (seed, timeout, probe_timeout, tuple(modes), parent)) as pool:
        for index, description, data, results in pool.imap_unordered(_run_one, indices):
            summary["mutants"] += 1
            for mode, (outcome, result) in results.items():
                stats = summary["modes"][mode]
                if outcome is None:
                    stats["reasons"][result["reason"] or "registered"] += 1
                    continue
                record = {"index": index, "mutation": description,
                          "detail": result.get("detail") or result.get("exception", "")}
                stats["outcomes"][outcome].append(record)
                if save:
                    stem = os.path.join(save, f"{mode}-{outcome}-{seed}-{index}")
                    with open(stem + ".so", "wb") as f:
                        f.write(data)
                    with open(stem + ".txt", "w") as f:
                        f.write(f"{description}\n{record['detail']}\n")
            if progress:
                progress(summary)
    for stats in summary["modes"].values():
        for records in stats["outcomes"].values():
            records.sort(key=lambda r: r["index"])
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", type=int, action="append", help="run only this mutant index")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per scan")
    parser.add_argument("--probe-timeout", type=float, default=5.0)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--save", help="directory for the mutants that killed, hung or raised")
    parser.add_argument("--list", action="store_true", help="print each bad mutant")
    args = parser.parse_args(argv)
    indices = args.only or range(args.mutants)
    started = time.monotonic()
    summary = run(indices, args.seed, args.jobs, args.timeout, args.probe_timeout,
                  args.modes.split(","), args.save)
    elapsed = time.monotonic() - started
    n = summary["mutants"]
    print(f"fuzz_elf: {n} mutants of {os.path.basename(reference_backend.LIBRARY_PATH)}, "
          f"seed {args.seed}, {elapsed:.0f} s")
    print(f"{'mode':10} {'deaths':>14} {'hangs':>8} {'exceptions':>11}   most frequent reasons")
    for mode, stats in summary["modes"].items():
        counts = {o: len(stats["outcomes"][o]) for o in OUTCOMES}
        reasons = ", ".join(f"{r} {c}" for r, c in stats["reasons"].most_common(5))
        print(f"{mode:10} {counts['death']:6} ({100 * counts['death'] / max(n, 1):4.1f}%) "
              f"{counts['hang']:8} {counts['exception']:11}   {reasons}")
    for mode, stats in summary["modes"].items():
        for outcome in OUTCOMES:
            records = stats["outcomes"][outcome]
            if records and args.list:
                for r in records:
                    print(f"  {mode} {outcome} #{r['index']}: {r['mutation']} -> "
                          f"{r['detail'].strip().splitlines()[-1] if r['detail'].strip() else ''}")
    bad = sum(len(stats["outcomes"][o]) for stats in summary["modes"].values() for o in OUTCOMES)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
