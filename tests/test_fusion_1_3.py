"""The reference backend's optimizer on Backend API 1.3 networks: the new activation functions
fused into the convolution and fully-connected epilogue, the swish pattern (sigmoid, then the
product with its input) as one swish epilogue or one step of its own, a BatchNormalization
folded into the weights of the convolution whose output it alone reads (then fused with what
follows), grouped convolutions in fused kernels; each plan checked (one compiled step, the
layers of each fused step named by its profiling event), each result against the float64
reference, and each compiled form exported and loaded again."""
import numpy as np
import pytest

import loader
from conformance.network_reference import evaluate_network
from loader import layers

F = np.float32


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(F)


@pytest.fixture(scope="module")
def runtime():
    with loader.Runtime() as rt:
        yield rt


def run(runtime, net, inputs, tmp_path=None):
    """The steps of the one program ``net`` compiles to (the layers of each, in execution
    order), after checking its results, and those of its exported and reloaded form."""
    expected = evaluate_network(net, inputs)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [(s.kind, s.layers) for s in loaded.plan] == [
            ("compiled", tuple(layer.name for layer in net.layers))]
        out = loaded.execute(inputs, profile=True)
        steps = [e.layers for e in loaded.last_profile if e.source == "backend"]
        if tmp_path is not None:
            loaded.export(tmp_path / "net.compiled")
    for name in expected:
        scale = max(1.0, float(np.abs(expected[name]).max()))
        np.testing.assert_allclose(out[name], expected[name], rtol=2e-4, atol=2e-4 * scale)
    if tmp_path is not None:
        with runtime.load_compiled_network(tmp_path / "net.compiled") as again:
            reloaded = again.execute(inputs, profile=True)
            assert [e.layers for e in again.last_profile if e.source == "backend"] == steps
        for name in expected:
            np.testing.assert_array_equal(reloaded[name], out[name])
    return steps


ACTIVATIONS = [
    {"function": "elu", "a": 0.7}, {"function": "selu"}, {"function": "hard_sigmoid"},
    {"function": "hard_swish"}, {"function": "swish", "a": 1.5}, {"function": "gelu"},
    {"function": "gelu", "approximate": "tanh"}, {"function": "softplus"},
    {"function": "softsign"}, {"function": "clip", "a": -0.5, "b": 0.75}, {"function": "celu", "a": 2.0},
    {"function": "thresholded_relu", "a": 0.3}, {"function": "mish"},
]


@pytest.mark.parametrize("activation", ACTIVATIONS, ids=lambda a: a["function"] + a.get("approximate", ""))
@pytest.mark.parametrize("layer, x_shape, w_shape, descriptor", [
    ("Convolution2d", (1, 9, 8, 8), (12, 3, 3, 4), {"padding": 1, "groups": 2}),
    ("FullyConnected", (5, 24), (17, 24), {}),
])
def test_a_1_3_activation_fuses_into_the_epilogue(runtime, layer, x_shape, w_shape, descriptor,
                                                   activation):
    rng = np.random.default_rng(len(activation["function"]))
    net = loader.Network()
    x = net.add_input("x", x_shape)
    y = net.add_layer(layer, [x, net.add_constant("w", rand(rng, *w_shape)),
                              net.add_constant("b", rand(rng, w_shape[0]))], descriptor, name="main")
    net.add_output(net.add_layer("Activation", [y], activation, name="act"), "y")
    assert run(runtime, net, {"x": rand(rng, *x_shape)}) == [("main", "act")]


def swish(net, t, prefix="", swap=False):
    s = net.add_layer("Activation", [t], {"function": "sigmoid"}, name=prefix + "sigmoid")
    return net.add_layer("Multiplication", [s, t] if swap else [t, s], name=prefix + "mul")


def batch_norm(net, rng, t, channels, name="bn"):
    stats = [net.add_constant(f"{name}_{k}", v.astype(F)) for k, v in (
        ("mean", rng.standard_normal(channels)), ("var", rng.uniform(0.5, 2.0, channels)),
        ("scale", rng.standard_normal(channels)), ("bias", rng.standard_normal(channels)))]
    return net.add_layer("BatchNormalization", [t] + stats, {"epsilon": 1e-3}, name=name)


@pytest.mark.parametrize("swap", [False, True])
def test_convolution_batch_norm_and_swish_are_one_step(runtime, tmp_path, swap):
    """EfficientNet's and RegNet's export: conv, BatchNormalization, sigmoid, product."""
    rng = np.random.default_rng(1)
    net = loader.Network()
    x = net.add_input("x", (1, 10, 9, 16))
    y = net.add_layer("Convolution2d", [x, net.add_constant("w", rand(rng, 32, 3, 3, 4))],
                      {"padding": 1, "stride": 2, "groups": 4}, name="conv")
    y = batch_norm(net, rng, y, 32)
    net.add_output(swish(net, y, swap=swap), "y")
    assert run(runtime, net, {"x": rand(rng, 1, 10, 9, 16)}, tmp_path) == [
        ("conv", "bn", "sigmoid", "mul")]


