"""The reference backend packs the constant weights of its compiled Convolution2d and
FullyConnected steps once, when it compiles the sub-graph (and again when a compiled form is
loaded): results against a float64 NumPy reference on the GEMM's edges (channels that are not
a multiple of the register tile, stride 2, padding, 1x1 spatial, batch > 1, several K blocks,
weights past one packing slab), and a compiled form exported and loaded again gives the very
same bytes."""
import numpy as np
import pytest

import loader
from conformance.network_reference import evaluate_network
from helpers import install_reference

F = np.float32
RNG = np.random.default_rng(23)


def rand(*shape):
    return RNG.standard_normal(shape).astype(F)


@pytest.fixture
def runtime(backend_dir):
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        yield rt


CONVOLUTIONS = [
    # x shape, filter [o, kh, kw, c], descriptor
    ((2, 9, 7, 5), (37, 3, 3, 5), {"padding": 1, "stride": 2}),        # few channels, padded
    ((1, 1, 1, 40), (20, 1, 1, 40), {}),                                # 1x1 spatial
    ((2, 6, 6, 24), (16, 1, 1, 24), {}),                                # pointwise projection
    ((1, 5, 6, 33), (70, 1, 1, 33), {"stride": 2}),                     # strided pointwise
    ((1, 7, 7, 300), (70, 3, 3, 300), {"padding": 1}),                  # several K blocks
    ((1, 2, 2, 1200), (1100, 2, 2, 1200), {}),                          # past one 16 MiB slab
]


def check(runtime, net, inputs, tmp_path):
    """Runs ``net`` compiled, against NumPy in float64, then exported and loaded again."""
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [s.kind for s in loaded.plan] == ["compiled"]
        out = loaded.execute(inputs)
        again = loaded.execute(inputs)
        loaded.export(tmp_path / "net.compiled")
    expected = evaluate_network(net, inputs)
    for name in expected:
        np.testing.assert_allclose(out[name], expected[name], rtol=2e-4, atol=2e-4)
        assert np.array_equal(again[name], out[name])
    with runtime.load_compiled_network(tmp_path / "net.compiled") as loaded:
        reloaded = loaded.execute(inputs)
    for name in expected:
        assert np.array_equal(reloaded[name], out[name])


@pytest.mark.parametrize("x_shape, w_shape, descriptor", CONVOLUTIONS,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else "")
@pytest.mark.parametrize("epilogue", ["alone", "relu", "residual"])
def test_a_convolution_with_packed_weights(runtime, tmp_path, x_shape, w_shape, descriptor,
                                           epilogue):
    net = loader.Network()
    x = net.add_input("x", x_shape)
    w = net.add_constant("w", (rand(*w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(F))
    b = net.add_constant("b", rand(w_shape[0]))
    y = net.add_layer("Convolution2d", [x, w, b], descriptor, name="conv")
    inputs = {"x": rand(*x_shape)}
    if epilogue == "relu":
        y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    elif epilogue == "residual":
        with runtime.load_network(_shape_probe(x_shape, w_shape, descriptor),
                                  backends=["CpuRef"]) as probe:
            shape = probe.execute({"x": inputs["x"]})["y"].shape
        r = net.add_input("r", shape)
        inputs["r"] = rand(*shape)
        y = net.add_layer("Addition", [y, r], name="add")
    net.add_output(y, "y")
    check(runtime, net, inputs, tmp_path)


def _shape_probe(x_shape, w_shape, descriptor):
    net = loader.Network()
    x = net.add_input("x", x_shape)
    w = net.add_constant("w", np.zeros(w_shape, F))
    net.add_output(net.add_layer("Convolution2d", [x, w], descriptor, name="conv"), "y")
    return net


@pytest.mark.parametrize("rows, k, m, transpose", [
    (45, 70, 29, True), (9, 300, 50, False), (33, 17, 1, True), (5, 600, 70, True)])
@pytest.mark.parametrize("activation", [None, "tanh"])
def test_a_fully_connected_layer_with_packed_weights(runtime, tmp_path, rows, k, m, transpose,
                                                     activation):
    net = loader.Network()
    x = net.add_input("x", (rows, k))
    w = net.add_constant("w", rand(m, k) if transpose else rand(k, m))
    b = net.add_constant("b", rand(m))
    y = net.add_layer("FullyConnected", [x, w, b], {"transpose_weights": transpose}, name="fc")
    if activation:
        y = net.add_layer("Activation", [y], {"function": activation}, name="act")
    net.add_output(y, "y")
    check(runtime, net, {"x": rand(rows, k)}, tmp_path)


def test_a_chain_of_packed_layers_loads_again_with_identical_results(runtime, tmp_path):
    """Several packed steps in one program, a folded BatchNormalization among them."""
    net = loader.Network()
    x = net.add_input("x", (2, 10, 10, 19))
    t = net.add_layer("Convolution2d", [x, net.add_constant("w1", rand(48, 3, 3, 19) / 13)],
                      {"padding": 1, "stride": 2}, name="c1")
    c = 48
    stats = [net.add_constant(f"bn{i}", v) for i, v in
             enumerate([rand(c), np.abs(rand(c)) + 0.5, rand(c), rand(c)])]
    t = net.add_layer("BatchNormalization", [t, *stats], {"epsilon": 1e-3}, name="bn")
    t = net.add_layer("Convolution2d", [t, net.add_constant("w2", rand(24, 1, 1, c) / 7)],
                      name="c2")
    t = net.add_layer("Reshape", [t], {"shape": [2, 5 * 5 * 24]}, name="flatten")
    t = net.add_layer("FullyConnected", [t, net.add_constant("wf", rand(10, 600) / 25)],
                      name="fc")
    net.add_output(t, "y")
    check(runtime, net, {"x": rand(2, 10, 10, 19)}, tmp_path)
