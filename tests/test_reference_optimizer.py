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


# -- a convolution writes its output over the residual it alone still reads ----------------------
#
# t = relu(x) is an arena tensor that a first convolution reads and a second one adds as its
# residual, and a last step reads the second one's output. Nothing reads t afterwards, so where the second convolution's kernel allows it
# (rk_conv_residual_in_place: the GEMM with one K block) its output takes t's bytes. The same
# network with t also an output keeps t apart: both must give the same bits, and the float64
# reference's values.

def residual_block(x_shape, mid, window, activation, residual_is_input=False):
    net = loader.Network()
    c = x_shape[-1]
    x = net.add_input("x", x_shape)
    t = net.add_layer("Activation", [x], {"function": "relu"}, name="t")
    if residual_is_input:                       # the second convolution reads t itself
        u, mid = t, c
    else:
        u = net.add_layer("Convolution2d", [t, net.add_constant("w1", rand(mid, 1, 1, c))], name="conv1")
    kh, descriptor = window
    w2 = net.add_constant("w2", rand(c, kh, kh, mid) / F(np.sqrt(kh * kh * mid)))
    y = net.add_layer("Convolution2d", [u, w2, net.add_constant("b2", rand(c))], descriptor, name="conv2")
    y = net.add_layer("Addition", [y, t], name="add")
    y = net.add_layer("Activation", [y], activation, name="act")
    # a step after it: the fused convolution's output is an arena tensor, not the network's
    net.add_output(net.add_layer("Activation", [y], {"function": "tanh"}, name="after"), "y")
    return net, t


POINTWISE = (1, {})
RELU = {"function": "relu"}


@pytest.mark.parametrize("x_shape, mid, window, activation", [
    ((1, 14, 16, 64), 32, POINTWISE, RELU),               # whole 14 x 32 tiles, the kernel's store
    ((1, 5, 7, 40), 24, POINTWISE, RELU),                 # edge tiles both ways
    ((1, 14, 16, 64), 32, POINTWISE, {"function": "sigmoid"}),  # an epilogue the kernel leaves
    ((2, 7, 9, 24), 24, (3, {"padding": 2, "dilation": 2}), RELU),  # the implicit im2col, K 216
    ((1, 28, 28, 128), 64, POINTWISE, RELU),              # two threads where there are two cores
    ((1, 6, 10, 64), 320, POINTWISE, RELU),               # K 320: two K blocks, kept apart
    ((1, 30, 27, 24), 40, (3, {"padding": 1}), RELU),     # Winograd, kept apart
], ids=["tiles", "edges", "sigmoid", "im2col", "threads", "deep", "winograd"])
def test_a_convolution_over_its_dying_residual_gives_the_bits_of_separate_buffers(
        runtime, x_shape, mid, window, activation):
    net, t = residual_block(x_shape, mid, window, activation)
    xa = rand(*x_shape)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [s.kind for s in loaded.plan] == ["compiled"]
        got = loaded.execute({"x": xa})["y"]
    net.add_output(t, "t")                      # t now outlives the convolution
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        apart = loaded.execute({"x": xa})
    np.testing.assert_array_equal(got, apart["y"])
    np.testing.assert_allclose(got, evaluate_network(net, {"x": xa})["y"], rtol=2e-4, atol=2e-4)


def test_a_convolution_whose_residual_is_also_its_input_keeps_them_apart(runtime):
    # every output pixel reads nine input pixels: written over its input, later pixels would
    # read outputs
    net, _ = residual_block((1, 9, 11, 24), 0, (3, {"padding": 2, "dilation": 2}), RELU,
                            residual_is_input=True)
    xa = rand(1, 9, 11, 24)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        got = loaded.execute({"x": xa})["y"]
    np.testing.assert_allclose(got, evaluate_network(net, {"x": xa})["y"], rtol=2e-4, atol=2e-4)


def test_a_loaded_compiled_network_writes_over_its_residual_as_the_compiled_one(runtime, tmp_path):
    net, _ = residual_block((1, 5, 7, 40), 24, POINTWISE, RELU)
    xa = rand(1, 5, 7, 40)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        got = loaded.execute({"x": xa})["y"]
        loaded.export(tmp_path / "net.compiled")
    with runtime.load_compiled_network(tmp_path / "net.compiled") as again:
        np.testing.assert_array_equal(again.execute({"x": xa})["y"], got)