def test_a_swish_on_any_tensor_is_one_step(runtime, tmp_path):
    rng = np.random.default_rng(2)
    net = loader.Network()
    x = net.add_input("x", (2, 5, 7))
    r = net.add_input("r", (2, 5, 7))
    t = net.add_layer("Addition", [x, r], name="add")
    net.add_output(swish(net, t), "y")
    assert run(runtime, net, {"x": rand(rng, 2, 5, 7), "r": rand(rng, 2, 5, 7)}, tmp_path) == [
        ("add",), ("sigmoid", "mul")]


def test_a_sigmoid_read_elsewhere_is_no_swish(runtime):
    rng = np.random.default_rng(3)
    net = loader.Network()
    x = net.add_input("x", (3, 8))
    s = net.add_layer("Activation", [x], {"function": "sigmoid"}, name="sigmoid")
    net.add_output(net.add_layer("Multiplication", [x, s], name="mul"), "y")
    net.add_output(s, "s")
    assert run(runtime, net, {"x": rand(rng, 3, 8)}) == [("sigmoid",), ("mul",)]


def test_a_product_with_another_sigmoid_is_no_swish(runtime):
    rng = np.random.default_rng(4)
    net = loader.Network()
    x = net.add_input("x", (3, 8))
    z = net.add_input("z", (3, 8))
    s = net.add_layer("Activation", [z], {"function": "sigmoid"}, name="sigmoid")
    net.add_output(net.add_layer("Multiplication", [x, s], name="mul"), "y")
    assert run(runtime, net, {"x": rand(rng, 3, 8), "z": rand(rng, 3, 8)}) == [
        ("sigmoid",), ("mul",)]


@pytest.mark.parametrize("layer, x_shape, w_shape, descriptor", [
    ("Convolution2d", (1, 8, 8, 6), (10, 3, 3, 6), {"padding": 1}),
    ("Convolution2d", (1, 8, 8, 8), (16, 3, 3, 2), {"padding": 1, "groups": 4}),
    ("Convolution2d", (1, 8, 8, 8), (8, 3, 3, 1), {"padding": 1, "groups": 8}),
    ("DepthwiseConvolution2d", (1, 8, 8, 4), (1, 3, 3, 8), {"padding": 1}),
    ("FullyConnected", (6, 20), (9, 20), {}),
    ("FullyConnected", (6, 20), (20, 9), {"transpose_weights": False}),
])
@pytest.mark.parametrize("with_bias", [True, False])
def test_a_batch_norm_folds_into_the_weights(runtime, tmp_path, layer, x_shape, w_shape,
                                             descriptor, with_bias):
    """Folded at compile time, then the residual Addition and the relu fuse as usual."""
    rng = np.random.default_rng(sum(w_shape))
    w = rand(rng, *w_shape)
    inputs = [np.zeros(x_shape, F), w]
    channels = layers.prepare(layer, inputs, descriptor).output_shape[-1]
    out_shape = layers.prepare(layer, inputs, descriptor).output_shape
    net = loader.Network()
    x = net.add_input("x", x_shape)
    r = net.add_input("r", out_shape)
    operands = [x, net.add_constant("w", w)]
    if with_bias:
        operands.append(net.add_constant("b", rand(rng, channels)))
    y = net.add_layer(layer, operands, descriptor, name="main")
    y = batch_norm(net, rng, y, channels)
    y = net.add_layer("Addition", [y, r], name="add")
    net.add_output(net.add_layer("Activation", [y], {"function": "relu"}, name="relu"), "y")
    feed = {"x": rand(rng, *x_shape), "r": rand(rng, *out_shape)}
    assert run(runtime, net, feed, tmp_path) == [("main", "bn", "add", "relu")]


def test_a_batch_norm_of_statistics_given_at_run_time_is_not_folded(runtime):
    rng = np.random.default_rng(6)
    net = loader.Network()
    x = net.add_input("x", (1, 6, 6, 4))
    mean = net.add_input("mean", (8,))
    y = net.add_layer("Convolution2d", [x, net.add_constant("w", rand(rng, 8, 3, 3, 4))],
                      {"padding": 1}, name="conv")
    stats = [net.add_constant(k, v.astype(F)) for k, v in (
        ("var", rng.uniform(0.5, 2, 8)), ("scale", rng.standard_normal(8)), ("beta", rng.standard_normal(8)))]
    y = net.add_layer("BatchNormalization", [y, mean] + stats, {"epsilon": 1e-3}, name="bn")
    net.add_output(net.add_layer("Activation", [y], {"function": "relu"}, name="relu"), "y")
    assert run(runtime, net, {"x": rand(rng, 1, 6, 6, 4), "mean": rand(rng, 8)}) == [
        ("conv",), ("bn",), ("relu",)]


