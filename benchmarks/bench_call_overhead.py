"""Cost of a trivial call from Python into a backend, against a plain Cython call and a ctypes
call doing the same work.

    python benchmarks/bench_call_overhead.py [--calls N] [--repeats N]

- backend:  Backend.get_id(), which calls the instance's get_id() through the loader;
- cython:   a method of a cdef class, compiled here, that calls the same kind of C function
            (through a function pointer) and decodes the string the same way;
- ctypes:   GetBackendId() of the reference backend through ctypes.
Prints nanoseconds per call and the ratio to the Cython call (goal: <= 1.5).
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, per_call  # noqa: E402

import loader  # noqa: E402
import reference_backend  # noqa: E402

BASELINE = '''
# cython: language_level=3
cdef extern from *:
    """
    static const char *baseline_id(const void *self) { (void)self; return "CpuRef"; }
    typedef const char *(*baseline_fn)(const void *);
    """
    ctypedef const char *(*baseline_fn)(const void *) noexcept nogil
    const char *baseline_id(const void *self) noexcept nogil

cdef class Baseline:
    cdef baseline_fn fn
    def __cinit__(self):
        self.fn = baseline_id
    def get_id(self):
        cdef const char *raw = self.fn(<void *>self)
        return raw[:6].decode("ascii")
'''


def build_baseline(directory):
    with open(os.path.join(directory, "call_baseline.pyx"), "w") as f:
        f.write(BASELINE)
    with open(os.path.join(directory, "setup.py"), "w") as f:
        f.write("from setuptools import setup\nfrom Cython.Build import cythonize\n"
                "setup(ext_modules=cythonize('call_baseline.pyx', quiet=True))\n")
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=directory,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sys.path.insert(0, directory)
    import call_baseline
    return call_baseline.Baseline()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        try:
            baseline = build_baseline(directory)
        except (subprocess.CalledProcessError, ImportError) as error:
            sys.exit(f"cannot build the Cython baseline (needs Cython and a C compiler): {error}")
        with loader.Runtime() as runtime:
            backend = runtime.create_backend("CpuRef")
        library = ctypes.CDLL(reference_backend.LIBRARY_PATH, mode=ctypes.RTLD_LOCAL)
        library.GetBackendId.restype = ctypes.c_char_p
        get_id_ctypes = library.GetBackendId
        assert backend.get_id() == baseline.get_id() == get_id_ctypes().decode() == "CpuRef"

        times = interleaved({
            "backend": per_call(backend.get_id, args.calls),
            "cython": per_call(baseline.get_id, args.calls),
            "ctypes": per_call(get_id_ctypes, args.calls),
        }, repeats=args.repeats)
    ns = {name: t / args.calls * 1e9 for name, t in times.items()}
    for name in ("backend", "cython", "ctypes"):
        print(f"{name:<8} {ns[name]:7.1f} ns/call   ratio to cython {ns[name] / ns['cython']:5.2f}")
    print(f"backend / cython = {ns['backend'] / ns['cython']:.2f} (goal <= 1.5); "
          f"backend / ctypes = {ns['backend'] / ns['ctypes']:.2f}")


if __name__ == "__main__":
    main()
