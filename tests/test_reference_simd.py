"""The reference backend's 16-lane (AVX-512) kernels against the float64 references and against
the portable code they stand in for: the activations of every fused epilogue (with and without
a residual, every tail length), built once as the backend is and once with the test hook
-DRK_NO_AVX512, which must give the same bits."""
import ctypes
import os
import shutil

import numpy as np
import pytest

from conformance import reference as ref
from conformance.reference.elementwise import activation as reference_activation
from helpers import compile_library
from loader.layers.elementwise import _ACTIVATIONS, GELU_TANH

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "reference_backend")
CC = shutil.which("cc") or shutil.which("gcc")
SOURCES = ("activation.c", "activation_avx512.c", "elementwise.c", "threading.c", "gemm.c",
           "gemm_pack.c", "gemm_kernels.c", "reduce.c", "pooling.c", "softmax.c")


def has_avx512():
    with open("/proc/cpuinfo") as f:
        return " avx512f" in f.read()


class Epilogue(ctypes.Structure):
    _fields_ = [("residual", ctypes.c_void_p), ("ldr", ctypes.c_int64), ("function", ctypes.c_int),
                ("a", ctypes.c_float), ("b", ctypes.c_float)]


class ReducePlan(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("extent", ctypes.c_int64 * 6), ("reduced", ctypes.c_uint32),
                ("function", ctypes.c_int), ("count", ctypes.c_int64)]


class ConvParams(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in
                ("n", "h", "w", "c", "kh", "kw", "stride_h", "stride_w", "dil_h", "dil_w",
                 "pad_top", "pad_bottom", "pad_left", "pad_right", "oh", "ow")]


def build(tmp_path_factory, flag):
    sources = [os.path.join(KERNELS, s) for s in SOURCES]
    if CC is None or not all(os.path.exists(s) for s in sources):
        pytest.skip("needs a C compiler and the reference backend's sources")
    out = str(tmp_path_factory.mktemp("simd") / "kernels.so")
    compile_library(CC, ["-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                         *([flag] if flag else [])], sources, out)
    lib = ctypes.CDLL(out)
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.rk_activation.argtypes = [p, p, i64, ctypes.c_int, ctypes.c_float, ctypes.c_float]
    lib.rk_apply_epilogue.argtypes = [ctypes.POINTER(Epilogue), p, i64, i64, i64, i64, i64]
    lib.rk_apply_epilogue.restype = None
    lib.rk_reduce.argtypes = [p, p, ctypes.POINTER(ReducePlan)]
    lib.rk_pool2d.argtypes = [p, p, ctypes.POINTER(ConvParams), ctypes.c_int, ctypes.c_int]
    lib.rk_softmax.argtypes = [p, p, i64, i64, ctypes.c_float]
    return lib


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """(as the backend is built, portable 4-lane build)"""
    if not has_avx512():
        pytest.skip("the 16-lane kernels need a CPU with AVX-512F")
    return build(tmp_path_factory, None), build(tmp_path_factory, "-DRK_NO_AVX512")


# the functions the 16-lane epilogue covers, with parameters away from the defaults too (gelu_tanh:
# gelu with 'approximate': 'tanh')
FUNCTIONS = [("relu", None, None), ("bounded_relu", 6.0, 0.0), ("bounded_relu", 1.0, -1.0),
             ("clip", -0.5, 2.0), ("leaky_relu", 0.1, None), ("hard_sigmoid", None, None),
             ("hard_swish", None, None), ("sigmoid", None, None), ("swish", None, None),
             ("swish", 1.702, None), ("gelu", None, None), ("gelu_tanh", None, None)]
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.7, 89.5, -87.0, -103.0, -110.0, 1e-30,
                    -1e-30, 3.0, -3.0, 6.0, 1e-45, -20.0, 20.0], np.float32)


def inputs(count, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(count) * 8).astype(np.float32)
    x[: min(count, len(SPECIAL))] = SPECIAL[: min(count, len(SPECIAL))]
    return x


def code_of(function):
    """The C code of an activation function; "gelu_tanh" is gelu with 'approximate': 'tanh'."""
    return GELU_TANH if function == "gelu_tanh" else _ACTIVATIONS[function][0]


def parameters(function, a, b):
    _, a_default, b_default = _ACTIVATIONS["gelu" if function == "gelu_tanh" else function]
    return (a_default or 0.0) if a is None else a, (b_default or 0.0) if b is None else b


def reference(x, function, a, b):
    if function == "gelu_tanh":
        return reference_activation(x, "gelu", approximate="tanh")
    return reference_activation(x, function, a, b)


