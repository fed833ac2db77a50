"""P2: loading and registering distinct valid backends, per backend, against the dlopen floor
(dlopen + three dlsym + entry-point calls, floors/dlopen_floor.c) and a ctypes loop; then how it
grows with the number of backends.

    python benchmarks/bench_loading.py [--repeats N]

Every measurement runs in a fresh process (a library already loaded would cost nothing) and
times itself after start-up. The floor is measured twice: in a bare C process, and inside a
Python process that imported the loader (dlopen itself costs more there, with more libraries
already loaded). Goal: at most 1.3x the floor per backend.

Then deferred start-up: 200 installed backends, each needing its own library whose constructor
spins for about 1 ms (as real drivers take time to load), one of them used: the time from
nothing to a usable backend (Runtime + create_backend) with eager loading, with deferred loading
(warm backend cache), and the floor of stat-ing the 200 files plus one dlopen
(floors/stat_dlopen_floor.c), in a bare C process and, like P2's, inside a Python process that
imported the loader. Goals: deferred >= 10x faster than eager, <= 1.5x the floor.

    python benchmarks/bench_loading.py --only p2|deferred
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _fixtures import (build_floor, make_backends, make_backends_with_dependencies,  # noqa: E402
                       run_floor)

FIRST_USE = """
import sys, time, loader
started = time.perf_counter_ns()
runtime = loader.Runtime(dynamic_backends_path=sys.argv[1], load=sys.argv[2])
backend = runtime.create_backend(sys.argv[3])
elapsed = time.perf_counter_ns() - started
print(len(runtime.backend_ids), elapsed)
"""

OURS = """
import sys, time, loader
started = time.perf_counter_ns()
runtime = loader.Runtime(dynamic_backends_path=sys.argv[1])
elapsed = time.perf_counter_ns() - started
print(len(runtime.backend_ids), elapsed)
"""

INPROCESS_FLOOR = """
import ctypes, sys, time, loader  # the same libraries as the loader's process
floor = ctypes.CDLL(sys.argv[1])
floor.load_all.restype = ctypes.c_int64
paths = (ctypes.c_char_p * (len(sys.argv) - 2))(*[p.encode() for p in sys.argv[2:]])
loaded = ctypes.c_int()
elapsed = floor.load_all(paths, len(sys.argv) - 2, ctypes.byref(loaded))
print(loaded.value, elapsed)
"""

INPROCESS_STAT_FLOOR = """
import ctypes, sys, loader  # the same libraries as the loader's process
floor = ctypes.CDLL(sys.argv[1])
floor.stat_and_load.restype = ctypes.c_int64
files = (ctypes.c_char_p * (len(sys.argv) - 3))(*[p.encode() for p in sys.argv[3:]])
ok = ctypes.c_int()
elapsed = floor.stat_and_load(sys.argv[2].encode(), files, len(sys.argv) - 3, ctypes.byref(ok))
print(ok.value, elapsed)
"""

CTYPES = """
import ctypes, sys, time
started = time.perf_counter_ns(); ok = 0
for path in sys.argv[1:]:
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    lib.GetBackendId.restype = ctypes.c_char_p
    lib.BackendFactory.restype = ctypes.c_void_p
    a, b = ctypes.c_uint32(), ctypes.c_uint32()
    lib.GetVersion(ctypes.byref(a), ctypes.byref(b))
    if lib.GetBackendId() and a.value == 1 and lib.BackendFactory():
        ok += 1
