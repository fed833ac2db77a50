"""The reference backend's 3x3 and 5x5 depthwise kernels (stride 1 and 2, four output pixels at a
time away from the left and right borders) against a float64 NumPy reference: channel counts
below, at and past 16, widths from 1 (every pixel at a border) to past two blocks of four,
padding on any side, batch > 1, 1x1 images; and fused with its activation (a clamp applied in
the kernel's stores, or a swish after them) and a residual in a compiled program that is
exported and loaded again."""
import numpy as np
import pytest

import loader
from conformance import reference as ref
from conformance.network_reference import evaluate_network
from helpers import install_reference

F = np.float32
RNG = np.random.default_rng(31)


def rand(*shape):
    return RNG.standard_normal(shape).astype(F)


@pytest.fixture(scope="module")
def backend():
    with loader.Runtime() as runtime:
        yield runtime.create_backend("CpuRef")


@pytest.mark.parametrize("channels", [1, 5, 16, 17, 40])
@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 7, 9, 12, 15])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("padding", [(0, 0, 0, 0), (1, 1, 1, 1), (0, 2, 1, 0), (2, 1, 2, 2)])
@pytest.mark.parametrize("size", [3, 5])
def test_a_square_depthwise_convolution(backend, channels, width, stride, padding, size):
    top, bottom, left, right = padding
    x = rand(2, 6, width, channels)
    w = rand(1, size, size, channels)
    bias = rand(channels)
    if width + left + right < size or 6 + top + bottom < size:  # no output: refused, not run
        with pytest.raises(loader.InvalidLayerError, match="more than the padded input"):
            backend.execute("DepthwiseConvolution2d", [x, w, bias],
                            {"stride": [stride, stride], "padding": list(padding)})
        return
    y = backend.execute("DepthwiseConvolution2d", [x, w, bias],
                        {"stride": [stride, stride], "padding": list(padding)})[0]
    expected = ref.spatial.depthwise_convolution2d(x, w, bias, (stride, stride), padding)
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, stride", [((2, 9, 11, 24), 1), ((1, 10, 13, 40), 2),
                                             ((1, 1, 1, 19), 1)])
@pytest.mark.parametrize("size, function", [(3, "bounded_relu"), (5, "relu"), (5, "clip"),
                                            (3, "swish")])
def test_a_fused_depthwise_step_loads_again_with_identical_results(backend_dir, tmp_path, x_shape,
                                                                   stride, size, function):
    install_reference(backend_dir)
    c = x_shape[3]
    net = loader.Network()
    x = net.add_input("x", x_shape)
    y = net.add_layer("DepthwiseConvolution2d",
                      [x, net.add_constant("w", rand(1, size, size, c)), net.add_constant("b", rand(c))],
                      {"padding": size // 2, "stride": stride}, name="dw")
    if stride == 1:
        y = net.add_layer("Addition", [y, x], name="add")
    # values on both sides of each clamp's bounds
    y = net.add_layer("Activation", [y], {"function": function, "a": 6.0 if function != "clip" else -0.5,
                                          "b": 1.5}, name="act")
    net.add_output(y, "y")
    inputs = {"x": rand(*x_shape)}
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        with rt.load_network(net, backends=["CpuRef"]) as loaded:
            out = loaded.execute(inputs)["y"]
            loaded.export(tmp_path / "net.compiled")
        with rt.load_compiled_network(tmp_path / "net.compiled") as again:
            assert np.array_equal(again.execute(inputs)["y"], out)
    np.testing.assert_allclose(out, evaluate_network(net, inputs)["y"], rtol=1e-5, atol=1e-5)
