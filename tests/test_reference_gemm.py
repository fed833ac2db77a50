"""The reference backend's packed SGEMM (fully connected and convolution) on the shapes its
blocking has to get right: partial micro-tiles in every dimension, several K blocks, K = 1,
N = 1, operands that end right before an unmapped page, more threads than cores, and the
portable kernels the -DRK_NO_AVX512 / -DRK_NO_X86_SIMD builds select, and the tile order a
unit takes when its B block is too large for row panels outer (every unit here, in the
-DRK_ROWS_OUTER_MAX_B=0 build)."""
import ctypes
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import loader
from helpers import compile_library, rand
from conformance import reference as ref

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "reference_backend")
CC = shutil.which("cc") or shutil.which("gcc")


@pytest.fixture(scope="module")
def backend():
    with loader.Runtime() as runtime:
        return runtime.create_backend("CpuRef")



def check_fc(y, x, w, bias, transpose):
    expected = ref.normalization.fully_connected(x, w, bias, transpose)
    # float32 sums of k products of N(0, 1) values: the error grows like sqrt(k)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=2e-5 * np.sqrt(x.shape[1]))


# (n, k, m): micro-tiles are 14 x 32 (AVX-512), 6 x 16 (AVX2) or 4 x 8, K blocks 256 floats,
# transposing packer steps of 16 along K. 301 x 259 x 333 is ~52 MFLOP: two threads or more.
# Up to 4 rows the weights are streamed instead: four rows of [m, k] weights or 64 columns of
# [k, m] ones at a time, 16 floats along K or M (a classifier's 1 x 1280 x 1000 among them).
FC_SHAPES = [(5, 3, 2), (5, 17, 1), (14, 32, 32), (15, 16, 33), (28, 64, 64), (29, 15, 31),
             (600, 1, 70), (97, 1000, 40), (40, 513, 97), (301, 259, 333),
             (1, 1, 1), (1, 37, 67), (2, 16, 4), (3, 33, 130), (4, 100, 7), (2, 9, 79), (1, 1280, 1000)]


@pytest.mark.parametrize("n, k, m", FC_SHAPES)
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("with_bias", [True, False])
def test_fully_connected_gemm_shapes(backend, n, k, m, transpose, with_bias):
    rng = np.random.default_rng(n * 1000003 + k * 1009 + m)
    x = rand(rng, n, k)
    w = rand(rng, m, k) if transpose else rand(rng, k, m)
    bias = rand(rng, m) if with_bias else None
    inputs = [x, w] + ([bias] if with_bias else [])
    [y] = backend.execute("FullyConnected", inputs, {"transpose_weights": transpose})
    check_fc(y, x, w, bias, transpose)


@pytest.mark.parametrize("rows", range(1, 14))
@pytest.mark.parametrize("k", [40, 300])                # one K block; two (accumulated)
def test_a_last_row_panel_of_few_rows_gives_the_bits_of_a_whole_panel(backend, rows, k):
    """A last row panel of 1 to 13 rows is computed for its rows alone (AVX-512: at most 7 a
    call): each row must be the same bits as where it is one of a whole panel's 14."""
    rng = np.random.default_rng(rows * 7 + k)
    n = 14 + rows                                      # a whole panel, then `rows`
    x = rand(rng, 28, k)                               # two whole panels
    w = rand(rng, 70, k)                               # two whole column panels and a half one
    b = rand(rng, 70)
    [y] = backend.execute("FullyConnected", [x[:n], w, b], {})
    [whole] = backend.execute("FullyConnected", [x, w, b], {})
    np.testing.assert_array_equal(y, whole[:n])
    check_fc(y, x[:n], w, b, True)


GUARDED = r"""
import ctypes, mmap, sys
import numpy as np
import loader
from conformance import reference as ref

libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
keep = []

def before_a_hole(shape):
    # a float32 array whose last element is the last 4 bytes before a PROT_NONE page
    nbytes = int(np.prod(shape)) * 4
    data_pages = -(-nbytes // mmap.PAGESIZE)
    m = mmap.mmap(-1, (data_pages + 1) * mmap.PAGESIZE)
    hole = ctypes.addressof(ctypes.c_char.from_buffer(m)) + data_pages * mmap.PAGESIZE
    assert libc.mprotect(hole, mmap.PAGESIZE, 0) == 0, ctypes.get_errno()
    a = np.frombuffer(m, np.float32, count=nbytes // 4, offset=data_pages * mmap.PAGESIZE - nbytes)
    keep.append(m)
    return a.reshape(shape)

rng = np.random.default_rng(5)
with loader.Runtime() as runtime:
    backend = runtime.create_backend("CpuRef")
for n, k, m in [(29, 37, 45), (15, 1, 33), (70, 300, 70), (1, 37, 47), (3, 17, 70)]:
    for transpose in (True, False):
        x = before_a_hole((n, k))
        x[...] = rng.standard_normal((n, k))
        w = before_a_hole((m, k) if transpose else (k, m))
        w[...] = rng.standard_normal(w.shape)
        [y] = backend.execute("FullyConnected", [x, w], {"transpose_weights": transpose})
        expected = ref.normalization.fully_connected(x, w, None, transpose)
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-3)
print("ok")
"""


