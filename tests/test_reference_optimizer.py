"""The reference backend's optimizer: the whole sub-graph becomes one compiled program, in
which Convolution2d, DepthwiseConvolution2d and FullyConnected are fused with a following
residual Addition and/or Activation into one step and every other layer is a step of its own
(the program's profiling events show its steps); results against NumPy on the GEMM's edge
tiles, its threaded path and the few-row FullyConnected path."""
import numpy as np
import pytest

import loader
from conformance.network_reference import evaluate_network

F = np.float32
RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype(F)


@pytest.fixture(scope="module")
def runtime():
    with loader.Runtime() as rt:
        yield rt


def run(runtime, net, inputs):
    """The steps of the program ``net`` compiles to: the layers of each, in execution order."""
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [(s.kind, s.layers) for s in loaded.plan] == [
            ("compiled", tuple(layer.name for layer in net.layers))]
        out = loaded.execute(inputs, profile=True)
        steps = [e.layers for e in loaded.last_profile if e.source == "backend"]
    expected = evaluate_network(net, inputs)
    for name in expected:
        np.testing.assert_allclose(out[name], expected[name], rtol=2e-4, atol=2e-4)
    return steps


ACTIVATIONS = [{"function": "relu"}, {"function": "bounded_relu", "a": 0.5, "b": -0.25},
               {"function": "sigmoid"}, {"function": "tanh"},
               {"function": "leaky_relu", "a": 0.2}]


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a["function"])
@pytest.mark.parametrize("layer, x_shape, w_shape, descriptor", [
    ("Convolution2d", (2, 13, 11, 5), (37, 3, 3, 5), {"padding": 1, "stride": [2, 1]}),
    ("DepthwiseConvolution2d", (1, 9, 10, 6), (1, 3, 3, 12), {"padding": [1, 0]}),
    ("FullyConnected", (3, 40), (33, 40), {}),        # few rows: streamed weights
    ("FullyConnected", (45, 70), (70, 29), {"transpose_weights": False}),   # GEMM
])
def test_a_layer_and_its_activation_become_one_step(runtime, layer, x_shape, w_shape,
                                                     descriptor, activation):
    net = loader.Network()
    x = net.add_input("x", x_shape)
    w = net.add_constant("w", rand(*w_shape))
    channels = w_shape[0] if layer in ("Convolution2d",) else (
        w_shape[3] if layer == "DepthwiseConvolution2d" else
        (w_shape[0] if descriptor.get("transpose_weights", True) else w_shape[1]))
    b = net.add_constant("b", rand(channels))
    y = net.add_layer(layer, [x, w, b], descriptor, name="main")
    y = net.add_layer("Activation", [y], activation, name="act")
    net.add_output(y, "y")
    assert run(runtime, net, {"x": rand(*x_shape)}) == [("main", "act")]


def test_a_residual_addition_and_activation_fuse_into_the_convolution(runtime):
    net = loader.Network()
    x = net.add_input("x", (1, 12, 12, 8))
    w = net.add_constant("w", rand(8, 3, 3, 8))
    y = net.add_layer("Convolution2d", [x, w], {"padding": 1}, name="conv")
    y = net.add_layer("Addition", [y, x], name="add")          # the residual is the input itself
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    net.add_output(y, "y")
    assert run(runtime, net, {"x": rand(1, 12, 12, 8)}) == [("conv", "add", "relu")]


def test_a_large_convolution_takes_the_threaded_gemm_path(runtime):
    net = loader.Network()
    x = net.add_input("x", (1, 40, 40, 32))
    r = net.add_input("r", (1, 40, 40, 48))
    w = net.add_constant("w", rand(48, 3, 3, 32))
    # dilated: a 3x3 window of stride 1 and dilation 1 would take the Winograd convolution
    y = net.add_layer("Convolution2d", [x, w], {"padding": 2, "dilation": 2}, name="conv")
    y = net.add_layer("Addition", [r, y], name="add")
    net.add_output(y, "y")
    assert run(runtime, net, {"x": rand(1, 40, 40, 32), "r": rand(1, 40, 40, 48)}) == \
        [("conv", "add")]


def test_non_constant_weights_are_boundary_inputs(runtime):
    net = loader.Network()
    x = net.add_input("x", (6, 10))
    w = net.add_input("w", (7, 10))
    y = net.add_layer("FullyConnected", [x, w], name="fc")
    net.add_output(net.add_layer("Activation", [y], {"function": "tanh"}, name="t"), "y")
    assert run(runtime, net, {"x": rand(6, 10), "w": rand(7, 10)}) == [("fc", "t")]


def test_what_cannot_fuse_runs_layer_by_layer(runtime):
    net = loader.Network()
    x = net.add_input("x", (1, 6, 6, 4))
    w = net.add_constant("w", rand(4, 1, 1, 4))
    c = net.add_layer("Convolution2d", [x, w], name="conv")
    a = net.add_layer("Activation", [c], {"function": "relu"}, name="relu")
    s = net.add_layer("Addition", [c, net.add_constant("one", rand(4))], name="broadcast_add")
    net.add_output(a, "a")
    net.add_output(s, "s")          # conv's output is read twice: no fusion
    assert run(runtime, net, {"x": rand(1, 6, 6, 4)}) == [
        ("conv",), ("relu",), ("broadcast_add",)]


def test_an_exposed_intermediate_is_not_fused_away(runtime):
    net = loader.Network()
    x = net.add_input("x", (4, 8))
    y = net.add_layer("FullyConnected", [x, net.add_constant("w", rand(8, 8))], name="fc")
    z = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    net.add_output(y, "fc_out")
    net.add_output(z, "y")
    assert run(runtime, net, {"x": rand(4, 8)}) == [("fc",), ("relu",)]


def test_a_sub_graph_longer_than_a_program_is_compiled_in_programs_of_4096_layers(runtime):
    """8195 layers: three programs in layer order (4096, 4096, 3), and tensors that cross from
    the first to the last (the input, and the first layer's output) are boundary tensors."""
    net = loader.Network()
    x = net.add_input("x", (2, 16))
    first = t = net.add_layer("Activation", [x], {"function": "leaky_relu", "a": 0.5}, name="l0")
    for i in range(1, 8192):
        d = {"function": "relu"} if i % 2 else {"function": "leaky_relu", "a": 0.5}
        t = net.add_layer("Activation", [t], d, name=f"l{i}")
    t = net.add_layer("Addition", [t, first], {}, name="l8192")
    t = net.add_layer("Addition", [t, x], {}, name="l8193")
    t = net.add_layer("Activation", [t], {"function": "relu"}, name="l8194")
    net.add_output(t, "y")
    values = rand(2, 16)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [(s.kind, len(s.layers)) for s in loaded.plan] == [
            ("compiled", 4096), ("compiled", 4096), ("compiled", 3)]
        assert [name for s in loaded.plan for name in s.layers] == [l.name for l in net.layers]
        y = loaded.execute({"x": values})["y"]
    leaky = np.where(values > 0, values, 0.5 * values)
    np.testing.assert_array_equal(y, np.maximum(np.maximum(leaky, 0) + leaky + values, 0))
