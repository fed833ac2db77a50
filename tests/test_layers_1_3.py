"""The layer types and activation functions of Backend API 1.3 on the reference backend, against
conformance.reference.evaluate (float64, ONNX's semantics) within the kit's tolerances: every
rank pair of the broadcasting layers, every axis, negative axes and steps, clamped slices, every
permutation of small ranks, every reduce mask, half-to-even rounding and the edge values of the
element-wise functions. (The spatial layers have their own tests.)"""
import itertools
import zlib

import numpy as np
import pytest

import loader
from conformance import reference
from conformance.layer_runs import tolerance
from loader.layers.elementwise import ACTIVATION_FUNCTIONS, UNARY_FUNCTIONS
from loader.layers.normalization import REDUCE_FUNCTIONS
from loader.layers.tensor import slice_bounds

F = np.float32
BINARY = ["Subtraction", "Division", "Maximum", "Minimum", "Power"]


@pytest.fixture(scope="module")
def backend():
    with loader.Runtime() as runtime:
        yield runtime.create_backend("CpuRef")


def rng_for(*key):
    """A generator seeded by the test's own parameters (the same numbers in every run)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def check(backend, layer, inputs, descriptor=None):
    """The backend's output has the reference's shape and lies within the kit's tolerance of it
    wherever the reference is a finite float32; where it is an infinity (in float32: beyond
    its range), the output is that infinity."""
    [out] = backend.execute(layer, inputs, descriptor)
    expected = reference.evaluate(layer, inputs, descriptor)
    assert out.shape == expected.shape, (layer, descriptor)
    tol = tolerance({"layer": layer, "descriptor": descriptor}, inputs, expected)
    with np.errstate(over="ignore", invalid="ignore"):
        as_float32 = expected.astype(F).astype(np.float64)
    finite = np.isfinite(as_float32)
    got = out.astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad = finite & ~(np.abs(got - expected) <= tol)
    bad |= ~finite & ~np.isnan(expected) & (got != as_float32)
    assert not bad.any(), (f"{layer} {descriptor}: {int(bad.sum())} of {bad.size} wrong; first at "
                           f"{np.argwhere(bad)[0].tolist()}: got {got[bad][0]!r}, expected "
                           f"{expected[bad][0]!r}")
    return out


def broadcast_pair(rng, rank_a, rank_b):
    """Shapes of ranks rank_a and rank_b that broadcast, with 1s on either side."""
    out = rng.integers(2, 4, max(rank_a, rank_b))
    a, b = list(out[-rank_a:]), list(out[-rank_b:])
    for shape in (a, b):
        for k in range(len(shape)):
            if rng.random() < 0.3:
                shape[k] = 1
    return tuple(map(int, a)), tuple(map(int, b))


# -- the binary layers ---------------------------------------------------------------------------

@pytest.mark.parametrize("layer", BINARY)
@pytest.mark.parametrize("rank_a, rank_b", list(itertools.product(range(1, 7), repeat=2)))
def test_binary_layers_broadcast_every_rank_pair(backend, layer, rank_a, rank_b):
    rng = rng_for(layer, rank_a, rank_b)
    sa, sb = broadcast_pair(rng, rank_a, rank_b)
    a = rng.uniform(0.5, 2.0, sa).astype(F)        # Power and Division: positive, away from 0
    b = rng.uniform(-2.0, 2.0, sb).astype(F)
    if layer == "Division":
        b = np.where(np.abs(b) < 0.25, 1.0, b).astype(F)
    check(backend, layer, [a, b])
    check(backend, layer, [b if layer != "Power" else a, a])


def test_binary_layers_on_large_threaded_outputs(backend):
    rng = rng_for("large")
    a, b = rng.uniform(0.5, 2, (3, 400, 1000)).astype(F), rng.uniform(-2, 2, (400, 1)).astype(F)
    for layer in BINARY:
        check(backend, layer, [a, b])
    check(backend, "Subtraction", [a, a[0]])


def test_power_of_negative_bases_and_special_exponents(backend):
    base = np.array([-2.0, -2.0, -0.5, 0.0, 0.0, 3.0, -3.0, 4.0], F)
    exponent = np.array([2.0, 3.0, -1.0, 0.0, 2.0, 0.5, 0.5, -0.5], F)
    out = check(backend, "Power", [base, exponent])
    assert np.isnan(out[6])                        # a negative base to a fractional power


def test_maximum_and_minimum_propagate_nan(backend):
    a = np.array([np.nan, 1.0, 2.0, -np.inf], F)
    b = np.array([1.0, np.nan, 1.0, 0.0], F)
    for layer, expected in (("Maximum", [np.nan, np.nan, 2.0, 0.0]),
                            ("Minimum", [np.nan, np.nan, 1.0, -np.inf])):
        [out] = backend.execute(layer, [a, b])
        np.testing.assert_array_equal(out, np.array(expected, F))


@pytest.mark.parametrize("x_shape, slope_shape", [
    ((7,), (1,)), ((7,), (7,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)), ((2, 5, 5, 3), (5, 1, 3)),
    ((1, 2, 3, 4, 5, 6), (1, 6)), ((2, 3, 4), (2, 3, 4))])
def test_prelu_broadcasts_its_slope(backend, x_shape, slope_shape):
    rng = rng_for(x_shape, slope_shape)
    check(backend, "Prelu", [rng.standard_normal(x_shape).astype(F),
                             rng.standard_normal(slope_shape).astype(F)])


# -- element-wise functions ----------------------------------------------------------------------

EDGES = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, 20.0,
                  -20.0, 88.0, -88.0, 100.0, -100.0, 8388607.5, -8388607.5, 8388608.0, 1e30, -1e30],
                 F)


def unary_inputs(function, rng):
    x = np.concatenate([EDGES, (rng.standard_normal(1000) * 4).astype(F),
                        rng.integers(-10, 10, 40).astype(F) + 0.5])
    if function in ("log", "sqrt", "rsqrt"):
        x = np.abs(x)
    if function == "acosh":
        x = 1 + np.abs(x)
    if function in ("asin", "acos", "atanh"):
        x = np.tanh(x) * np.float32(0.999)
    if function in ("tan",):
        x = x[np.abs(x) < 1e4]                    # float32 arguments of tan near its poles
    if function in ("sin", "cos"):
        x = x[np.abs(x) < 1e6]
    return x.astype(F)


@pytest.mark.parametrize("function", list(UNARY_FUNCTIONS))
def test_elementwise_unary(backend, function):
    x = unary_inputs(function, rng_for(function))
    check(backend, "ElementwiseUnary", [x.reshape(-1)], {"function": function})
    check(backend, "ElementwiseUnary", [x[:24].reshape(2, 3, 4)], {"function": function})


def test_round_is_half_to_even_and_floor_and_ceil_are_exact(backend):
    x = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 4.4999998, 0.49999997, -7.5, 8388607.5,
                  16777215.0, 1e20, -1e20, np.inf, -np.inf], F)
    for function, op in (("round", np.round), ("floor", np.floor), ("ceil", np.ceil)):
        [out] = backend.execute("ElementwiseUnary", [x], {"function": function})
        np.testing.assert_array_equal(out, op(x))
    [out] = backend.execute("ElementwiseUnary", [np.array([np.nan, -0.0, 0.0, -3.0], F)],
                            {"function": "sign"})
    assert np.isnan(out[0]) and list(out[1:]) == [0.0, 0.0, -1.0]


def test_log_and_exp_at_their_limits(backend):
    x = np.array([0.0, -1.0, np.inf, 1e-45, 1e-38, 3.4e38], F)
    [out] = backend.execute("ElementwiseUnary", [x], {"function": "log"})
    assert out[0] == -np.inf and np.isnan(out[1]) and out[2] == np.inf
    np.testing.assert_allclose(out[3:], np.log(x[3:].astype(np.float64)), rtol=1e-6)
    [out] = backend.execute("ElementwiseUnary", [np.array([-200.0, 0.0, 200.0], F)],
                            {"function": "exp"})
    assert list(out) == [0.0, 1.0, np.inf]


NEW_ACTIVATIONS = [f for f, code in ACTIVATION_FUNCTIONS.items() if code >= 5]


@pytest.mark.parametrize("descriptor", [{"function": f} for f in NEW_ACTIVATIONS] + [
    {"function": "gelu", "approximate": "tanh"}, {"function": "elu", "a": 0.3},
    {"function": "selu", "a": 1.2, "b": 0.9}, {"function": "hard_sigmoid", "a": 0.4, "b": 0.3},
    {"function": "swish", "a": -1.5}, {"function": "clip", "a": -1.0, "b": 2.0},
    {"function": "clip", "a": 0.0}, {"function": "celu", "a": 0.5}, {"function": "celu", "a": -2.0},
    {"function": "thresholded_relu", "a": -0.5}], ids=str)
def test_activation_functions_of_1_3(backend, descriptor):
    rng = rng_for(descriptor)
    x = np.concatenate([EDGES[np.abs(EDGES) < 1e29], (rng.standard_normal(999) * 5).astype(F)])
    check(backend, "Activation", [x], descriptor)
    check(backend, "Activation", [x[:30].reshape(2, 3, 5)], descriptor)


@pytest.mark.parametrize("function", ["gelu", "mish", "relu", "clip"])
def test_activations_on_large_threaded_tensors(backend, function):
    x = (rng_for(function).standard_normal((2, 300, 301)) * 6).astype(F)   # 2 threads' worth
    check(backend, "Activation", [x], {"function": function})


# -- tensors -------------------------------------------------------------------------------------

def shape_of_rank(rng, rank, low=1, high=5):
    return tuple(int(v) for v in rng.integers(low, high, rank))


@pytest.mark.parametrize("rank", range(1, 7))
def test_concatenation_along_every_axis(backend, rank):
    rng = rng_for("concat", rank)
    shape = shape_of_rank(rng, rank)
    for axis in range(-rank, rank):
        parts = []
        for _ in range(int(rng.integers(1, 5))):
            s = list(shape)
            s[axis] = int(rng.integers(1, 4))
            parts.append(rng.standard_normal(s).astype(F))
        check(backend, "Concatenation", parts, {"axis": axis})


def test_concatenation_of_hundreds_of_inputs(backend):
    rng = rng_for("many")
    parts = [rng.standard_normal((2, int(rng.integers(1, 3)), 5)).astype(F) for _ in range(700)]
    check(backend, "Concatenation", parts, {"axis": 1})
    check(backend, "Concatenation", [p[:, :1] for p in parts[:300]], {"axis": 0})


def test_concatenation_of_large_tensors_split_among_threads(backend):
    rng = rng_for("concat large")
    a, b = rng.standard_normal((1, 56, 56, 256)).astype(F), rng.standard_normal((1, 56, 56, 100)).astype(F)
    check(backend, "Concatenation", [a, b], {"axis": 3})
    check(backend, "Concatenation", [a, a], {"axis": 0})


@pytest.mark.parametrize("rank", range(1, 7))
def test_slice_with_clamped_bounds_and_negative_steps(backend, rank):
    rng = rng_for("slice", rank)
    x = rng.standard_normal(shape_of_rank(rng, rank, 1, 6)).astype(F)
    for _ in range(25):
        begin, end, step = [], [], []
        for n in x.shape:                             # each axis non-empty, bounds often clamped
            while True:
                b, e = (int(v) for v in rng.choice([-9, -3, -1, 0, 1, 2, 8, 2**62, -2**62], 2))
                s = int(rng.choice([-3, -2, -1, 1, 2, 3, -2**40, 2**40]))
                if slice_bounds(n, b, e, s)[1] > 0:
                    break
            begin.append(b), end.append(e), step.append(s)
        check(backend, "Slice", [x], {"begin": begin, "end": end, "step": step})


def test_slice_reversing_the_last_axis_and_striding(backend):
    x = rng_for("reverse").standard_normal((3, 50, 70)).astype(F)
    check(backend, "Slice", [x], {"begin": [0, 0, -1], "end": [3, 50, -100], "step": [1, 1, -1]})
    check(backend, "Slice", [x], {"begin": [2, 49, 3], "end": [-9, 0, 70], "step": [-1, -3, 4]})


@pytest.mark.parametrize("rank", range(1, 5))
def test_transpose_every_permutation(backend, rank):
    rng = rng_for("transpose", rank)
    x = rng.standard_normal(shape_of_rank(rng, rank, 1, 6)).astype(F)
    for perm in itertools.permutations(range(rank)):
        check(backend, "Transpose", [x], {"perm": list(perm)})
    check(backend, "Transpose", [x])                 # default: the axes reversed


@pytest.mark.parametrize("rank", [5, 6])
def test_transpose_ranks_5_and_6(backend, rank):
    rng = rng_for("transpose", rank)
    x = rng.standard_normal(shape_of_rank(rng, rank, 2, 6)).astype(F)
    for _ in range(40):
        check(backend, "Transpose", [x], {"perm": [int(v) for v in rng.permutation(rank)]})


@pytest.mark.parametrize("shape, perm", [
    ((1, 56, 56, 256), (0, 3, 1, 2)), ((1, 256, 56, 56), (0, 2, 3, 1)), ((2, 37, 33, 5), (0, 3, 1, 2)),
    ((3, 35, 129), (2, 1, 0)), ((67, 131), (1, 0)), ((2, 3, 33, 35, 5), (0, 4, 2, 3, 1)),
    ((2, 5, 3, 7, 4, 3), (5, 4, 3, 2, 1, 0))])
def test_transpose_through_tiles_with_ragged_edges(backend, shape, perm):
    x = rng_for(shape, perm).standard_normal(shape).astype(F)
    check(backend, "Transpose", [x], {"perm": list(perm)})


# NCHW to NHWC of an image's few channels: runs of pixels interleaved (three channels 16 pixels
# at a time), chunks of 4096 pixels, a ragged tail, batches
@pytest.mark.parametrize("shape", [(1, 3, 224, 224), (2, 3, 9, 7), (1, 3, 1, 5), (1, 1, 30, 30),
                                   (3, 2, 17, 3), (1, 4, 70, 70), (1, 3, 65, 65)])
def test_transpose_of_an_image_to_channels_last(backend, shape):
    x = rng_for(shape).standard_normal(shape).astype(F)
    [y] = backend.execute("Transpose", [x], {"perm": [0, 2, 3, 1]})
    assert np.array_equal(y, x.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("rank", range(1, 7))
def test_pad_with_negative_pads(backend, mode, rank):
    rng = rng_for("pad", mode, rank)
    x = rng.standard_normal(shape_of_rank(rng, rank, 2, 6)).astype(F)
    tried = 0
    while tried < 12:
        pads = [int(v) for v in rng.integers(-2, 4, 2 * rank)]
        try:
            loader.layers.prepare("Pad", [x.shape], {"pads": pads, "mode": mode})
        except loader.InvalidLayerError:
            continue
        try:
            check(backend, "Pad", [x], {"pads": pads, "mode": mode, "value": -1.5})
        except loader.LayerNotSupportedError as error:   # pads that crop away a whole side
            assert mode != "constant" and "nothing to" in str(error)
        tried += 1


def test_pad_of_an_image_and_of_a_single_element(backend):
    x = rng_for("pad image").standard_normal((1, 20, 30, 16)).astype(F)
    for mode in ("constant", "reflect", "edge"):
        check(backend, "Pad", [x], {"pads": [0, 3, 2, 0, 0, 1, 4, 0], "mode": mode})
        check(backend, "Pad", [x], {"pads": [0, -3, 2, 0, 0, 1, -4, 0], "mode": mode})
    one = np.array([[2.0]], F)
    check(backend, "Pad", [one], {"pads": [0, 3, 0, 2], "mode": "edge"})
    # more removed than the axis holds, some added back: ONNX Runtime's [value]
    check(backend, "Pad", [np.arange(1, 4, dtype=F)], {"pads": [-4, 2], "value": 7.0})
    check(backend, "Pad", [x], {"pads": [0, 3, -40, 0, 0, -5, 12, 0], "value": 7.0})


# -- normalization and reductions ----------------------------------------------------------------

@pytest.mark.parametrize("rank", range(1, 7))
@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_every_axis(backend, rank, log):
    rng = rng_for("softmax", rank, log)
    x = (rng.standard_normal(shape_of_rank(rng, rank, 1, 6)) * 3).astype(F)
    for axis in range(-rank, rank):
        check(backend, "Softmax", [x], {"axis": axis, "log": log, "beta": 0.7})


def test_softmax_down_wide_columns_and_log_of_large_values(backend):
    x = (rng_for("wide").standard_normal((3, 40, 700)) * 30).astype(F)
    for axis, log in ((1, False), (1, True), (0, True), (2, True)):
        check(backend, "Softmax", [x], {"axis": axis, "log": log})


@pytest.mark.parametrize("function", list(REDUCE_FUNCTIONS))
@pytest.mark.parametrize("rank", [1, 2, 3, 4])
def test_reduce_every_axis_set(backend, function, rank):
    rng = rng_for("reduce", function, rank)
    x = rng.uniform(-2, 2, shape_of_rank(rng, rank, 1, 6)).astype(F)
    for keep in (True, False):
        for mask in range(1, 2 ** rank):
            axes = [k - rank if (mask >> k) % 3 == 1 else k for k in range(rank) if mask >> k & 1]
            check(backend, "Reduce", [x], {"function": function, "axes": axes, "keep_dims": keep})
        check(backend, "Reduce", [x], {"function": function, "keep_dims": keep})


@pytest.mark.parametrize("function", list(REDUCE_FUNCTIONS))
def test_reduce_ranks_5_and_6_and_long_runs(backend, function):
    rng = rng_for("reduce long", function)
    x = rng.uniform(-1.5, 1.5, (2, 3, 1, 4, 2, 3)).astype(F)
    for axes in ([0, 2, 4], [1, 3, 5], [5], [0], [-1, -2], [1, 2, 3, 4]):
        check(backend, "Reduce", [x], {"function": function, "axes": axes, "keep_dims": False})
    check(backend, "Reduce", [x[0]], {"function": function, "axes": [0, 3]})
    if function != "prod":
        long = rng.uniform(-1, 1, (3, 5000)).astype(F)
        check(backend, "Reduce", [long], {"function": function, "axes": [1]})
        check(backend, "Reduce", [long], {"function": function, "axes": [0]})
    # a global pooling of NHWC: the kept channels are the contiguous run, 16 at a time and a tail
    image = rng.uniform(-1, 1, (2, 9, 7, 37)).astype(F)
    check(backend, "Reduce", [image], {"function": function, "axes": [1, 2], "keep_dims": True})
    # one image: its channels summed as columns (blocks of 16 channels and a tail)
    for shape in ((1, 9, 7, 37), (1, 5, 6, 150), (1, 3, 1, 7)):
        image = rng.uniform(-1, 1, shape).astype(F)
        check(backend, "Reduce", [image], {"function": function, "axes": [1, 2], "keep_dims": True})


def test_reduce_global_pooling_sums_the_same_way_on_any_threads(backend):
    """The mean of each channel of a channels-last image is its sum in double, as the sums of
    four runs of pixels (the rows of each quarter of the image, in order) added pairwise,
    divided by the count: the same bits however many threads took which runs and channels."""
    for pixels, channels in ((96 * 96, 40), (96 * 96 - 3, 150)):
        rng = rng_for("global pooling", pixels)
        image = rng.uniform(-1, 1, (1, pixels, 1, channels)).astype(F)
        # channels whose double sums round where the order of the additions shows: every
        # other pixel of the first half +2**24, of the second half -2**24, small values between
        big = image[0, :, 0, :20]
        big[:] = rng.uniform(0, 1e-6, (pixels, 20))
        big[0:pixels // 2:2] = 2.0 ** 24
        big[pixels // 2::2] = -(2.0 ** 24)
        [out] = backend.execute("Reduce", [image], {"function": "mean", "axes": [1, 2], "keep_dims": True})
        rows = image.reshape(-1, channels).astype(np.float64)
        part = np.zeros((4, channels))
        for q in range(4):
            for row in rows[pixels * q // 4:pixels * (q + 1) // 4]:
                part[q] += row
        sums = (part[0] + part[1]) + (part[2] + part[3])
        np.testing.assert_array_equal(out.reshape(channels), (sums / pixels).astype(F))


def test_reduce_max_and_log_sum_exp_of_infinities(backend):
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0]], F)
    [out] = backend.execute("Reduce", [x], {"function": "log_sum_exp", "axes": [1]})
    assert out[0, 0] == -np.inf and out[1, 0] == np.inf and np.isnan(out[2, 0])
    [out] = backend.execute("Reduce", [x], {"function": "max", "axes": [1]})
    assert out[0, 0] == -np.inf and out[1, 0] == np.inf and np.isnan(out[2, 0])


@pytest.mark.parametrize("shape", [(5,), (2, 7), (2, 3, 4, 9), (1, 2, 1, 3, 1, 17), (2, 1000)])
def test_batch_normalization_over_the_last_axis(backend, shape):
    rng = rng_for("bn", shape)
    c = shape[-1]
    inputs = [rng.standard_normal(shape).astype(F), rng.standard_normal(c).astype(F),
              rng.uniform(0.01, 3, c).astype(F), rng.standard_normal(c).astype(F),
              rng.standard_normal(c).astype(F)]
    check(backend, "BatchNormalization", inputs, {"epsilon": 1e-3})


@pytest.mark.parametrize("rank", range(1, 7))
def test_layer_normalization_from_every_axis(backend, rank):
    rng = rng_for("ln", rank)
    shape = shape_of_rank(rng, rank, 1, 5)
    x = (rng.standard_normal(shape) * 3 + 10).astype(F)     # far from 0: the variance's precision
    for axis in range(-rank, rank):
        normalized = shape[axis % rank:]
        for scale_shape in {normalized, normalized[-1:],
                            tuple(1 if k % 2 else v for k, v in enumerate(normalized))}:
            scale = rng.standard_normal(scale_shape).astype(F)
            check(backend, "LayerNormalization", [x, scale], {"axis": axis})
            bias = rng.standard_normal(normalized[-1:]).astype(F)
            check(backend, "LayerNormalization", [x, scale, bias], {"axis": axis, "epsilon": 0.1})


@pytest.mark.parametrize("shape_a, shape_b", [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((5, 2, 3), (3, 4)), ((2, 3), (6, 3, 4)),
    ((2, 1, 2, 3), (3, 3, 4)), ((4, 1, 5, 6), (1, 3, 6, 2)), ((1, 7), (7, 1)), ((7,), (2, 3, 7, 2)),
    ((2, 3, 4, 5, 6, 7), (7, 2)), ((2, 1, 1, 1, 6, 7), (1, 2, 2, 2, 7, 3)), ((64, 33), (33, 70)),
    ((2, 40, 33), (2, 33, 70)), ((3, 1, 9, 130), (1, 2, 130, 20))])
def test_mat_mul_as_numpy(backend, shape_a, shape_b):
    rng = rng_for("matmul", shape_a, shape_b)
    check(backend, "MatMul", [rng.standard_normal(shape_a).astype(F),
                              rng.standard_normal(shape_b).astype(F)])
