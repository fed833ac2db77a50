"""The layers of Backend API 1.1 (docs/layers.md) on the reference backend: every layer against
plain NumPy on awkward shapes, and every malformed call refused with an error that names the problem."""
import numpy as np
import pytest

import loader
from helpers import rand
from conformance import reference as ref

RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def backend():
    with loader.Runtime() as runtime:
        return runtime.create_backend("CpuRef")



@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def run(backend, layer, inputs, descriptor=None):
    outputs = backend.execute(layer, inputs, descriptor)
    assert isinstance(outputs, list) and len(outputs) == 1
    assert outputs[0].dtype == np.float32 and outputs[0].flags.c_contiguous
    return outputs[0]


# -- element-wise --------------------------------------------------------------------------------

@pytest.mark.parametrize("function, a, b", [
    ("relu", 0, 0), ("bounded_relu", 6, 0), ("bounded_relu", 1, -1), ("sigmoid", 0, 0),
    ("tanh", 0, 0), ("leaky_relu", 0.1, 0), ("leaky_relu", 2.5, 0)])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 5), (1,), ()])
def test_activation(backend, rng, function, a, b, shape):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    y = run(backend, "Activation", [x], {"function": function, "a": a, "b": b})
    np.testing.assert_allclose(y, ref.elementwise.activation(x, function, a, b), rtol=RTOL, atol=ATOL)


def test_activation_saturates_without_overflow(backend):
    x = np.array([-1e30, -100, -20, 0, 20, 100, 1e30], dtype=np.float32)
    for function in ("sigmoid", "tanh"):
        y = run(backend, "Activation", [x], {"function": function})
        assert np.all(np.isfinite(y))
        np.testing.assert_allclose(y, ref.elementwise.activation(x, function), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("layer, op", [("Addition", np.add), ("Multiplication", np.multiply)])
@pytest.mark.parametrize("shape_a, shape_b", [
    ((5,), (5,)), ((3, 4), (3, 4)), ((3, 1, 5), (4, 1)), ((4, 1), (3, 1, 5)), ((2, 3, 4), (4,)),
    ((1,), (2, 3)), ((), (2, 3)), ((2, 1, 3, 1), (1, 4, 1, 5)), ((1, 7, 7, 3), (3,)),
    ((2, 1, 1, 1, 1, 1, 1, 3), (5, 1)),
])
def test_elementwise_broadcasting(backend, rng, layer, op, shape_a, shape_b):
    a, b = rand(rng, *shape_a), rand(rng, *shape_b)
    y = run(backend, layer, [a, b])
    np.testing.assert_allclose(y, op(a.astype(np.float64), b), rtol=RTOL, atol=ATOL)


# -- fully connected -------------------------------------------------------------------------

@pytest.mark.parametrize("n, k, m", [(1, 1, 1), (1, 7, 3), (5, 1, 7), (3, 17, 9), (13, 64, 33),
                                     (64, 128, 96), (2, 300, 5)])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("with_bias", [True, False])
def test_fully_connected(backend, rng, n, k, m, transpose, with_bias):
    x = rand(rng, n, k)
    w = rand(rng, m, k) if transpose else rand(rng, k, m)
    inputs = [x, w] + ([rand(rng, m)] if with_bias else [])
    y = run(backend, "FullyConnected", inputs, {"transpose_weights": transpose})
    expected = ref.normalization.fully_connected(x, w, inputs[2] if with_bias else None, transpose)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_fully_connected_weights_default_to_m_by_k(backend, rng):
    x, w = rand(rng, 2, 3), rand(rng, 4, 3)
    np.testing.assert_allclose(run(backend, "FullyConnected", [x, w]), ref.normalization.fully_connected(x, w),
                               rtol=RTOL, atol=ATOL)


# -- convolutions ----------------------------------------------------------------------------

CONVOLUTIONS = [
    # input NHWC, (kh, kw), stride, padding [t, b, l, r], dilation
    ((1, 5, 5, 1), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((1, 7, 6, 3), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 9, 11, 4), (3, 2), (2, 3), (0, 1, 2, 0), (1, 1)),
    ((1, 10, 10, 2), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
    ((1, 8, 9, 5), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((3, 6, 6, 3), (5, 5), (3, 3), (2, 1, 0, 3), (1, 1)),
    ((1, 13, 7, 6), (2, 4), (2, 1), (1, 0, 0, 1), (3, 1)),
    ((1, 1, 1, 3), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1)),
    ((1, 3, 3, 2), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
]


@pytest.mark.parametrize("shape, kernel, stride, padding, dilation", CONVOLUTIONS)
@pytest.mark.parametrize("out_channels", [1, 7])
@pytest.mark.parametrize("with_bias", [True, False])
def test_convolution2d(backend, rng, shape, kernel, stride, padding, dilation, out_channels, with_bias):
    x = rand(rng, *shape)
    w = rand(rng, out_channels, kernel[0], kernel[1], shape[3])
    bias = rand(rng, out_channels) if with_bias else None
    y = run(backend, "Convolution2d", [x, w] + ([bias] if with_bias else []),
            {"stride": list(stride), "padding": list(padding), "dilation": list(dilation)})
    expected = ref.spatial.convolution2d(x, w, bias, stride, padding, dilation)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape, kernel, stride, padding, dilation", CONVOLUTIONS)
@pytest.mark.parametrize("multiplier", [1, 2, 3])
@pytest.mark.parametrize("with_bias", [True, False])
def test_depthwise_convolution2d(backend, rng, shape, kernel, stride, padding, dilation, multiplier,
                                 with_bias):
    x = rand(rng, *shape)
    w = rand(rng, 1, kernel[0], kernel[1], shape[3] * multiplier)
    bias = rand(rng, shape[3] * multiplier) if with_bias else None
    y = run(backend, "DepthwiseConvolution2d", [x, w] + ([bias] if with_bias else []),
            {"stride": list(stride), "padding": list(padding), "dilation": list(dilation)})
    expected = ref.spatial.depthwise_convolution2d(x, w, bias, stride, padding, dilation)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


# Shapes for the 16-lane paths (the convolution's input packed 16 channels at a time or, with at
# most 32 output channels, read directly by the GEMM kernel for runs of 14 output pixels away
# from the borders; the depthwise kernel 32 channels and two output pixels at a time): channel
# counts below, at and past 16 and 32, K blocks of the GEMM that end inside a tap (3 x 3 x 33 =
# 297 and 3 x 3 x 40 = 360 split in two), odd and even widths, a run of 14 pixels whose last
# window ends exactly at the right border (pixels 14..27 of 28), stride 2, padding and dilation
# at the borders, an image narrower than its window.
VECTOR_CONVOLUTIONS = [
    ((1, 9, 13, 8), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 7, 10, 17), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((2, 6, 15, 33), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 12, 11, 40), (3, 3), (2, 1), (0, 2, 1, 0), (1, 2)),
    ((1, 16, 16, 64), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ((1, 5, 31, 37), (5, 3), (1, 2), (2, 2, 1, 1), (1, 1)),
    ((1, 4, 2, 48), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 5, 28, 16), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 3, 30, 40), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 8, 35, 24), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2)),
]