def test_fully_connected_reads_nothing_past_its_operands():
    """x and the weights each end right before an unmapped page (K not a multiple of the
    packer's 16-float steps): a read past either one would crash the child."""
    result = subprocess.run([sys.executable, "-c", GUARDED], capture_output=True, text=True,
                            timeout=120, cwd=os.path.dirname(HERE))
    assert result.returncode == 0 and result.stdout.strip() == "ok", \
        (result.returncode, result.stderr[-2000:])


THREADED = r"""
import numpy as np
import loader
from conformance import reference as ref
rng = np.random.default_rng(9)
with loader.Runtime() as runtime:
    backend = runtime.create_backend("CpuRef")
for n, k, m, transpose in [(301, 259, 333, True), (513, 300, 97, False), (47, 700, 1500, True),
                           (1000, 64, 70, False)]:
    x = rng.standard_normal((n, k)).astype(np.float32)
    w = rng.standard_normal((m, k) if transpose else (k, m)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    for _ in range(3):      # the split among threads varies from call to call; results may not
        [y] = backend.execute("FullyConnected", [x, w, b], {"transpose_weights": transpose})
        np.testing.assert_allclose(y, ref.normalization.fully_connected(x, w, b, transpose), rtol=1e-4,
                                   atol=2e-5 * np.sqrt(k))
        [again] = backend.execute("FullyConnected", [x, w, b], {"transpose_weights": transpose})
        np.testing.assert_array_equal(again, y)
x = rng.standard_normal((1, 30, 30, 24)).astype(np.float32)
w = rng.standard_normal((40, 3, 3, 24)).astype(np.float32)
[y] = backend.execute("Convolution2d", [x, w], {"padding": 1})
np.testing.assert_allclose(y, ref.spatial.convolution2d(x, w, None, (1, 1), (1, 1, 1, 1), (1, 1)),
                           rtol=1e-4, atol=1e-3)
print("ok")
"""


@pytest.mark.parametrize("threads", ["3", "5"])
def test_gemm_results_do_not_depend_on_the_thread_count(threads):
    """Three and five threads on two cores: units split unevenly, some claimed late."""
    env = dict(os.environ, REFERENCE_BACKEND_THREADS=threads)
    result = subprocess.run([sys.executable, "-c", THREADED], capture_output=True, text=True,
                            timeout=120, cwd=os.path.dirname(HERE), env=env)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


# -- the portable kernels and the column-panels-outer tile order, built with the test hooks -----

@pytest.fixture(scope="module", params=["-DRK_NO_AVX512", "-DRK_NO_X86_SIMD", "-DRK_ROWS_OUTER_MAX_B=0"])
def portable_kernels(request, tmp_path_factory):
    sources = sorted(glob.glob(os.path.join(KERNELS, "*.c")))
    if CC is None or not sources:
        pytest.skip("needs a C compiler and the reference backend's sources")
    sources = [s for s in sources if os.path.basename(s) in
               ("gemm.c", "gemm_pack.c", "gemm_kernels.c", "fully_connected.c", "threading.c",
                "elementwise.c", "activation.c", "activation_avx512.c")]
    out = str(tmp_path_factory.mktemp("kernels") / "kernels.so")
    compile_library(CC, ["-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                         request.param], sources, out)
    lib = ctypes.CDLL(out)
    p = ctypes.c_void_p
    lib.rk_fully_connected.argtypes = [p, p, p, p, ctypes.c_int64, ctypes.c_int64,
                                       ctypes.c_int64, ctypes.c_int]
    return lib


@pytest.mark.parametrize("n, k, m", [(5, 3, 2), (7, 1, 9), (29, 15, 31), (97, 300, 40),
                                     (301, 259, 333)])
@pytest.mark.parametrize("transpose", [True, False])
def test_portable_kernels(portable_kernels, n, k, m, transpose):
    rng = np.random.default_rng(n + k + m)
    x = rand(rng, n, k)
    w = rand(rng, m, k) if transpose else rand(rng, k, m)
    bias = rand(rng, m)
    y = np.full((n, m), np.nan, np.float32)
    assert portable_kernels.rk_fully_connected(x.ctypes.data, w.ctypes.data, bias.ctypes.data,
                                               y.ctypes.data, n, k, m, int(transpose)) == 0
    check_fc(y, x, w, bias, transpose)
