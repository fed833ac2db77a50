"""The spatial layers of Backend API 1.3 on the reference backend, against the float64
references (conformance.reference, ONNX's semantics): grouped convolution (one group, depthwise
and everything between as cases of one layer), Pooling2d's ceil_mode, count_include_pad,
dilation and L2 pool, TransposeConvolution2d and Resize in every mode; then descriptions the
runtime would never send, refused by the backend's own checks."""
import ctypes
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import loader
from conformance.reference import evaluate
from helpers import compile_library
from loader import layers

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "reference_backend")
CC = shutil.which("cc") or shutil.which("gcc")


@pytest.fixture(scope="module")
def backend():
    with loader.Runtime() as runtime:
        return runtime.create_backend("CpuRef")


def check(backend, layer, inputs, descriptor):
    [y] = backend.execute(layer, inputs, descriptor)
    expected = evaluate(layer, inputs, descriptor)
    assert y.shape == expected.shape
    # float32 sums against float64: relative to the output's scale, as the kit compares
    finite = np.abs(expected[np.isfinite(expected)])
    scale = max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=2e-5 * scale, equal_nan=True)
    return y


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# -- Convolution2d with groups ---------------------------------------------------------------

# (x, weights, groups, descriptor): the direct kernel's spread rows (groups narrower than 16
# outputs, also across vector boundaries: 12, 10, 20 and 4 outputs of 8 inputs), its broadcast
# rows (16 and 32 outputs: one and two vectors), strides, dilations, asymmetric padding,
# 1 x 1 and 1 x 3 kernels, rows wider than one 14-pixel block and than one cached strip.
GROUPED = [
    ((1, 8, 9, 8), (8, 3, 3, 2), 4, {"padding": 1}),
    ((2, 7, 6, 12), (18, 3, 2, 4), 3, {"stride": [2, 1], "padding": [1, 0, 2, 1], "dilation": [1, 2]}),
    ((1, 10, 10, 32), (64, 3, 3, 8), 4, {"padding": 1}),
    ((1, 6, 20, 24), (24, 3, 3, 12), 2, {"padding": [0, 2, 1, 1], "dilation": [2, 1]}),
    ((1, 9, 17, 64), (64, 3, 3, 32), 2, {"stride": 2, "padding": 1}),
    ((1, 9, 17, 48), (48, 1, 1, 16), 3, {}),
    ((1, 5, 5, 40), (20, 3, 3, 8), 5, {"padding": 2}),
    ((1, 5, 5, 6), (30, 2, 2, 2), 3, {"padding": 1}),
    ((1, 4, 30, 8), (40, 1, 3, 4), 2, {"stride": [1, 3], "padding": [0, 0, 5, 5]}),
    ((1, 12, 75, 64), (64, 3, 3, 4), 16, {"padding": 1}),
    ((1, 11, 40, 32), (32, 3, 3, 8), 4, {"stride": 2, "padding": [1, 0, 1, 0]}),
    ((1, 6, 7, 20), (20, 5, 5, 10), 2, {"padding": 2}),
]


@pytest.mark.parametrize("x_shape, w_shape, groups, descriptor", GROUPED)
@pytest.mark.parametrize("with_bias", [True, False])
def test_grouped_convolution(backend, x_shape, w_shape, groups, descriptor, with_bias):
    rng = np.random.default_rng(sum(x_shape) * 31 + sum(w_shape) + groups)
    x, w = rand(rng, *x_shape), rand(rng, *w_shape)
    inputs = [x, w] + ([rand(rng, w_shape[0])] if with_bias else [])
    check(backend, "Convolution2d", inputs, dict(descriptor, groups=groups))