print(ok, time.perf_counter_ns() - started)
"""


def timed(command):
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd="/").stdout
    count, nanoseconds = out.split()
    return int(count), int(nanoseconds) / 1e9


def measure(floor, inprocess, directory, paths, repeats):
    samples = {"ours": [], "floor": [], "inprocess": [], "ctypes": []}
    for _ in range(repeats):  # interleaved rounds
        count, seconds = timed([sys.executable, "-c", OURS, directory])
        assert count == len(paths), count
        samples["ours"].append(seconds)
        count, seconds = run_floor(floor, paths)
        assert count == len(paths), count
        samples["floor"].append(seconds)
        count, seconds = timed([sys.executable, "-c", INPROCESS_FLOOR, inprocess, *paths])
        assert count == len(paths), count
        samples["inprocess"].append(seconds)
        if len(paths) <= 1000:  # ctypes gets slow; the comparison is made on the small sets
            samples["ctypes"].append(timed([sys.executable, "-c", CTYPES, *paths])[1])
    return {k: statistics.median(v) / len(paths) if v else None for k, v in samples.items()}


def build_inprocess_floor(directory, name="dlopen_inprocess", *flags):
    import loader
    cc = shutil.which("cc") or shutil.which("gcc")
    library = os.path.join(directory, name + ".so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", *flags, "-I", loader.get_include(),
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "floors",
                                 name + ".c"), "-o", library, "-ldl"], check=True)
    return library


def deferred_start_up(work, repeats, count=200):
    directory = os.path.join(work, "installed")
    os.makedirs(directory)
    paths = make_backends_with_dependencies(directory, count)
    used = count // 2
    used_id = f"Bench{used:08d}"
    floor = build_floor("stat_dlopen_floor", work)
    inprocess = build_inprocess_floor(work, "stat_dlopen_floor", "-DFLOOR_LIBRARY")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache"))
    env.pop("DYNAMIC_BACKEND_LOAD", None)

    def first_use(mode):
        out = subprocess.run([sys.executable, "-c", FIRST_USE, directory, mode, used_id],
                             capture_output=True, text=True, check=True, cwd="/", env=env).stdout
        registered, nanoseconds = out.split()
        assert int(registered) == count, registered
        return int(nanoseconds) / 1e9

    first_use("deferred")  # fills the backend cache
    samples = {"eager": [], "deferred": [], "floor": [], "inprocess": []}
    for _ in range(repeats):  # interleaved rounds
        samples["eager"].append(first_use("eager"))
        samples["deferred"].append(first_use("deferred"))
        ok, seconds = run_floor(floor, [paths[used], *paths])
        assert ok == 1
        samples["floor"].append(seconds)
        ok, seconds = timed([sys.executable, "-c", INPROCESS_STAT_FLOOR, inprocess, paths[used],
                             *paths])
        assert ok == 1
        samples["inprocess"].append(seconds)
    eager, lazy, bound, inside = (statistics.median(samples[k])
                                  for k in ("eager", "deferred", "floor", "inprocess"))
    print(f"\nDeferred start-up: {count} installed backends (each needing a library whose "
          f"constructor takes ~1 ms), one used; median of {repeats}")
    print(f"   eager    {eager * 1e3:9.2f} ms")
    print(f"   deferred {lazy * 1e3:9.2f} ms   eager/deferred {eager / lazy:6.1f}x  (goal >= 10x)")
    print(f"   floor    {bound * 1e3:9.2f} ms   deferred/floor {lazy / bound:6.2f}x  "
          f"(goal <= 1.5x; stat of {count} files + one dlopen, bare C process)")
    print(f"   in-python-floor {inside * 1e3:5.2f} ms   deferred/in-python-floor "
          f"{lazy / inside:6.2f}x  (the same, inside a Python process that imported the loader)")


def compile_bytecode():
    """Byte-compile the loader's modules, as an installation does: with PYTHONDONTWRITEBYTECODE
    set (or an editable checkout never imported), every fresh process would otherwise compile
    the modules the timed code imports on first use (loader.isolation, for instance)."""
    import compileall
    import loader
    compileall.compile_dir(os.path.dirname(loader.__file__), quiet=2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("p2", "deferred"),
                        help="p2: only the 200-backend row (no growth table); deferred: only "
                             "the deferred start-up")
    args = parser.parse_args()
    compile_bytecode()
    work = tempfile.mkdtemp(prefix="bench-loading-")
    try:
        if args.only != "p2":
            deferred_start_up(work, args.repeats)
        if args.only == "deferred":
            return
        floor = build_floor("dlopen_floor", work)
        inprocess = build_inprocess_floor(work)
        print("P2 loading      backends  ours/backend floor/backend in-python-floor ctypes/backend"
              "  ours/floor ours/in-python-floor")
        for count in (200,) if args.only == "p2" else (200, 10, 100, 1000, 10000):
            directory = os.path.join(work, f"set-{count}")
            os.makedirs(directory)
            paths = make_backends(directory, count)
            result = measure(floor, inprocess, directory, sorted(paths),
                             args.repeats if count <= 1000 else 3)
            ctypes_text = f"{result['ctypes'] * 1e6:10.1f} µs" if result["ctypes"] else "         -   "
            goal = "  (goal: ours/in-python-floor <= 1.3x)" if count == 200 else ""
            print(f"   {'P2' if count == 200 else 'growth':<12} {count:>8,d} {result['ours'] * 1e6:9.1f} µs "
                  f"{result['floor'] * 1e6:9.1f} µs {result['inprocess'] * 1e6:11.1f} µs    {ctypes_text} "
                  f"{result['ours'] / result['floor']:7.2f}x {result['ours'] / result['inprocess']:10.2f}x"
                  f"{goal}")
            shutil.rmtree(directory)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