def check_convolution(y, expected, k):
    assert y.shape == expected.shape
    # float32 sums of k products of N(0, 1) values: the error grows like sqrt(k)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=2e-5 * np.sqrt(k))


@pytest.mark.parametrize("shape, kernel, stride, padding, dilation", VECTOR_CONVOLUTIONS)
@pytest.mark.parametrize("out_channels", [5, 32, 45])
def test_convolution2d_vector_paths(backend, rng, shape, kernel, stride, padding, dilation,
                                    out_channels):
    x = rand(rng, *shape)
    w = rand(rng, out_channels, kernel[0], kernel[1], shape[3])
    bias = rand(rng, out_channels)
    y = run(backend, "Convolution2d", [x, w, bias],
            {"stride": list(stride), "padding": list(padding), "dilation": list(dilation)})
    check_convolution(y, ref.spatial.convolution2d(x, w, bias, stride, padding, dilation),
                      kernel[0] * kernel[1] * shape[3])


@pytest.mark.parametrize("shape, kernel, stride, padding, dilation", VECTOR_CONVOLUTIONS)
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("with_bias", [True, False])
def test_depthwise_convolution2d_vector_paths(backend, rng, shape, kernel, stride, padding,
                                              dilation, multiplier, with_bias):
    x = rand(rng, *shape)
    w = rand(rng, 1, kernel[0], kernel[1], shape[3] * multiplier)
    bias = rand(rng, shape[3] * multiplier) if with_bias else None
    y = run(backend, "DepthwiseConvolution2d", [x, w] + ([bias] if with_bias else []),
            {"stride": list(stride), "padding": list(padding), "dilation": list(dilation)})
    check_convolution(y, ref.spatial.depthwise_convolution2d(x, w, bias, stride, padding, dilation),
                      kernel[0] * kernel[1])


def test_convolution_descriptor_defaults(backend, rng):
    x, w = rand(rng, 1, 6, 6, 2), rand(rng, 3, 3, 3, 2)
    np.testing.assert_allclose(run(backend, "Convolution2d", [x, w]), ref.spatial.convolution2d(x, w),
                               rtol=1e-4, atol=1e-4)


def test_scalar_stride_and_padding(backend, rng):
    x, w = rand(rng, 1, 9, 9, 2), rand(rng, 3, 3, 3, 2)
    y = run(backend, "Convolution2d", [x, w], {"stride": 2, "padding": 1})
    np.testing.assert_allclose(y, ref.spatial.convolution2d(x, w, None, (2, 2), (1, 1, 1, 1)), rtol=1e-4,
                               atol=1e-4)