def same_bits(got, want):
    """Equal bit for bit, except that a NaN's sign and payload are free."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(got)
    np.testing.assert_array_equal(got[keep].view(np.uint32), want[keep].view(np.uint32))


# The sigmoid's 16 lanes compute e^-|x| and 1 / (1 + e^-|x|) with fused multiply-adds and a
# reciprocal estimate: a few units in the last place from the 4-lane code, not its bits.
ULPS = {"sigmoid": 4, "swish": 4}


def agree(got, want, function):
    if function not in ULPS:
        same_bits(got, want)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(got)
    g, w = got[keep], want[keep]
    np.testing.assert_array_equal(np.sign(g), np.sign(w))
    # float32 bit patterns of one sign are ordered like their values
    ulps = np.abs(g.view(np.int32).astype(np.int64) - w.view(np.int32).astype(np.int64))
    assert ulps.max(initial=0) <= ULPS[function], (ulps.max(), g[ulps.argmax()], w[ulps.argmax()])


def expect_close(y, x, function, a, b):
    with np.errstate(invalid="ignore"):
        want = reference(x, function, a, b)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(y[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    np.testing.assert_allclose(y[finite], want[finite], rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("function, a, b", FUNCTIONS)
def test_activation_16_lanes_matches_the_portable_code_and_the_reference(kernels, function, a, b):
    wide, portable = kernels
    code = code_of(function)
    a, b = parameters(function, a, b)
    for count in list(range(1, 40)) + [1000]:
        x = inputs(count, count)
        got = np.full(count + 1, 7.0, np.float32)     # one guard element past the end
        want = np.full(count + 1, 7.0, np.float32)
        assert wide.rk_activation(x.ctypes.data, got.ctypes.data, count, code, a, b) == 0
        assert portable.rk_activation(x.ctypes.data, want.ctypes.data, count, code, a, b) == 0
        agree(got, want, function)
        assert got[count] == 7.0
        expect_close(got[:count], x, function, a, b)


@pytest.mark.parametrize("function, a, b", FUNCTIONS + [("none", None, None)])
def test_epilogue_adds_the_residual_then_activates_every_tail(kernels, function, a, b):
    """A 5 x cols block inside a wider output (row stride 53), its residual offset by the
    block's row and column: every column count from 1 to 33 (16-lane tails included)."""
    wide, portable = kernels
    code = -1 if function == "none" else code_of(function)
    a, b = (0.0, 0.0) if function == "none" else parameters(function, a, b)
    rng = np.random.default_rng(3)
    for cols in range(1, 34):
        c0 = (rng.standard_normal((9, 53)) * 4).astype(np.float32)
        residual = (rng.standard_normal((12, 60)) * 4).astype(np.float32)
        outs = []
        for lib in (wide, portable):
            c = c0.copy()
            e = Epilogue(residual.ctypes.data, 60, code, a, b)
            # rows 2..6 and columns 3.. of the block; the residual of output row 2 + 4, column 3 + 5
            lib.rk_apply_epilogue(ctypes.byref(e), c[2:].ctypes.data + 3 * 4, 53, 4, 5, 5, cols)
            outs.append(c)
        agree(outs[0], outs[1], function)
        touched = np.zeros_like(c0, bool)
        touched[2:7, 3:3 + cols] = True
        np.testing.assert_array_equal(outs[0][~touched], c0[~touched])
        summed = c0[2:7, 3:3 + cols].astype(np.float64) + residual[4:9, 5:5 + cols]
        want = summed if function == "none" else reference(summed, function, a, b)
        np.testing.assert_allclose(outs[0][2:7, 3:3 + cols], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("beta", [1.0, 0.125, -2.0])
def test_softmax_rows_of_16_lanes_give_the_portable_bits(kernels, beta):
    """Rows of every length from 1 to 40, and a transformer's 197 and 1000: each exponential,
    the order of the sum and each quotient as the 4-lane code has them, so the same bits; with
    infinities, NaN (first and later in a row), signed zeros and values whose exponentials
    underflow; in place too."""
    wide, portable = kernels
    for cols in list(range(1, 41)) + [197, 1000]:
        rng = np.random.default_rng(cols)
        x = (rng.standard_normal((6, cols)) * 30).astype(np.float32)
        x[1, : min(cols, 4)] = [np.inf, -np.inf, -0.0, 0.0][: min(cols, 4)]
        x[2, cols // 2] = np.nan
        x[3, 0] = np.nan
        x[4, :] = -0.0
        x[5, : cols // 2] = -1e30
        outs = []
        for lib in (wide, portable):
            y = np.full((6, cols + 1), 7.0, np.float32)     # one guard element past each row
            for r in range(6):
                assert lib.rk_softmax(x[r].ctypes.data, y[r].ctypes.data, 1, cols, beta) == 0
            inplace = x.copy()
            assert lib.rk_softmax(inplace.ctypes.data, inplace.ctypes.data, 6, cols, beta) == 0
            same_bits(inplace, y[:, :cols])
            assert (y[:, cols] == 7.0).all()
            outs.append(y[:, :cols])
        same_bits(outs[0], outs[1])
        finite = np.isfinite(x).all(axis=1)
        with np.errstate(invalid="ignore", over="ignore"):
            want = ref.normalization.softmax(x[finite], beta)
        np.testing.assert_allclose(outs[0][finite], want, rtol=1e-5, atol=1e-7)


# -- convolutions of few channels (an image's first layer) -------------------------------------

@pytest.mark.parametrize("rows, columns", [(1, 1), (7, 15), (9, 16), (10, 37), (203, 150), (12544, 32)])
def test_column_sums_of_a_global_pooling_match_the_portable_code(kernels, rows, columns):
    """The mean of each column of rows x columns (a channels-last image's pixels by its
    channels): the 16-lane sums, masked tails included, give the portable code's bits."""
    wide, portable = kernels
    x = (np.random.default_rng(rows).standard_normal((rows, columns)) * 3).astype(np.float32)
    # sums whose roundings show the order of the additions: +2**30 on every other row of the
    # first half, -2**30 on every other row of the second
    x[0:rows // 2:2, : columns // 2] += 2.0 ** 30
    x[rows // 2::2, : columns // 2] -= 2.0 ** 30
    plan = ReducePlan(2, (ctypes.c_int64 * 6)(rows, columns), 1, 0, rows)
    outs = []
    for lib in (wide, portable):
        y = np.full(columns + 1, 7.0, np.float32)
        assert lib.rk_reduce(x.ctypes.data, y.ctypes.data, ctypes.byref(plan)) == 0
        assert y[columns] == 7.0
        outs.append(y[:columns])
    same_bits(*outs)
    plain = slice(columns // 2, None)        # (the others cancel: their means are ill-conditioned)
    np.testing.assert_allclose(outs[0][plain], x[:, plain].astype(np.float64).mean(axis=0), rtol=1e-6,
                               atol=1e-6)


@pytest.fixture(scope="module")
def backend():
    import loader
    with loader.Runtime() as runtime:
        return runtime.create_backend("CpuRef")


# (x shape, w shape, descriptor): 1 to 7 channels, padding on every side or some, strides 1 and
# 2, output rows that are and are not a multiple of the kernel's 14-pixel panels, 1x1 outputs
FEW_CHANNELS = [((1, 30, 30, 3), (32, 3, 3, 3), {"stride": 2, "padding": 1}),
                ((1, 31, 29, 3), (64, 7, 7, 3), {"stride": 2, "padding": 3}),
                ((2, 17, 19, 1), (5, 3, 3, 1), {"padding": 1}),
                ((1, 28, 28, 7), (33, 5, 5, 7), {"padding": [2, 0, 1, 2]}),
                ((1, 3, 3, 2), (16, 3, 3, 2), {"padding": 0}),
                ((1, 2, 2, 3), (40, 3, 3, 3), {"padding": 1, "stride": 2}),
                ((1, 16, 45, 4), (96, 3, 3, 4), {"padding": 1, "dilation": 2}),
                # two images, a padded copy large enough for two threads
                ((2, 161, 150, 3), (16, 3, 3, 3), {"padding": [1, 2, 0, 1], "stride": 2})]


@pytest.mark.parametrize("x_shape, w_shape, descriptor", FEW_CHANNELS)
def test_convolution_of_few_channels(backend, x_shape, w_shape, descriptor):
    from conformance.reference import evaluate
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    bias = rng.standard_normal(w_shape[0]).astype(np.float32)
    [y] = backend.execute("Convolution2d", [x, w, bias], descriptor)
    want = evaluate("Convolution2d", [x, w, bias], descriptor)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.sqrt(np.prod(w_shape[1:])))


# -- pointwise convolutions to few channels (the kernel reads the input rows directly) ----------

@pytest.mark.parametrize("x_shape, channels_out", [((2, 5, 7, 20), 24), ((1, 3, 3, 8), 1),
                                                   ((1, 14, 14, 33), 32), ((1, 1, 1, 300), 17),
                                                   ((3, 9, 11, 5), 16), ((1, 28, 28, 64), 33),
                                                   ((4, 1, 1, 40), 33), ((1, 2, 2, 64), 200),
                                                   ((1, 1, 5, 24), 7)])
def test_pointwise_convolution_to_few_channels(backend, x_shape, channels_out):
    from conformance.reference import evaluate
    rng = np.random.default_rng(sum(x_shape) + channels_out)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((channels_out, 1, 1, x_shape[3])).astype(np.float32)
    bias = rng.standard_normal(channels_out).astype(np.float32)
    [y] = backend.execute("Convolution2d", [x, w, bias], {})
    want = evaluate("Convolution2d", [x, w, bias], {})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.sqrt(x_shape[3]))


# -- pointwise convolutions of a few pixels (squeeze-and-excitation): the weights streamed -----

@pytest.mark.parametrize("x_shape", [(1, 1, 1, 96), (2, 1, 1, 37), (1, 2, 2, 16), (1, 1, 5, 24)])
def test_a_compiled_pointwise_convolution_of_few_pixels(x_shape):
    """Up to four pixels the compiled step streams its [o, c] weights as the few-row fully
    connected layer does (never packed); five take the GEMM. Both with their activation."""
    import loader
    from conformance.network_reference import evaluate_network
    rng = np.random.default_rng(sum(x_shape))
    c, o = x_shape[3], 45
    net = loader.Network()
    x = net.add_input("x", x_shape)
    y = net.add_layer("Convolution2d", [x, net.add_constant("w", rng.standard_normal((o, 1, 1, c)).astype(np.float32)),
                                        net.add_constant("b", rng.standard_normal(o).astype(np.float32))], {})
    y = net.add_layer("Activation", [y], {"function": "hard_sigmoid", "a": 0.2, "b": 0.5})
    net.add_output(y, "y")
    inputs = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    with loader.Runtime() as runtime:
        with runtime.load_network(net, backends=["CpuRef"]) as loaded:
            got = loaded.execute(inputs)["y"]
    np.testing.assert_allclose(got, evaluate_network(net, inputs)["y"], rtol=1e-5, atol=1e-5 * np.sqrt(c))


# -- max and average pooling: 64 and 16 channels a vector, the rest 4 --------------------------

# (x shape, kernel, stride, padding [top, bottom, left, right], dilation): ResNet's 3 x 3 max
# pool of 64 channels; 64 + 16 + 4 + 1 channels (every width of vector and the scalar tail);
# padding on some sides, dilation, a window clipped to one position
POOLS = [((1, 20, 18, 64), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
         ((2, 9, 11, 85), (3, 2), (1, 2), (1, 0, 0, 1), (1, 1)),
         ((1, 12, 13, 32), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
         ((1, 3, 3, 16), (3, 3), (3, 3), (2, 0, 0, 2), (1, 1))]


@pytest.mark.parametrize("pool, code, include_pad", [("max", 0, 0), ("average", 1, 0), ("average", 1, 1)])
@pytest.mark.parametrize("x_shape, kernel, stride, padding, dilation", POOLS)
def test_pooling_matches_the_portable_code(kernels, x_shape, kernel, stride, padding, dilation, pool, code,
                                           include_pad):
    """16-lane max and average pooling give the portable code's bits, NaNs and signed zeros
    included (max keeps the operand order of the 4-lane maximum), and the float64 reference's
    values."""
    from conformance.reference.spatial import pooling2d
    clean = np.random.default_rng(sum(x_shape)).standard_normal(x_shape).astype(np.float32)
    x = clean.copy()
    x.flat[::37] = np.nan
    x.flat[5::41] = -0.0
    x.flat[7::43] = 0.0
    n, h, w, c = x_shape
    extent = [(kernel[a] - 1) * dilation[a] + 1 for a in range(2)]
    oh = (h + padding[0] + padding[1] - extent[0]) // stride[0] + 1
    ow = (w + padding[2] + padding[3] - extent[1]) // stride[1] + 1
    params = ConvParams(n, h, w, c, *kernel, *stride, *dilation, *padding, oh, ow)

    def pooled(lib, image):
        y = np.full((n, oh, ow, c), 7.0, np.float32)
        assert lib.rk_pool2d(image.ctypes.data, y.ctypes.data, ctypes.byref(params), code, include_pad) == 0
        return y

    wide, portable = kernels
    same_bits(pooled(wide, x), pooled(portable, x))
    want = pooling2d(clean, pool, kernel, stride, padding, False, bool(include_pad), dilation)
    np.testing.assert_allclose(pooled(wide, clean), want, rtol=1e-6, atol=1e-6)