# -- a Reshape's output is its input's bytes ------------------------------------------------------

def test_a_residual_whose_reshapes_are_read_later_is_not_written_over(runtime):
    # the convolution is r's last reader, but r's bytes live on as r3 (a Reshape of a Reshape
    # of r), which the last Addition reads: the convolution's output must not take them
    net = loader.Network()
    x = net.add_input("x", (1, 14, 16, 64))
    r = net.add_layer("Activation", [x], {"function": "relu"}, name="r")
    r2 = net.add_layer("Reshape", [r], {"shape": [1, 16, 14, 64]}, name="r2")
    r3 = net.add_layer("Reshape", [r2], {"shape": [1, 14, 16, 64]}, name="r3")
    u = net.add_layer("Activation", [x], {"function": "tanh"}, name="u")
    y = net.add_layer("Convolution2d", [u, net.add_constant("w", rand(64, 1, 1, 64) / F(8))], name="conv")
    y = net.add_layer("Addition", [y, r], name="add")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    net.add_output(net.add_layer("Addition", [y, r3], name="late"), "z")
    assert run(runtime, net, {"x": rand(1, 14, 16, 64)}) == [
        ("r",), ("r2",), ("r3",), ("u",), ("conv", "add", "relu"), ("late",)]


def test_a_residual_whose_bytes_another_tensor_still_reads_is_not_written_over(runtime):
    # the convolution's residual r2 is a Reshape of r, which the last Addition reads after it:
    # the convolution's output must not take r2's (that is r's) bytes
    net = loader.Network()
    x = net.add_input("x", (1, 14, 16, 64))
    r = net.add_layer("Activation", [x], {"function": "relu"}, name="r")
    r2 = net.add_layer("Reshape", [r], {"shape": [1, 16, 14, 64]}, name="r2")
    u = net.add_layer("Activation", [x], {"function": "tanh"}, name="u")
    u2 = net.add_layer("Reshape", [u], {"shape": [1, 16, 14, 64]}, name="u2")
    y = net.add_layer("Convolution2d", [u2, net.add_constant("w", rand(64, 1, 1, 64) / F(8))], name="conv")
    y = net.add_layer("Addition", [y, r2], name="add")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    z = net.add_layer("Addition", [net.add_layer("Reshape", [y], {"shape": [1, 14, 16, 64]}, name="y2"), r],
                      name="late")
    net.add_output(z, "z")
    assert run(runtime, net, {"x": rand(1, 14, 16, 64)}) == [
        ("r",), ("r2",), ("u",), ("u2",), ("conv", "add", "relu"), ("y2",), ("late",)]


# -- an image given channels first: the first convolution reads its planes ----------------------
# A Transpose of [n, c, h, w] planes to channels last, read only by a convolution of few
# channels with padding (an image's first layer, as the ONNX importer lays it out), is not run:
# the convolution makes its zero-padded copy from the planes. One profiling event of both; the
# same bits as when the channels-last tensor is also an output (then it is written and read).

def planes_then_convolution(x_shape, channels_out, kernel, descriptor, before=None, perm=(0, 2, 3, 1)):
    net = loader.Network()
    x = net.add_input("x", x_shape)
    if before is not None:                      # the planes an arena tensor, not the input
        x = net.add_layer("Activation", [x], {"function": before}, name="before")
    t = net.add_layer("Transpose", [x], {"perm": list(perm)}, name="t")
    c = x_shape[perm[3]]
    w = net.add_constant("w", rand(channels_out, kernel, kernel, c))
    y = net.add_layer("Convolution2d", [t, w, net.add_constant("b", rand(channels_out))], descriptor,
                      name="conv")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    net.add_output(net.add_layer("Activation", [y], {"function": "tanh"}, name="after"), "y")
    return net, t


