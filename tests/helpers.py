"""Helpers for building backend directories in tests."""
import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import loader
import mock_backends
import reference_backend


def install(source, directory, name=None):
    """Copy a shared object into ``directory`` (under ``name``); returns the new path."""
    target = os.path.join(str(directory), name or os.path.basename(source))
    shutil.copyfile(source, target)
    return target


def install_mock(stem, directory, name=None):
    return install(mock_backends.path(stem), directory, name)


def install_reference(directory, name=None):
    return install(reference_backend.LIBRARY_PATH, directory, name)


def entry_for(report, file):
    """The report entry whose file is ``file`` (as found)."""
    matches = [e for e in report["entries"] if e["file"] == str(file)]
    assert len(matches) == 1, f"{file} appears {len(matches)} times in the report"
    return matches[0]


def scan(directory):
    """Scan one directory as a Runtime does; returns the report."""
    with loader.Runtime(dynamic_backends_path=str(directory)) as runtime:
        return runtime.report


def run_module(*args, env=None, env_extra=None, cwd="/"):
    """``python -m loader ARGS`` in a child process, away from the source checkout (by default);
    ``env_extra`` adds variables to this process's environment."""
    import subprocess
    import sys
    if env_extra is not None:
        env = {**(os.environ if env is None else env), **env_extra}
    return subprocess.run([sys.executable, "-m", "loader", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


def mapped(path):
    """Whether ``path`` is mapped into this process."""
    with open("/proc/self/maps") as f:
        return any(line.rstrip("\n").endswith(" " + path) for line in f)


def rand(rng, *shape):
    """Standard-normal float32 data of ``shape`` from the NumPy generator ``rng``."""
    return rng.standard_normal(shape).astype(np.float32)


# A test too slow for the contributor loop (a whole wheel build, valgrind): it runs with
# SLOW_TESTS=1, which .ci/run sets.
SLOW = os.environ.get("SLOW_TESTS") == "1"
slow = pytest.mark.skipif(not SLOW, reason="slow: set SLOW_TESTS=1 to run it (.ci/run does)")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compile_library(cc, flags, sources, out):
    """Compiles ``sources`` with ``flags`` into the shared library ``out`` (linked with libm and
    pthreads): one compiler per source, as many at a time as there are CPUs, then the link.
    A step that fails fails the test with the compiler's output."""
    objects = [f"{out}.{i}.o" for i in range(len(sources))]

    def run(command):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            pytest.fail(f"{' '.join(command)}\n{result.stdout}{result.stderr}"[-4000:], pytrace=False)

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        steps = [pool.submit(run, [cc, *flags, "-fPIC", "-c", source, "-o", obj])
                 for source, obj in zip(sources, objects)]
        for step in steps:
            step.result()
    run([cc, *flags, "-shared", "-fPIC", *objects, "-o", out, "-lm", "-pthread"])
    for obj in objects:
        os.remove(obj)
    return out


def build_reference(directory, defines, optimize="-O2"):
    """The reference backend compiled from this checkout's sources into ``directory`` with the
    given -D flags (thresholds lowered for a test); skips without a C compiler or the sources."""
    cc = shutil.which("cc") or shutil.which("gcc")
    sources = sorted(glob.glob(os.path.join(ROOT, "reference_backend", "*.c")))
    if cc is None or not sources:
        pytest.skip("needs a C compiler and the reference backend's sources")
    compile_library(cc, ["-std=c11", optimize, "-fwrapv", "-D_GNU_SOURCE", "-fvisibility=hidden",
                         "-I", os.path.join(ROOT, "abi"), *defines], sources,
                    os.path.join(str(directory), "Reference_CpuRef_backend.so"))
    return directory


def run_with_threads(code, threads, *args):
    """Runs ``code`` in a child Python with REFERENCE_BACKEND_THREADS set; returns its stdout
    lines (the child must exit 0)."""
    result = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                            text=True, timeout=120, cwd=ROOT,
                            env=dict(os.environ, REFERENCE_BACKEND_THREADS=str(threads)))
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.splitlines()