# -- pooling ---------------------------------------------------------------------------------

@pytest.mark.parametrize("pool", ["max", "average"])
@pytest.mark.parametrize("shape, kernel, stride, padding", [
    ((1, 4, 4, 1), (2, 2), (2, 2), (0, 0, 0, 0)),
    ((2, 7, 9, 3), (3, 3), (2, 2), (1, 1, 1, 1)),
    ((1, 5, 5, 2), (3, 2), (1, 3), (2, 0, 1, 1)),
    ((1, 6, 6, 4), (6, 6), (1, 1), (0, 0, 0, 0)),
    ((1, 3, 3, 1), (3, 3), (1, 1), (2, 2, 2, 2)),
    ((3, 10, 7, 5), (2, 3), (3, 2), (1, 0, 2, 1)),
])
def test_pooling2d(backend, rng, pool, shape, kernel, stride, padding):
    x = rand(rng, *shape) - 3  # negative values: padding must never win a max
    y = run(backend, "Pooling2d", [x], {"pool": pool, "kernel": list(kernel),
                                        "stride": list(stride), "padding": list(padding)})
    expected = ref.spatial.pooling2d(x, pool, kernel, stride, padding)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=RTOL, atol=ATOL)


def test_average_pooling_excludes_padding(backend):
    x = np.ones((1, 2, 2, 1), dtype=np.float32)
    y = run(backend, "Pooling2d", [x], {"pool": "average", "kernel": [2, 2], "padding": [1, 1, 1, 1]})
    np.testing.assert_array_equal(y, np.ones((1, 3, 3, 1), dtype=np.float32))


# -- softmax and reshape ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1,), (5,), (3, 7), (2, 3, 4), (1, 1000)])
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0, -1.0])
def test_softmax(backend, rng, shape, beta):
    x = rand(rng, *shape) * 5
    y = run(backend, "Softmax", [x], {"beta": beta})
    np.testing.assert_allclose(y, ref.normalization.softmax(x, beta), rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(y.sum(axis=-1), 1, rtol=1e-5)


def test_softmax_is_numerically_stable(backend):
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]], dtype=np.float32)
    y = run(backend, "Softmax", [x])
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, ref.normalization.softmax(x), rtol=RTOL, atol=1e-6)


@pytest.mark.parametrize("shape, target, expected", [
    ((2, 3, 4), [4, 6], (4, 6)), ((2, 3, 4), [-1], (24,)), ((2, 3, 4), [3, -1, 2], (3, 4, 2)),
    ((24,), [1, 2, 3, 4], (1, 2, 3, 4)), ((1,), [1, 1, 1], (1, 1, 1)), ((), [1], (1,)),
])
def test_reshape(backend, rng, shape, target, expected):
    x = rand(rng, *shape)
    y = run(backend, "Reshape", [x], {"shape": target})
    assert y.shape == expected
    np.testing.assert_array_equal(y.ravel(), x.ravel())


# -- inputs ----------------------------------------------------------------------------------

def test_non_contiguous_inputs_are_copied_not_misread(backend, rng):
    big = rand(rng, 4, 6)
    x = big[:, ::2]                # strided view
    w = rand(rng, 3, 3).T          # Fortran-ordered
    assert not x.flags.c_contiguous and not w.flags.c_contiguous
    y = run(backend, "FullyConnected", [x, w])
    np.testing.assert_allclose(y, ref.normalization.fully_connected(x, w), rtol=1e-4, atol=1e-5)


def test_byte_swapped_float32_is_converted(backend, rng):
    x = rand(rng, 3, 4)
    y = run(backend, "Activation", [x.astype(">f4")], {"function": "relu"})
    np.testing.assert_array_equal(y, np.maximum(x, 0))


def test_lists_are_refused_as_data(backend):
    with pytest.raises(TypeError, match="input 0 must be a numpy.ndarray of float32, not list"):
        run(backend, "Addition", [[1.0, 2.0], [[10.0], [20.0]]])


def test_inputs_are_not_modified(backend, rng):
    x = rand(rng, 2, 5, 5, 3)
    w = rand(rng, 4, 3, 3, 3)
    saved = x.copy(), w.copy()
    run(backend, "Convolution2d", [x, w], {"padding": 1})
    np.testing.assert_array_equal(x, saved[0])
    np.testing.assert_array_equal(w, saved[1])


def test_each_call_returns_new_arrays(backend, rng):
    x = rand(rng, 4)
    first = run(backend, "Activation", [x], {"function": "relu"})
    second = run(backend, "Activation", [x], {"function": "relu"})
    assert first is not second and not np.shares_memory(first, second)
    assert not np.shares_memory(first, x)
