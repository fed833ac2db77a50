"""The reference backend's Winograd convolution (3x3, stride 1: output tiles of 4x4 or 2x2, the
filter transformed once when a compiled sub-graph packs its weights) against the float64
reference within the conformance kit's tolerances: images that are not a multiple of the tile
(edge tiles) down to one pixel, padding on any side, channel counts that are not a multiple of
the vector width, batch 2, the fused bias, activation and residual; the convolutions outside
its conditions (stride 2, dilation, 1x1 windows) still right. The kernels are also built with
the test hooks: -DRK_WINOGRAD_ALWAYS=m sends every 3x3 stride-1 convolution, however small,
through tile m, with the AVX-512, AVX2 and portable transforms (-DRK_NO_AVX512,
-DRK_NO_X86_SIMD), and with a second thread for any size. Only a filter packed beforehand
(rk_pack_conv_weights: a compiled sub-graph's constant weights) takes this path."""
import ctypes
import glob
import os
import shutil
import subprocess

import numpy as np
import pytest

import loader
from conformance import reference as ref
from conformance.network_reference import evaluate_network
from conformance.tolerances import tolerance
from helpers import install_reference

F = np.float32
HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "reference_backend")
CC = shutil.which("cc") or shutil.which("gcc")
RELU, BOUNDED_RELU = 0, 1
LIBC = ctypes.CDLL(None)
LIBC.free.argtypes = [ctypes.c_void_p]


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(F)


def expected_conv(x, w, bias, padding, stride=1, dilation=1):
    return ref.spatial.convolution2d(x, w, bias, (stride, stride), padding, (dilation, dilation))


def assert_within_tolerance(out, x, w, bias, descriptor, expected):
    """Within the kit's tolerance of the float64 reference (before any epilogue, whose
    activation and addition only round once more)."""
    inputs = [x, w] + ([bias] if bias is not None else [])
    tol = tolerance({"layer": "Convolution2d", "descriptor": descriptor}, inputs, expected)
    assert out.shape == expected.shape
    bad = ~(np.abs(out.astype(np.float64) - expected) <= tol)
    assert not bad.any(), (f"{int(bad.sum())} of {bad.size} wrong; first at "
                           f"{np.argwhere(bad)[0].tolist()}: got {out[bad][0]!r}, expected "
                           f"{expected[bad][0]!r}")


@pytest.fixture(scope="module")
def runtime():
    with loader.Runtime() as rt:
        yield rt


def run_compiled(runtime, x, w, bias, descriptor):
    """The convolution as a compiled one-layer network: its constant filter packed (for the
    Winograd convolution: transformed) once, when the network is loaded."""
    net = loader.Network()
    inputs = [net.add_input("x", x.shape), net.add_constant("w", w)]
    if bias is not None:
        inputs.append(net.add_constant("b", bias))
    net.add_output(net.add_layer("Convolution2d", inputs, descriptor, name="conv"), "y")
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [s.kind for s in loaded.plan] == ["compiled"]
        return loaded.execute({"x": x})["y"]


# -- the shipped backend: the shapes its condition sends to each tile, and some it does not ----

LAYERS = [
    # x shape, o, padding (top, bottom, left, right); the tile rk_winograd_tile picks with the
    # AVX-512 micro-kernel
    ((1, 28, 28, 128), 128, (1, 1, 1, 1)),     # ResNet-18's second stage: tile 4
    ((1, 30, 27, 40), 24, (1, 1, 1, 1)),       # tile 4, edge tiles both ways
    ((2, 17, 19, 19), 33, (0, 2, 1, 0)),       # tile 4, batch 2, uneven padding
    ((1, 14, 14, 64), 64, (1, 1, 1, 1)),       # tile 2 (ResNet's third stage)
    ((1, 22, 14, 16), 16, (0, 0, 0, 0)),       # tile 2, no padding
    ((2, 9, 6, 30), 17, (2, 1, 0, 1)),         # tile 2, batch 2, odd sizes
    ((2, 7, 7, 64), 48, (1, 1, 1, 1)),         # tile 2: two images of ResNet's last stage
]


@pytest.mark.parametrize("x_shape, o, padding", LAYERS, ids=lambda v: str(v).replace(" ", ""))
def test_a_3x3_stride_1_convolution(runtime, x_shape, o, padding):
    rng = np.random.default_rng(sum(x_shape) * 31 + o)
    x, w, bias = rand(rng, *x_shape), rand(rng, o, 3, 3, x_shape[3]), rand(rng, o)
    descriptor = {"padding": list(padding)}
    y = run_compiled(runtime, x, w, bias, descriptor)
    assert_within_tolerance(y, x, w, bias, descriptor, expected_conv(x, w, bias, padding))


