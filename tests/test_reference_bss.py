"""The reference backend never trusts its .bss to start zeroed: a copy whose .bss is mapped from
bytes of the file (the writable PT_LOAD's p_filesz grown to its p_memsz) runs layers on its
thread pool and unloads cleanly in the default, in-process mode.

Such a file contradicts its own section table, which the loader refuses (test_hostile_elf); the
copies here have no section table, so nothing tells their .bss from data and only the backend's
own care keeps the process alive. The child runs under a timeout: garbage taken for a held lock
or a waiting thread hangs instead of failing."""
import os
import random
import struct
import subprocess
import sys

import pytest

from test_hostile_elf import Elf, _reference, _writable_load

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import os
import sys
import numpy as np
import loader
from conformance import reference as ref
threads = int(os.environ["REFERENCE_BACKEND_THREADS"])
with loader.Runtime(dynamic_backends_path=sys.argv[1]) as runtime:
    [entry] = runtime.report["entries"]
    assert entry["status"] == "registered", entry
    backend = runtime.create_backend("CpuRef")
    rng = np.random.default_rng(3)
    # 268 MFLOP: every thread allowed takes part; 59 MFLOP: two
    x = rng.standard_normal((512, 512)).astype(np.float32)
    w = rng.standard_normal((512, 512)).astype(np.float32)
    image = rng.standard_normal((1, 40, 40, 64)).astype(np.float32)
    filt = rng.standard_normal((32, 3, 3, 64)).astype(np.float32)
    for round in range(3):
        before = len(os.listdir("/proc/self/task"))
        [y] = backend.execute("FullyConnected", [x, w])
        if round == 0:  # the pool started its workers, as many as REFERENCE_BACKEND_THREADS says
            started = len(os.listdir("/proc/self/task")) - before
            assert started == threads - 1, (started, threads)
        np.testing.assert_allclose(y, ref.normalization.fully_connected(x, w, None, True), rtol=1e-4, atol=1e-3)
        [y] = backend.execute("Convolution2d", [image, filt], {"padding": 1})
        expected = ref.spatial.convolution2d(image, filt, padding=(1, 1, 1, 1))
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-3)
print("ok")
"""

# What the .bss starts as: the file's own bytes past the data (debugging data, symbols), or a
# pattern over them; zeros show that the copy itself is sound.
FILLS = {"file bytes": None, "0xff bytes": lambda n: b"\xff" * n,
         "random bytes": lambda n: random.Random(7).randbytes(n), "zero bytes": bytes}


def _garbage_bss_copy(directory, fill):
    elf = Elf(_reference())
    index = _writable_load(elf)
    offset = elf.get(elf.field(index, "offset"))
    filesz, memsz = elf.get(elf.field(index, "filesz")), elf.get(elf.field(index, "memsz"))
    assert memsz - filesz >= 4096, "the reference backend's .bss holds the thread pool"
    elf.put(elf.field(index, "filesz"), memsz)
    end = offset + memsz
    if len(elf.data) < end:  # a file without much after its data (stripped): make the bytes
        elf.data.extend(b"\xa5" * (end - len(elf.data)))
    if fill is not None:
        elf.data[offset + filesz:end] = fill(memsz - filesz)
    elf.put(40, 0)            # e_shoff, e_shnum, e_shstrndx: no section table
    elf.put(60, 0, 2)
    elf.put(62, 0, 2)
    path = directory / "Reference_CpuRef_backend.so"
    path.write_bytes(bytes(elf.data))
    return path


@pytest.mark.skipif(struct.calcsize("P") != 8 or sys.byteorder != "little",
                    reason="the test edits 64-bit little-endian ELF files")
@pytest.mark.parametrize("fill", sorted(FILLS))
@pytest.mark.parametrize("threads", ["2", "3"])
def test_a_reference_backend_whose_bss_holds_garbage_runs_layers_and_unloads(tmp_path, fill,
                                                                             threads):
    _garbage_bss_copy(tmp_path, FILLS[fill])
    env = dict(os.environ, REFERENCE_BACKEND_THREADS=threads)
    try:
        result = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                                text=True, timeout=30, cwd=REPO, env=env)
    except subprocess.TimeoutExpired as expired:
        result = expired
    if isinstance(result, subprocess.TimeoutExpired):
        pytest.fail(f"hung; it had printed {result.stdout!r}")
    assert result.returncode == 0 and result.stdout.strip() == "ok", (result.returncode,
                                                                      result.stderr[-2000:])