@pytest.mark.parametrize("groups", [1, 2, 4, 8, 16])
def test_one_grouped_convolution_from_one_group_to_depthwise(backend, groups):
    """Every group count of the same 16-channel input, one group (the GEMM) through one
    channel per group (the depthwise kernel), each against the reference."""
    rng = np.random.default_rng(groups)
    x = rand(rng, 2, 9, 11, 16)
    w = rand(rng, 32, 3, 3, 16 // groups)
    check(backend, "Convolution2d", [x, w, rand(rng, 32)], {"padding": 1, "groups": groups})


@pytest.mark.parametrize("multiplier", [1, 3])
def test_convolution_with_a_group_per_channel_is_the_depthwise_convolution(backend, multiplier):
    rng = np.random.default_rng(multiplier)
    x = rand(rng, 1, 10, 12, 6)
    w = rand(rng, 6 * multiplier, 3, 3, 1)
    bias = rand(rng, 6 * multiplier)
    descriptor = {"padding": [1, 1, 0, 2], "stride": [1, 2]}
    grouped = check(backend, "Convolution2d", [x, w, bias], dict(descriptor, groups=6))
    [depthwise] = backend.execute("DepthwiseConvolution2d",
                                  [x, np.ascontiguousarray(w.transpose(3, 1, 2, 0)), bias], descriptor)
    np.testing.assert_allclose(grouped, depthwise, rtol=1e-5, atol=1e-5)


THREADED = r"""
import numpy as np
import loader
from conformance.reference import evaluate
rng = np.random.default_rng(3)
with loader.Runtime() as runtime:
    backend = runtime.create_backend("CpuRef")
for x_shape, w_shape, groups in [((2, 21, 40, 64), (64, 3, 3, 8), 8), ((1, 30, 30, 64), (64, 3, 3, 16), 4)]:
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    d = {"padding": 1, "groups": groups}
    [y] = backend.execute("Convolution2d", [x, w], d)
    np.testing.assert_allclose(y, evaluate("Convolution2d", [x, w], d), rtol=1e-4, atol=1e-3)
print("ok")
"""


def test_grouped_convolution_results_do_not_depend_on_the_thread_count():
    result = subprocess.run([sys.executable, "-c", THREADED], capture_output=True, text=True,
                            timeout=120, cwd=os.path.dirname(HERE),
                            env=dict(os.environ, REFERENCE_BACKEND_THREADS="3"))
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


class ConvParams(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in
                "n h w c kh kw stride_h stride_w dil_h dil_w pad_top pad_bottom pad_left pad_right "
                "oh ow".split()]


@pytest.fixture(scope="module")
def portable_kernels(tmp_path_factory):
    """The grouped convolution built with the test hook that takes away its AVX-512 kernel."""
    sources = [os.path.join(KERNELS, name) for name in (
        "convolution_grouped.c", "convolution.c", "convolution_depthwise.c", "winograd.c", "gemm.c",
        "gemm_pack.c", "gemm_kernels.c",
        "threading.c", "elementwise.c", "activation.c", "activation_avx512.c", "fully_connected.c",
        "tensor_copy.c")]
    if CC is None or not all(os.path.exists(s) for s in sources):
        pytest.skip("needs a C compiler and the reference backend's sources")
    out = str(tmp_path_factory.mktemp("kernels") / "kernels.so")
    compile_library(CC, ["-std=c11", "-O0", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                         "-DRK_NO_AVX512"], sources, out)
    lib = ctypes.CDLL(out)
    p = ctypes.c_void_p
    lib.rk_grouped_conv2d_fused.argtypes = [p, p, p, p, ctypes.POINTER(ConvParams), ctypes.c_int64,
                                            ctypes.c_int64, p]
    return lib


@pytest.mark.parametrize("x_shape, w_shape, groups, descriptor", GROUPED[:6])
def test_portable_grouped_convolution(portable_kernels, x_shape, w_shape, groups, descriptor):
    rng = np.random.default_rng(7)
    x, w, bias = rand(rng, *x_shape), rand(rng, *w_shape), rand(rng, w_shape[0])
    d = dict(descriptor, groups=groups)
    expected = evaluate("Convolution2d", [x, w, bias], d)
    fields = layers.prepare("Convolution2d", [x, w, bias], d).fields
    p = ConvParams(*x_shape, *w_shape[1:3], fields["stride_y"], fields["stride_x"],
                   fields["dilation_y"], fields["dilation_x"], fields["pad_top"],
                   fields["pad_bottom"], fields["pad_left"], fields["pad_right"], *expected.shape[1:3])
    y = np.full(expected.shape, np.nan, np.float32)
    assert portable_kernels.rk_grouped_conv2d_fused(x.ctypes.data, w.ctypes.data, bias.ctypes.data,
                                                    y.ctypes.data, ctypes.byref(p), w_shape[0],
                                                    groups, None) == 0
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


# -- Pooling2d --------------------------------------------------------------------------------

POOLING = [
    # ceil_mode: the last window starts in the input or the begin padding, never in the end
    # padding (6 + 1 + 1 - 3 = 5 is odd: a fourth window would start at 6, in the padding)
    ((1, 6, 6, 3), {"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ((1, 7, 8, 3), {"kernel": 3, "stride": 3, "padding": 1, "ceil_mode": True}),
    ((1, 5, 5, 3), {"kernel": 2, "stride": 2, "padding": [0, 1, 0, 1], "ceil_mode": True}),
    ((1, 4, 4, 3), {"kernel": 2, "stride": 2, "padding": [1, 0, 1, 0], "ceil_mode": True}),
    ((2, 7, 7, 20), {"kernel": [3, 2], "stride": [2, 3], "padding": [2, 1, 1, 0], "ceil_mode": True}),
    ((1, 9, 9, 17), {"kernel": 3, "stride": 2, "ceil_mode": True}),
    # dilation, with and without padding and ceil_mode
    ((1, 5, 5, 3), {"kernel": 2, "padding": 1, "dilation": 2}),
    ((1, 5, 6, 18), {"kernel": 2, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}),
    ((1, 7, 7, 3), {"kernel": [3, 2], "stride": [2, 1], "padding": [2, 1, 1, 0], "dilation": [2, 1],
                    "ceil_mode": True}),
    # a dilated window that skips the whole 2 x 2 image (ONNX's reference: 0, 0 / 0 averaged)
    ((1, 2, 2, 3), {"kernel": 2, "padding": 1, "dilation": 3}),
    ((1, 8, 8, 16), {"kernel": 3, "stride": 1}),
]


@pytest.mark.parametrize("x_shape, descriptor", POOLING)
@pytest.mark.parametrize("pool, count_include_pad", [
    ("max", False), ("average", False), ("average", True), ("l2", False)])
def test_pooling(backend, x_shape, descriptor, pool, count_include_pad):
    rng = np.random.default_rng(sum(x_shape))
    d = dict(descriptor, pool=pool, count_include_pad=count_include_pad)
    with np.errstate(invalid="ignore"):
        check(backend, "Pooling2d", [rand(rng, *x_shape)], d)


def test_count_include_pad_counts_the_padded_input_not_what_ceil_mode_adds(backend):
    """A 2 x 2 window at stride 2 over 3 x 3 with no padding: ceil_mode makes a second window
    per axis that hangs past the input, where nothing counts even with count_include_pad."""
    x = np.arange(9, dtype=np.float32).reshape(1, 3, 3, 1)
    [y] = backend.execute("Pooling2d", [x], {"pool": "average", "kernel": 2, "stride": 2,
                                             "ceil_mode": True, "count_include_pad": True})
    np.testing.assert_allclose(y[0, :, :, 0], [[2.0, 3.5], [6.5, 8.0]])
    [y] = backend.execute("Pooling2d", [x], {"pool": "average", "kernel": 2, "stride": 2,
                                             "padding": [0, 1, 0, 1], "ceil_mode": True,
                                             "count_include_pad": True})
    np.testing.assert_allclose(y[0, :, :, 0], [[2.0, 7.0 / 4], [13.0 / 4, 8.0 / 4]])


# -- TransposeConvolution2d --------------------------------------------------------------------

TRANSPOSED = [
    ((1, 4, 5, 3), (3, 3, 3, 2), 1, {}),
    ((2, 4, 5, 6), (6, 3, 3, 4), 1, {"stride": 2, "padding": 1, "output_padding": 1}),
    ((1, 3, 4, 8), (8, 4, 4, 3), 2, {"stride": 2, "padding": [1, 2, 0, 1]}),
    ((1, 5, 3, 4), (4, 3, 2, 5), 1, {"stride": [3, 1], "dilation": [1, 2], "output_padding": [2, 1]}),
    ((1, 4, 4, 6), (6, 2, 3, 1), 6, {"stride": [1, 2], "padding": [0, 1, 1, 0], "dilation": 2}),
    ((1, 6, 7, 16), (16, 2, 2, 8), 4, {"stride": 2}),
    ((1, 2, 2, 4), (4, 1, 1, 4), 2, {"stride": 3, "output_padding": 2}),
    ((1, 3, 3, 2), (2, 5, 5, 3), 1, {"padding": [2, 2, 3, 1]}),
]


@pytest.mark.parametrize("x_shape, w_shape, groups, descriptor", TRANSPOSED)
@pytest.mark.parametrize("with_bias", [True, False])
def test_transpose_convolution(backend, x_shape, w_shape, groups, descriptor, with_bias):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x, w = rand(rng, *x_shape), rand(rng, *w_shape)
    inputs = [x, w] + ([rand(rng, w_shape[3] * groups)] if with_bias else [])
    check(backend, "TransposeConvolution2d", inputs, dict(descriptor, groups=groups))


def test_transpose_convolution_in_bands_of_input_rows(backend):
    """Columns of 8 MiB a band: 40 rows of 96 pixels times 16 taps times 64 outputs come in
    three bands, whose contributions to the same output rows add up."""
    rng = np.random.default_rng(5)
    x, w = rand(rng, 1, 40, 96, 8), rand(rng, 8, 4, 4, 64)
    check(backend, "TransposeConvolution2d", [x, w], {"stride": 2, "padding": 1})


# -- Resize -------------------------------------------------------------------------------------

TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_half_pixel_for_nn"]
# (input H, W, output H, W, scale): up, down, mixed, to one pixel, and scales the model gave
SIZES = [(4, 5, 8, 10, None), (5, 4, 3, 7, None), (6, 6, 1, 4, None), (4, 4, 6, 6, [1.5, 1.5]),
         (3, 5, 7, 12, [2.5, 2.5]), (9, 8, 4, 3, None), (3, 3, 9, 9, None)]


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest(backend, transform, nearest_mode):
    rng = np.random.default_rng(len(transform) + len(nearest_mode))
    for h, w, oh, ow, scale in SIZES:
        d = {"size": [oh, ow], "mode": "nearest", "coordinate_transformation": transform,
             "nearest_mode": nearest_mode, "scale": scale}
        check(backend, "Resize", [rand(rng, 2, h, w, 3)], d)


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("mode, cubic_coeff_a, exclude_outside", [
    ("linear", -0.75, False), ("cubic", -0.75, False), ("cubic", -0.5, False), ("cubic", -0.5, True),
    ("linear", -0.75, True)])
def test_resize_linear_and_cubic(backend, transform, mode, cubic_coeff_a, exclude_outside):
    rng = np.random.default_rng(len(transform))
    for h, w, oh, ow, scale in SIZES:
        d = {"size": [oh, ow], "mode": mode, "coordinate_transformation": transform,
             "cubic_coeff_a": cubic_coeff_a, "exclude_outside": exclude_outside, "scale": scale}
        check(backend, "Resize", [rand(rng, 1, h, w, 18)], d)


def test_resize_rounds_half_coordinates_by_the_nearest_mode(backend):
    """Halving with asymmetric coordinates puts outputs exactly on inputs, doubling with
    half_pixel puts them a quarter off, thirds with align_corners on halves: the ties each mode
    breaks its own way, with scales that are not exact in float32 (1/3)."""
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 12, 1)
    for transform, size in (("asymmetric", 4), ("half_pixel", 24), ("align_corners", 23),
                            ("asymmetric", 36), ("tf_half_pixel_for_nn", 8)):
        for mode in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            d = {"size": [1, size], "coordinate_transformation": transform, "nearest_mode": mode}
            [y] = backend.execute("Resize", [x], d)
            np.testing.assert_array_equal(y, evaluate("Resize", [x], d), err_msg=f"{transform} {mode}")


# -- descriptions the runtime never sends -----------------------------------------------------

def prepared(name, input_shapes, output_shape, fields):
    return layers.PreparedLayer(name, layers.layer_type(name).code, tuple(map(tuple, input_shapes)),
                                tuple(output_shape), fields, 3)


CONV = {"stride_y": 1, "stride_x": 1, "pad_top": 1, "pad_bottom": 1, "pad_left": 1, "pad_right": 1,
        "dilation_y": 1, "dilation_x": 1, "bias_enabled": 0, "groups": 2}
POOL = {"pool_type": 0, "kernel_y": 3, "kernel_x": 3, "stride_y": 2, "stride_x": 2, "pad_top": 1,
        "pad_bottom": 1, "pad_left": 1, "pad_right": 1, "ceil_mode": 1, "count_include_pad": 0,
        "dilation_y": 1, "dilation_x": 1}
TCONV = {"stride_y": 2, "stride_x": 2, "pad_top": 0, "pad_bottom": 0, "pad_left": 0, "pad_right": 0,
         "output_padding_y": 0, "output_padding_x": 0, "dilation_y": 1, "dilation_x": 1,
         "groups": 1, "bias_enabled": 0}
RESIZE = {"mode": 1, "coordinate_transformation": 0, "nearest_mode": 0, "scale_y": 2.0,
          "scale_x": 2.0, "cubic_coeff_a": -0.75, "exclude_outside": 0}


@pytest.mark.parametrize("layer, words", [
    (prepared("Convolution2d", [(1, 6, 6, 8), (4, 3, 3, 4)], (1, 6, 6, 4), CONV), None),
    (prepared("Convolution2d", [(1, 6, 6, 8), (4, 3, 3, 4)], (1, 6, 6, 4), dict(CONV, groups=3)),
     ["3 groups"]),
    (prepared("Convolution2d", [(1, 6, 6, 8), (6, 3, 3, 2)], (1, 6, 6, 6), CONV), ["per group"]),
    (prepared("Convolution2d", [(1, 6, 6, 8), (4, 3, 3, 4)], (1, 6, 6, 4), dict(CONV, groups=0)),
     ["groups"]),
    (prepared("Convolution2d", [(1, 6, 6, 8), (6, 3, 3, 2)], (1, 6, 6, 6), dict(CONV, groups=4)),
     ["4 groups do not divide"]),
    # ceil_mode: 6 + 2 - 3 = 5 rounds up to 3 more windows, the last starting at 5 (inside)
    (prepared("Pooling2d", [(1, 6, 6, 2)], (1, 4, 4, 2), POOL), None),
    (prepared("Pooling2d", [(1, 6, 6, 2)], (1, 3, 3, 2), POOL), ["output shape", "[1, 4, 4, 2]"]),
    (prepared("Pooling2d", [(1, 6, 6, 2)], (1, 4, 4, 2), dict(POOL, pad_bottom=3)), ["padding"]),
    (prepared("Pooling2d", [(1, 6, 6, 2)], (1, 4, 4, 2), dict(POOL, dilation_y=0)), ["dilation"]),
    (prepared("Pooling2d", [(1, 6, 6, 2)], (1, 4, 4, 2), dict(POOL, pool_type=3)), ["pooling type 3"]),
    (prepared("Pooling2d", [(1, 2, 2, 2)], (1, 1, 1, 2), dict(POOL, dilation_y=9)), ["exceeds"]),
    (prepared("TransposeConvolution2d", [(1, 3, 3, 4), (4, 2, 2, 5)], (1, 6, 6, 5), TCONV), None),
    (prepared("TransposeConvolution2d", [(1, 3, 3, 4), (4, 2, 2, 5)], (1, 7, 7, 5),
              dict(TCONV, output_padding_y=2, output_padding_x=2)), ["output_padding"]),
    (prepared("TransposeConvolution2d", [(1, 3, 3, 4), (4, 2, 2, 5)], (1, 6, 6, 5),
              dict(TCONV, groups=3)), ["3 groups"]),
    (prepared("TransposeConvolution2d", [(1, 3, 3, 4), (3, 2, 2, 5)], (1, 6, 6, 5), TCONV),
     ["input channels"]),
    (prepared("TransposeConvolution2d", [(1, 3, 3, 4), (4, 2, 2, 5)], (1, 1, 1, 5),
              dict(TCONV, pad_top=3, pad_bottom=3, pad_left=0, pad_right=0)), ["leaves no output"]),
    (prepared("TransposeConvolution2d", [(1, 1024, 3, 4), (4, 2, 2, 5)], (1, 6, 6, 5),
              dict(TCONV, stride_y=2 ** 32 - 1)), ["too large"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), RESIZE), None),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), dict(RESIZE, scale_y=0.0)), ["scales"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), dict(RESIZE, scale_x=float("nan"))), ["scales"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), dict(RESIZE, scale_x=float("inf"))), ["scales"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), dict(RESIZE, mode=3)), ["mode 3"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), dict(RESIZE, coordinate_transformation=6)),
     ["transformation 6"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), dict(RESIZE, nearest_mode=4)), ["nearest mode 4"]),
    (prepared("Resize", [(1, 3, 3, 2)], (2, 6, 6, 2), RESIZE), ["keeps N and C"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 3), RESIZE), ["keeps N and C"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6), RESIZE), ["4 dimensions"]),
    (prepared("Resize", [(1, 3, 3, 2)], (1, 6, 6, 2), dict(RESIZE, cubic_coeff_a=float("inf"))),
     ["cubic_coeff_a"]),
])
def test_the_backend_refuses_descriptions_the_runtime_never_sends(backend, layer, words):
    """Fields as the C structs carry them, past the runtime's own checks: the valid ones (words
    None) are supported, every other is refused with a reason, by is_layer_supported and by
    create_workload alike."""
    support = backend.query_layer_support(layer)
    if words is None:
        assert support, support.reason
        assert backend.create_workload_factory().create_workload_prepared(layer) is not None
        return
    assert not support
    for word in words:
        assert word in support.reason, support.reason
    with pytest.raises(loader.BackendStatusError) as raised:
        backend.create_workload_factory().create_workload_prepared(layer)
    assert support.reason in str(raised.value)