@pytest.mark.parametrize("x_shape, o, descriptor", [
    ((1, 16, 16, 32), 32, {"padding": 1, "stride": 2}),
    ((1, 16, 16, 32), 32, {"padding": 2, "dilation": 2}),
    ((1, 16, 16, 32), 32, {"kernel": 1}),
    ((1, 5, 5, 8), 8, {"padding": 1}),
    ((1, 3, 3, 64), 64, {"padding": 1}),
])
def test_convolutions_outside_its_conditions(runtime, x_shape, o, descriptor):
    rng = np.random.default_rng(o + x_shape[1])
    k = descriptor.pop("kernel", 3)
    x, w = rand(rng, *x_shape), rand(rng, o, k, k, x_shape[3])
    y = run_compiled(runtime, x, w, None, descriptor)
    pad = descriptor.get("padding", 0)
    expected = expected_conv(x, w, None, (pad,) * 4, descriptor.get("stride", 1),
                             descriptor.get("dilation", 1))
    assert_within_tolerance(y, x, w, None, descriptor, expected)


@pytest.mark.parametrize("x_shape, o", [((1, 28, 24, 48), 40), ((2, 8, 8, 32), 32)])  # tiles 4, 2
@pytest.mark.parametrize("epilogue", ["relu", "residual"])
def test_a_compiled_step_with_its_transformed_filter_loads_again(backend_dir, tmp_path, x_shape,
                                                                o, epilogue):
    """The filter transformed when the sub-graph is compiled, and again when its exported form
    is loaded: the same results, the bias, activation and residual fused."""
    install_reference(backend_dir)
    rng = np.random.default_rng(o)
    net = loader.Network()
    x = net.add_input("x", x_shape)
    w = net.add_constant("w", (rand(rng, o, 3, 3, x_shape[3]) / np.sqrt(9 * x_shape[3])).astype(F))
    y = net.add_layer("Convolution2d", [x, w, net.add_constant("b", rand(rng, o))],
                      {"padding": 1}, name="conv")
    inputs = {"x": rand(rng, *x_shape)}
    if epilogue == "residual":
        r = net.add_input("r", x_shape[:3] + (o,))
        inputs["r"] = rand(rng, *x_shape[:3], o)
        y = net.add_layer("Addition", [y, r], name="add")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    net.add_output(y, "y")
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        with rt.load_network(net, backends=["CpuRef"]) as loaded:
            assert [s.kind for s in loaded.plan] == ["compiled"]
            out = loaded.execute(inputs)["y"]
            assert np.array_equal(loaded.execute(inputs)["y"], out)
            loaded.export(tmp_path / "net.compiled")
        with rt.load_compiled_network(tmp_path / "net.compiled") as again:
            assert np.array_equal(again.execute(inputs)["y"], out)
    np.testing.assert_allclose(out, evaluate_network(net, inputs)["y"], rtol=1e-4, atol=1e-4)


# -- the kernels built with the test hooks -------------------------------------------------------

class ConvParams(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in
                ("n", "h", "w", "c", "kh", "kw", "stride_h", "stride_w", "dil_h", "dil_w",
                 "pad_top", "pad_bottom", "pad_left", "pad_right", "oh", "ow")]


class Epilogue(ctypes.Structure):
    _fields_ = [("residual", ctypes.c_void_p), ("ldr", ctypes.c_int64), ("function", ctypes.c_int),
                ("a", ctypes.c_float), ("b", ctypes.c_float)]