@pytest.mark.parametrize("x_shape, channels_out, kernel, descriptor", [
    ((1, 3, 30, 29), 16, 3, {"padding": 1, "stride": 2}),      # 16-pixel runs and a tail
    ((2, 3, 17, 40), 40, 7, {"padding": 3, "stride": 2}),      # two images
    ((1, 1, 9, 12), 8, 3, {"padding": [1, 0, 2, 1]}),          # one plane, uneven padding
    ((2, 5, 11, 6), 33, 5, {"padding": 2}),                    # five planes
], ids=["rgb", "two-images", "one-plane", "five-planes"])
def test_an_image_given_channels_first_is_read_by_its_convolution_as_planes(
        runtime, x_shape, channels_out, kernel, descriptor):
    net, t = planes_then_convolution(x_shape, channels_out, kernel, descriptor)
    xa = rand(*x_shape)
    assert run(runtime, net, {"x": xa}) == [("t", "conv", "relu"), ("after",)]
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        got = loaded.execute({"x": xa})["y"]
    net.add_output(t, "t")                      # the channels-last tensor is written now
    assert run(runtime, net, {"x": xa}) == [("t",), ("conv", "relu"), ("after",)]
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        np.testing.assert_array_equal(got, loaded.execute({"x": xa})["y"])


def test_planes_that_an_earlier_layer_wrote_are_read_by_the_convolution(runtime):
    net, _ = planes_then_convolution((1, 3, 40, 40), 64, 3, {"padding": 1}, before="tanh")
    assert run(runtime, net, {"x": rand(1, 3, 40, 40)}) == [
        ("before",), ("t", "conv", "relu"), ("after",)]


def test_a_channels_last_image_another_layer_also_reads_is_written(runtime):
    net, t = planes_then_convolution((1, 3, 12, 12), 8, 3, {"padding": 1})
    net.add_output(net.add_layer("Activation", [t], {"function": "relu"}, name="other"), "other")
    assert run(runtime, net, {"x": rand(1, 3, 12, 12)}) == [
        ("t",), ("conv", "relu"), ("after",), ("other",)]


# (a 3 x 3 x 3 image, so that only the permutation tells the others from the planes' relayout)
@pytest.mark.parametrize("x_shape, channels_out, kernel, descriptor, perm", [
    ((1, 3, 16, 16), 8, 3, {}, (0, 2, 3, 1)),                   # no padding: no padded copy
    ((1, 12, 10, 10), 8, 3, {"padding": 1}, (0, 2, 3, 1)),      # 12 channels: no padded copy
    ((3, 3, 3, 3), 8, 3, {"padding": 1}, (1, 2, 3, 0)),
    ((3, 3, 3, 3), 8, 3, {"padding": 1}, (0, 1, 3, 2)),
    ((3, 3, 3, 3), 8, 3, {"padding": 1}, (0, 2, 1, 3)),
], ids=["unpadded", "many-channels", "1230", "0132", "0213"])
def test_other_transposes_before_a_convolution_run_as_steps(runtime, x_shape, channels_out, kernel,
                                                             descriptor, perm):
    net, _ = planes_then_convolution(x_shape, channels_out, kernel, descriptor, perm=perm)
    assert run(runtime, net, {"x": rand(*x_shape)}) == [("t",), ("conv", "relu"), ("after",)]


def test_a_loaded_compiled_network_reads_the_planes_as_the_compiled_one(runtime, tmp_path):
    net, _ = planes_then_convolution((1, 3, 23, 21), 24, 3, {"padding": 1, "stride": 2})
    xa = rand(1, 3, 23, 21)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        got = loaded.execute({"x": xa})["y"]
        loaded.export(tmp_path / "net.compiled")
    with runtime.load_compiled_network(tmp_path / "net.compiled") as again:
        np.testing.assert_array_equal(again.execute({"x": xa}, profile=True)["y"], got)
        assert [e.layers for e in again.last_profile if e.source == "backend"] == [
            ("t", "conv", "relu"), ("after",)]


def test_a_channels_last_image_that_is_also_the_residual_is_written(runtime):
    # the convolution reads t twice, as its input and as the residual it adds: reading the
    # planes for one of them would read the other in the wrong layout
    net = loader.Network()
    x = net.add_input("x", (1, 3, 10, 12))
    t = net.add_layer("Transpose", [x], {"perm": [0, 2, 3, 1]}, name="t")
    y = net.add_layer("Convolution2d", [t, net.add_constant("w", rand(3, 3, 3, 3))], {"padding": 1},
                      name="conv")
    y = net.add_layer("Addition", [y, t], name="add")
    net.add_output(net.add_layer("Activation", [y], {"function": "tanh"}, name="after"), "y")
    assert run(runtime, net, {"x": rand(1, 3, 10, 12)}) == [("t",), ("conv", "add", "after")]