def test_an_mbconv_block_compiles_to_three_steps(runtime, tmp_path):
    """Expand (1 x 1, BN, swish), depthwise (BN, swish), project (BN) and the residual
    Addition: three fused kernels, every layer named by one of their events."""
    rng = np.random.default_rng(7)
    net = loader.Network()
    x = net.add_input("x", (1, 9, 9, 8))
    y = net.add_layer("Convolution2d", [x, net.add_constant("we", rand(rng, 24, 1, 1, 8))], {},
                      name="expand")
    y = swish(net, batch_norm(net, rng, y, 24, "bn1"), "e_")
    y = net.add_layer("DepthwiseConvolution2d", [y, net.add_constant("wd", rand(rng, 1, 3, 3, 24))],
                      {"padding": 1}, name="dw")
    y = swish(net, batch_norm(net, rng, y, 24, "bn2"), "d_")
    y = net.add_layer("Convolution2d", [y, net.add_constant("wp", rand(rng, 8, 1, 1, 24))], {},
                      name="project")
    y = batch_norm(net, rng, y, 8, "bn3")
    net.add_output(net.add_layer("Addition", [y, x], name="add"), "y")
    assert run(runtime, net, {"x": rand(rng, 1, 9, 9, 8)}, tmp_path) == [
        ("expand", "bn1", "e_sigmoid", "e_mul"), ("dw", "bn2", "d_sigmoid", "d_mul"),
        ("project", "bn3", "add")]