# both tiles with the kernels this CPU selects; each tile once more with a portable build
BUILDS = [(4, ""), (2, ""), (4, "-DRK_NO_AVX512"), (2, "-DRK_NO_X86_SIMD")]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The libraries of BUILDS, compiled side by side (each takes seconds): build -> path."""
    sources = [os.path.join(KERNELS, s) for s in
               ("convolution.c", "winograd.c", "gemm.c", "gemm_pack.c", "gemm_kernels.c", "threading.c",
                "activation.c", "activation_avx512.c", "elementwise.c", "fully_connected.c",
                "tensor_copy.c")]
    if CC is None or not all(os.path.exists(s) for s in sources):
        pytest.skip("needs a C compiler and the reference backend's sources")
    directory = tmp_path_factory.mktemp("winograd")
    running = {}
    for tile, isa in BUILDS:
        out = str(directory / f"kernels{tile}{isa}.so")
        flags = [f"-DRK_WINOGRAD_ALWAYS={tile}", "-DRK_GEMM_MIN_FLOP_PER_THREAD=1"]
        flags += [isa] if isa else []
        running[(tile, isa)] = (out, subprocess.Popen(
            [CC, "-std=c11", "-O2", "-D_GNU_SOURCE", "-shared", "-fPIC", "-Wall", "-Wextra",
             "-Werror", *flags, *sources, "-o", out, "-lm", "-lpthread"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for out, process in running.values():
        output, _ = process.communicate()
        assert process.returncode == 0, output[-2000:]
    return {build: out for build, (out, _) in running.items()}


@pytest.fixture(scope="module", params=BUILDS, ids=lambda b: f"tile{b[0]}{b[1]}")
def forced(request, builds):
    lib = ctypes.CDLL(builds[request.param])
    p = ctypes.c_void_p
    lib.rk_pack_conv_weights.argtypes = [p, ctypes.POINTER(ConvParams), ctypes.c_int64]
    lib.rk_pack_conv_weights.restype = p
    lib.rk_conv2d_packed.argtypes = [p, p, p, p, p, ctypes.POINTER(ConvParams), ctypes.c_int64,
                                     ctypes.POINTER(Epilogue)]
    return lib


def run_forced(lib, x, w, bias, padding, epilogue=None):
    n, h, wd, c = x.shape
    top, bottom, left, right = padding
    p = ConvParams(n, h, wd, c, 3, 3, 1, 1, 1, 1, top, bottom, left, right,
                   h + top + bottom - 2, wd + left + right - 2)
    y = np.full((n, p.oh, p.ow, w.shape[0]), np.nan, F)
    packed = lib.rk_pack_conv_weights(w.ctypes.data, ctypes.byref(p), w.shape[0])
    assert packed
    try:
        status = lib.rk_conv2d_packed(x.ctypes.data, w.ctypes.data, packed,
                                      None if bias is None else bias.ctypes.data, y.ctypes.data,
                                      ctypes.byref(p), w.shape[0],
                                      None if epilogue is None else ctypes.byref(epilogue))
    finally:
        LIBC.free(packed)
    assert status == 0
    return y


SIZES = [(1, 1), (2, 3), (3, 3), (4, 4), (5, 7), (6, 2), (7, 7), (9, 10)]
PADDINGS = [(1, 1, 1, 1), (0, 0, 0, 0), (2, 0, 1, 2)]


@pytest.mark.parametrize("size, padding", [
    (s, p) for s in SIZES for p in PADDINGS if s[0] + p[0] + p[1] >= 3 and s[1] + p[2] + p[3] >= 3])
def test_every_image_size_and_padding(forced, size, padding):
    h, wd = size
    top, left = padding[0], padding[2]
    rng = np.random.default_rng(h * 100 + wd * 7 + top + 3 * left)
    x, w, bias = rand(rng, 2, h, wd, 5), rand(rng, 9, 3, 3, 5), rand(rng, 9)
    y = run_forced(forced, x, w, bias, padding)
    assert_within_tolerance(y, x, w, bias, {"padding": list(padding)},
                            expected_conv(x, w, bias, padding))


@pytest.mark.parametrize("c, o", [(1, 1), (15, 17), (16, 32), (33, 70), (300, 40)])
def test_channel_counts(forced, c, o):
    """Past one vector, one register tile, one chunk of output channels, one K block."""
    rng = np.random.default_rng(c * 1000 + o)
    x, w = rand(rng, 1, 11, 13, c), rand(rng, o, 3, 3, c)
    y = run_forced(forced, x, w, None, (1, 1, 1, 1))
    assert_within_tolerance(y, x, w, None, {"padding": 1}, expected_conv(x, w, None, (1,) * 4))


@pytest.mark.parametrize("function", [None, RELU, BOUNDED_RELU])
@pytest.mark.parametrize("residual", [False, True])
def test_the_fused_epilogue(forced, function, residual):
    rng = np.random.default_rng(7 + residual)
    x, w, bias = rand(rng, 2, 10, 9, 24), rand(rng, 20, 3, 3, 24), rand(rng, 20)
    expected = expected_conv(x, w, bias, (1,) * 4)
    r = rand(rng, *expected.shape)
    e = Epilogue(r.ctypes.data if residual else None, 20, -1 if function is None else function,
                 6.0, 0.0)
    y = run_forced(forced, x, w, bias, (1, 1, 1, 1), e)
    if residual:
        expected = expected + r
    if function == RELU:
        expected = np.maximum(expected, 0)
    elif function == BOUNDED_RELU:
        expected = np.clip(expected, 0, 6)
    assert_within_tolerance(y, x, w, bias, {"padding": 1}, expected)