@pytest.mark.parametrize("layer, inputs, descriptor", [
    ("Convolution2d", [(1, 6, 6, 8), (4, 3, 3, 4)], {"groups": 3}),
    ("Convolution2d", [(1, 6, 6, 8), (6, 3, 3, 2)], {"groups": 2}),
    ("Pooling2d", [(1, 6, 6, 2)], {"pool": "max", "kernel": 2, "padding": 2}),
    ("Pooling2d", [(1, 6, 6, 2)], {"pool": "l2", "kernel": 2, "dilation": 0}),
    ("TransposeConvolution2d", [(1, 3, 3, 4), (4, 2, 2, 5)], {"stride": 2, "output_padding": 2}),
    ("TransposeConvolution2d", [(1, 3, 3, 4), (4, 2, 2, 5)], {"groups": 3}),
    ("Resize", [(1, 3, 3, 2)], {"size": [0, 4]}),
    ("Resize", [(1, 3, 3, 2)], {"size": [6, 6], "scale": [0.0, 2.0]}),
    ("Resize", [(1, 3, 3, 2)], {"size": [6, 6], "coordinate_transformation": "tf_crop_and_resize"}),
])
def test_the_runtime_refuses_the_same_misuse_first(backend, layer, inputs, descriptor):
    """What the raw descriptions above carry never reaches the backend from the Python API."""
    with pytest.raises(loader.InvalidLayerError):
        backend.execute(layer, [np.zeros(s, np.float32) for s in inputs], descriptor)