def squeeze_and_excite(net, rng, x, shape, scale_shape=None, keep_product=False, project_window=1):
    """EfficientNet's block end: the mean of each channel of x, two 1 x 1 convolutions (relu,
    sigmoid), x times that scale (or times a constant of scale_shape), then the projection,
    its BatchNormalization and the residual Addition."""
    n, c = shape[0], shape[3]
    if scale_shape is None:
        pooled = net.add_layer("Reduce", [x], {"function": "mean", "axes": [1, 2], "keep_dims": True},
                               name="pool")
        s = net.add_layer("Convolution2d", [pooled, net.add_constant("w1", rand(rng, 10, 1, 1, c)),
                                            net.add_constant("b1", rand(rng, 10))],
                          {}, name="fc1")
        s = net.add_layer("Activation", [s], {"function": "relu"}, name="relu")
        s = net.add_layer("Convolution2d", [s, net.add_constant("w2", rand(rng, c, 1, 1, 10))], {}, name="fc2")
        s = net.add_layer("Activation", [s], {"function": "sigmoid"}, name="sigmoid")
    else:
        s = net.add_constant("s", rng.uniform(-2, 2, scale_shape).astype(F))
    y = net.add_layer("Multiplication", [s, x], name="scale")
    if keep_product:
        net.add_output(y, "product")
    k = project_window
    y = net.add_layer("Convolution2d", [y, net.add_constant("wp", rand(rng, 24, k, k, c))],
                      {"padding": k // 2}, name="project")
    y = batch_norm(net, rng, y, 24, "bn3")
    r = net.add_input("r", (n, shape[1], shape[2], 24))
    net.add_output(net.add_layer("Addition", [y, r], name="add"), "y")


SE_STEPS = [("pool",), ("fc1", "relu"), ("fc2", "sigmoid")]


@pytest.mark.parametrize("shape, scale_shape", [
    ((1, 7, 7, 40), None), ((2, 7, 7, 40), None), ((3, 5, 6, 33), None),
    ((2, 7, 7, 40), (40,)), ((2, 7, 7, 40), (1, 1, 1, 40)), ((1, 9, 4, 16), (16,)),
], ids=["one image", "two images", "three images 33 channels", "constant [c]",
        "constant [1, 1, 1, c]", "constant 16 channels"])
def test_a_channel_scale_fuses_into_the_pointwise_convolution_after_it(runtime, tmp_path, shape,
                                                                        scale_shape):
    """The Multiplication of x by one scale per channel (per image, or one for all) joins the
    pointwise convolution that alone reads its product: the convolution scales its input as
    it packs it, which gives the bits of the two run apart (the product also an output). With
    images of 49 pixels, the GEMM's 14-row panels straddle two images."""
    rng = np.random.default_rng(shape[0] * 100 + shape[3])
    feed = {"x": rand(rng, *shape), "r": rand(rng, *shape[:3], 24)}
    outs = []
    for keep in (False, True):
        net = loader.Network()
        x = net.add_input("x", shape)
        squeeze_and_excite(net, np.random.default_rng(9), x, shape, scale_shape, keep)
        steps = run(runtime, net, feed, tmp_path if not keep else None)
        head = SE_STEPS if scale_shape is None else []
        if keep:
            assert steps == head + [("scale",), ("project", "bn3", "add")]
        else:
            assert steps == head + [("scale", "project", "bn3", "add")]
        with runtime.load_network(net, backends=["CpuRef"]) as loaded:
            outs.append(loaded.execute(feed)["y"])
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("shape, scale_shape, window", [
    ((2, 7, 7, 40), (1, 7, 1, 40), 1), ((2, 7, 7, 40), (40,), 3), ((2, 7, 7, 40), (2, 1, 1, 1), 1),
    ((2, 7, 2, 40), (2, 40), 1)],
    ids=["a scale per row", "a 3 x 3 convolution", "a scale per image", "a scale per column"])
def test_a_product_that_is_no_channel_scale_of_a_pointwise_convolution_stays_apart(
        runtime, shape, scale_shape, window):
    rng = np.random.default_rng(10)
    net = loader.Network()
    x = net.add_input("x", shape)
    squeeze_and_excite(net, rng, x, shape, scale_shape, project_window=window)
    assert run(runtime, net, {"x": rand(rng, *shape), "r": rand(rng, *shape[:3], 24)}) == [
        ("scale",), ("project", "bn3", "add")]


def test_every_single_byte_change_to_the_new_fused_forms_is_loaded_or_refused(runtime):
    """A grouped convolution with a folded BatchNormalization and a swish, a swish alone, and
    a pointwise convolution that scales its input: each byte of their serialized program
    changed in turn is refused or loads without a crash."""
    rng = np.random.default_rng(8)
    net = loader.Network()
    x = net.add_input("x", (1, 3, 3, 4))
    y = net.add_layer("Convolution2d", [x, net.add_constant("w", rand(rng, 4, 1, 1, 2))],
                      {"groups": 2}, name="conv")
    y = swish(net, batch_norm(net, rng, y, 4), "a_")
    y = net.add_layer("Addition", [y, x], name="add")
    y = swish(net, y, "b_")
    y = net.add_layer("Multiplication", [net.add_constant("s", rand(rng, 4)), y], name="scale")
    net.add_output(net.add_layer("Convolution2d", [y, net.add_constant("wp", rand(rng, 4, 1, 1, 4))],
                                 {}, name="project"), "y")
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        blob = loaded.plan[0].compiled.serialize()
    backend = runtime.create_backend("CpuRef")
    refused = 0
    try:
        for offset in range(len(blob)):
            damaged = bytearray(blob)
            damaged[offset] ^= 0x5A
            try:
                compiled = loader._core.load_compiled_subgraph(backend, bytes(damaged))
            except loader.BackendError:
                refused += 1
                continue
            compiled.close()
    finally:
        backend.close()
    assert refused > 50


def test_a_serialized_scale_that_does_not_fit_its_window_is_refused(runtime):
    """The per-image scale's stride (the image's channel count) read back as anything but that
    count or 0, or as 0 with one scale per image stored, would read past the scale: refused."""
    rng = np.random.default_rng(12)
    net = loader.Network()
    x = net.add_input("x", (2, 3, 3, 40))
    s = net.add_input("s", (2, 1, 1, 40))
    y = net.add_layer("Multiplication", [s, x], name="scale")
    net.add_output(net.add_layer("Convolution2d", [y, net.add_constant("w", rand(rng, 8, 1, 1, 40))],
                                 {}, name="project"), "y")
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        blob = loaded.plan[0].compiled.serialize()
    # the kernel's has_scale (1), its padding and scale_stride (40), as this build lays them out
    fields = (1).to_bytes(4, "little") + bytes(4) + (40).to_bytes(8, "little")
    at = blob.index(b"RKFK")
    assert blob.count(fields, at) == 1
    where = blob.index(fields, at) + 8
    backend = runtime.create_backend("CpuRef")
    try:
        loader._core.load_compiled_subgraph(backend, blob).close()      # as written: loads
        for stride in (41, 0, 80, -40):
            damaged = blob[:where] + stride.to_bytes(8, "little", signed=True) + blob[where + 8:]
            with pytest.raises(loader.BackendError):
                loader._core.load_compiled_subgraph(backend, damaged)
    finally:
        backend.close()
