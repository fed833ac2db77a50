"""Malformed layer calls get an exception that names the problem; nothing crashes."""
import os

import numpy as np
import pytest

import loader
from loader import layers

F = np.float32


@pytest.fixture(scope="module")
def backend():
    with loader.Runtime() as runtime:
        return runtime.create_backend("CpuRef")


def x4(*shape):
    return np.ones(shape, dtype=F)


@pytest.mark.parametrize("layer, inputs, descriptor, error, words", [
    ("Conv2d", [x4(1, 3, 3, 1)], None, loader.UnknownLayerError, ["Conv2d", "Convolution2d"]),
    (None, [x4(1)], None, loader.UnknownLayerError, ["None"]),
    ("Activation", [x4(3)], {"function": "gelus"}, loader.InvalidLayerError, ["'gelus'", "relu"]),
    ("Activation", [x4(3)], None, loader.InvalidLayerError, ["'function'"]),
    ("Activation", [x4(3)], {"function": "relu", "alpha": 1}, loader.InvalidLayerError,
     ["'alpha'", "allowed"]),
    ("Activation", [x4(3)], {"function": "relu", "a": "big"}, TypeError, ["'a'"]),
    ("Activation", [x4(3)], {"function": "relu", "a": float("nan")}, loader.InvalidLayerError,
     ["finite"]),
    ("Activation", [x4(3), x4(3)], {"function": "relu"}, loader.InvalidLayerError, ["takes"]),
    ("Activation", [], {"function": "relu"}, loader.InvalidLayerError, ["takes"]),
    ("Activation", [x4(3)], [("function", "relu")], TypeError, ["dict"]),
    ("Addition", [x4(2, 3), x4(4)], None, loader.InvalidLayerError, ["broadcast", "[2, 3]", "[4]"]),
    ("Addition", [x4(2)], None, loader.InvalidLayerError, ["takes"]),
    ("Addition", [x4(2), x4(2)], {"axis": 1}, loader.InvalidLayerError, ["'axis'"]),
    ("FullyConnected", [x4(2, 3), x4(4, 5)], None, loader.InvalidLayerError, ["K = 5", "K = 3"]),
    ("FullyConnected", [x4(2, 3, 1), x4(4, 3)], None, loader.InvalidLayerError, ["2 dimensions"]),
    ("FullyConnected", [x4(2, 3), x4(4, 3), x4(5)], None, loader.InvalidLayerError, ["bias", "[4]"]),
    ("FullyConnected", [x4(2, 3), x4(4, 3)], {"transpose_weights": 1}, TypeError,
     ["transpose_weights"]),
    ("Convolution2d", [x4(1, 5, 5, 3), x4(2, 3, 3, 4)], None, loader.InvalidLayerError,
     ["C = 4", "C = 3"]),
    ("Convolution2d", [x4(5, 5, 3), x4(2, 3, 3, 3)], None, loader.InvalidLayerError,
     ["4 dimensions"]),
    ("Convolution2d", [x4(1, 2, 2, 1), x4(1, 3, 3, 1)], None, loader.InvalidLayerError,
     ["kernel spans 3", "padded input (2)"]),
    ("Convolution2d", [x4(1, 5, 5, 1), x4(1, 3, 3, 1)], {"stride": 0}, loader.InvalidLayerError,
     ["'stride'"]),
    ("Convolution2d", [x4(1, 5, 5, 1), x4(1, 3, 3, 1)], {"stride": [1, 1, 1]}, TypeError,
     ["'stride'"]),
    ("Convolution2d", [x4(1, 5, 5, 1), x4(1, 3, 3, 1)], {"padding": [1, 1, 1]}, TypeError,
     ["'padding'"]),
    ("Convolution2d", [x4(1, 5, 5, 1), x4(1, 3, 3, 1)], {"padding": -1}, loader.InvalidLayerError,
     ["'padding'"]),
    ("Convolution2d", [x4(1, 5, 5, 1), x4(1, 3, 3, 1)], {"dilation": 2.0}, TypeError,
     ["'dilation'"]),
    ("Convolution2d", [x4(1, 5, 5, 1), x4(1, 3, 3, 1), x4(2)], None, loader.InvalidLayerError,
     ["bias", "[1]"]),
    ("DepthwiseConvolution2d", [x4(1, 5, 5, 2), x4(1, 3, 3, 3)], None, loader.InvalidLayerError,
     ["C*m"]),
    ("DepthwiseConvolution2d", [x4(1, 5, 5, 2), x4(2, 3, 3, 2)], None, loader.InvalidLayerError,
     ["[1, kH, kW, C*m]"]),
    ("Pooling2d", [x4(1, 4, 4, 1)], {"pool": "max"}, loader.InvalidLayerError, ["'kernel'"]),
    ("Pooling2d", [x4(1, 4, 4, 1)], {"pool": "min", "kernel": 2}, loader.InvalidLayerError,
     ["'min'"]),
    ("Pooling2d", [x4(1, 4, 4, 1)], {"pool": "max", "kernel": 2, "padding": 2},
     loader.InvalidLayerError, ["smaller than the kernel"]),
    ("Pooling2d", [x4(1, 4, 4, 1)], {"pool": "max", "kernel": 5}, loader.InvalidLayerError,
     ["kernel spans 5"]),
    ("Softmax", [x4(3)], {"beta": float("inf")}, loader.InvalidLayerError, ["finite"]),
    ("Softmax", [x4(3)], {"axis": 1}, loader.InvalidLayerError, ["'axis'", "rank 1"]),
    ("Reshape", [x4(2, 3)], None, loader.InvalidLayerError, ["'shape'"]),
    ("Reshape", [x4(2, 3)], {"shape": [4, 2]}, loader.InvalidLayerError, ["6 elements", "8 elements"]),
    ("Reshape", [x4(2, 3)], {"shape": [-1, -1]}, loader.InvalidLayerError, ["at most one -1"]),
    ("Reshape", [x4(2, 3)], {"shape": [4, -1]}, loader.InvalidLayerError, ["cannot reshape"]),
    ("Reshape", [x4(2, 3)], {"shape": [0, 6]}, loader.InvalidLayerError, ["positive"]),
    ("Reshape", [x4(2, 3)], {"shape": 6}, TypeError, ["'shape'"]),
    ("Reshape", [x4(1)], {"shape": [1] * 9}, loader.InvalidLayerError, ["at most 8"]),
    ("Reshape", [x4(4)], {"shape": [2**62, 2**62]}, loader.InvalidLayerError,
     ["(4 elements)", "(21267647932558653966460912964485513216 elements)"]),
    ("Reshape", [x4(4)], {"shape": [2**62, 2**62, -1]}, loader.InvalidLayerError,
     ["cannot reshape"]),
    ("Reshape", [x4(4)], {"shape": [2**64, -1]}, loader.InvalidLayerError, ["cannot reshape"]),
])
def test_malformed_calls_name_the_problem(backend, layer, inputs, descriptor, error, words):
    with pytest.raises(error) as raised:
        backend.execute(layer, inputs, descriptor)
    assert isinstance(raised.value, (loader.BackendError, TypeError, ValueError))
    for word in words:
        assert word in str(raised.value), str(raised.value)


# -- input data: one rule for execute and the support queries ---------------------------------

def _calls(backend, inputs):
    """Every entry point that takes a layer's inputs, each as (name, call)."""
    descriptor = {"function": "relu"}
    workload = backend.create_workload_factory().create_workload("Activation", [(3,)], descriptor)
    return [
        ("execute", lambda: backend.execute("Activation", inputs, descriptor)),
        ("is_layer_supported",
         lambda: backend.is_layer_supported("Activation", inputs, descriptor)),
        ("create_workload", lambda: backend.create_workload_factory().create_workload(
            "Activation", inputs, descriptor)),
        ("Workload.execute", lambda: workload.execute(inputs)),
    ]


@pytest.mark.parametrize("value, words", [
    (np.ones(3, dtype=np.float64), ["dtype float64", "float32", ".astype(numpy.float32)"]),
    (np.ones(3, dtype=np.int32), ["int32"]),
    (np.ones(3, dtype=np.float16), ["float16"]),
    (np.ones(3, dtype=np.complex64), ["complex64"]),
    (np.array(["a", "b", "c"]), ["<U1"]),
    (np.float64(1.0), ["NumPy scalar (float64)"]),
    ([1.0, 2.0, 3.0], ["list", "numpy.asarray(value, dtype=numpy.float32)"]),
    ([1, "x"], ["list"]),
    (1.5, ["float"]),
    (None, ["NoneType"]),
    ("abc", ["str"]),
    ({"a": 1}, ["dict"]),
])
def test_wrong_input_data_is_refused_alike_by_every_entry_point(backend, value, words):
    for name, call in _calls(backend, [value]):
        with pytest.raises(TypeError) as raised:
            call()
        message = str(raised.value)
        assert message.startswith("Activation: input 0 "), (name, message)
        for word in words:
            assert word in message, (name, message)


@pytest.mark.parametrize("value", [
    np.array([-1, 0, 2], dtype=F),
    np.array([-1, 0, 2], dtype=">f4"),                       # the other byte order
    np.array([-1, 9, 0, 9, 2], dtype=F)[::2],                # strided
])
def test_float32_data_is_accepted_alike_by_every_entry_point(backend, value):
    for name, call in _calls(backend, [value]):
        result = call()
        if name == "is_layer_supported":
            assert result == (True, ""), name
        elif name.endswith("execute"):
            np.testing.assert_array_equal(result[0], [0, 0, 2])


def test_a_float32_scalar_is_a_zero_dimensional_array(backend):
    assert backend.is_layer_supported("Activation", [F(-2)], {"function": "relu"})
    [y] = backend.execute("Activation", [F(-2)], {"function": "relu"})
    assert y.shape == () and y == 0


# -- sizes and descriptor values are bounded before anything is allocated ---------------------

def test_an_output_beyond_2_to_the_40_elements_is_refused_naming_the_descriptor(backend):
    x, w = x4(1, 56, 56, 64), x4(64, 3, 3, 64)
    calls = [lambda: backend.execute("Convolution2d", [x, w], {"padding": 100000}),
             lambda: backend.is_layer_supported("Convolution2d", [x, w], {"padding": 100000}),
             lambda: backend.create_workload_factory().create_workload(
                 "Convolution2d", [x.shape, w.shape], {"padding": 100000})]
    for call in calls:
        with pytest.raises(loader.InvalidLayerError) as raised:
            call()
        for word in ["[1, 200054, 200054, 64]", "more than 2^40", "'padding' 100000"]:
            assert word in str(raised.value)


def test_pooling_padding_cannot_blow_up_the_output_either(backend):
    descriptor = {"pool": "max", "kernel": [2**31, 1], "padding": [2**31 - 1, 2**31 - 1, 0, 0]}
    with pytest.raises(loader.InvalidLayerError, match=r"more than 2\^40.*'kernel'"):
        backend.is_layer_supported("Pooling2d", [(1, 4, 2**20, 1)], descriptor)


def test_an_input_shape_beyond_2_to_the_40_elements_is_refused(backend):
    with pytest.raises(loader.InvalidLayerError, match=r"input 1 has shape \[1048576, 1048577\]"):
        backend.is_layer_supported("Addition", [(1,), (2**20, 2**20 + 1)])
    with pytest.raises(loader.InvalidLayerError, match="at least 1"):
        backend.is_layer_supported("Addition", [(1,), (-(2**20), -(2**20))])


def _memory():
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_an_output_larger_than_memory_is_refused_before_allocation(backend):
    padding = int((_memory() / 4) ** 0.5 / 2) + 1000   # output [1, 54 + 2p, 54 + 2p, 1]
    if (54 + 2 * padding) ** 2 > layers.MAX_ELEMENTS:
        pytest.skip("this machine has more memory than the largest output the runtime accepts")
    x, w = x4(1, 56, 56, 1), x4(1, 3, 3, 1)
    assert backend.is_layer_supported("Convolution2d", [x, w], {"padding": padding})  # a query
    with pytest.raises(loader.BackendOutOfMemoryError) as raised:
        backend.execute("Convolution2d", [x, w], {"padding": padding})
    assert isinstance(raised.value, MemoryError)
    side = 54 + 2 * padding
    for word in [f"[1, {side}, {side}, 1]", "more than this machine's memory",
                 f"pad_top {padding}"]:
        assert word in str(raised.value), str(raised.value)
    workload = backend.create_workload_factory().create_workload(
        "Convolution2d", [x, w], {"padding": padding})
    with pytest.raises(loader.BackendOutOfMemoryError, match="more than this machine's memory"):
        workload.execute([x, w])


@pytest.mark.parametrize("descriptor, words", [
    ({"padding": 2**32}, ["'padding' is 4294967296", "from 0 to 4294967295"]),
    ({"stride": [1, 2**40]}, ["'stride' is 1099511627776", "from 1 to 4294967295"]),
    ({"dilation": 0}, ["'dilation' is 0", "from 1 to"]),
])
def test_integer_descriptor_values_must_fit_the_c_descriptor(backend, descriptor, words):
    with pytest.raises(loader.InvalidLayerError) as raised:
        backend.is_layer_supported("Convolution2d", [(1, 5, 5, 1), (1, 3, 3, 1)], descriptor)
    for word in words:
        assert word in str(raised.value)


@pytest.mark.parametrize("layer, descriptor, key", [
    ("Softmax", {"beta": 1e39}, "'beta'"),
    ("Activation", {"function": "bounded_relu", "a": -1e300}, "'a'"),
    ("Activation", {"function": "leaky_relu", "b": 4e38}, "'b'"),
])
def test_real_descriptor_values_must_fit_a_float32(backend, layer, descriptor, key):
    with pytest.raises(loader.InvalidLayerError, match=f"{key} is .*beyond float32's range"):
        backend.is_layer_supported(layer, [(3,)], descriptor)


# -- what the activation functions read ----------------------------------------------------------

@pytest.mark.parametrize("descriptor", [
    None, {"function": "gelus"}, {"function": "relu", "alpha": 1}])
def test_activation_errors_say_what_each_function_computes_and_reads(backend, descriptor):
    with pytest.raises(loader.InvalidLayerError) as raised:
        backend.execute("Activation", [x4(3)], descriptor)
    message = str(raised.value)
    for function, text in layers.ACTIVATION_PARAMETERS.items():
        assert f"{function} = {text}" in message
    assert "min(a, max(b, x)), a the upper bound and b the lower, both 0 unless given" in message


def test_every_activation_function_is_documented():
    assert set(layers.ACTIVATION_PARAMETERS) == set(layers.ACTIVATION_FUNCTIONS)


def test_inputs_must_be_a_list(backend):
    with pytest.raises(TypeError, match="list"):
        backend.execute("Activation", np.ones(3, dtype=F), {"function": "relu"})


def test_errors_derive_from_backend_error_and_a_builtin():
    assert issubclass(loader.InvalidLayerError, loader.BackendError)
    assert issubclass(loader.InvalidLayerError, ValueError)
    assert issubclass(loader.UnknownLayerError, loader.InvalidLayerError)
    assert issubclass(loader.LayerNotSupportedError, loader.BackendError)
    assert issubclass(loader.FeatureNotAvailableError, NotImplementedError)
    assert issubclass(loader.BackendOutOfMemoryError, MemoryError)


# -- the backend's own validation, behind the runtime's -------------------------------------

def prepared(name, code, input_shapes, output_shape, fields=None):
    return layers.PreparedLayer(name, code, tuple(map(tuple, input_shapes)), tuple(output_shape),
                                fields or {})


CONV = {"stride_y": 1, "stride_x": 1, "pad_top": 0, "pad_bottom": 0, "pad_left": 0,
        "pad_right": 0, "dilation_y": 1, "dilation_x": 1, "bias_enabled": 0}


@pytest.mark.parametrize("layer, words", [
    (prepared("Activation", 0, [(3,)], (4,), {"function": 0, "a": 0.0, "b": 0.0}), ["output shape"]),
    (prepared("Activation", 0, [(3,)], (3,), {"function": 18, "a": 0.0, "b": 0.0}), ["function 18"]),
    (prepared("Addition", 1, [(2, 3), (4,)], (2, 3)), ["broadcast"]),
    (prepared("Convolution2d", 4, [(1, 5, 5, 1), (1, 3, 3, 1)], (1, 5, 5, 1), CONV),
     ["output shape is [1, 5, 5, 1]", "[1, 3, 3, 1]"]),
    (prepared("Convolution2d", 4, [(1, 5, 5, 1), (1, 3, 3, 1)], (1, 3, 3, 1), dict(CONV, stride_y=0)),
     ["stride"]),
    (prepared("Reshape", 8, [(2, 3)], (7,)), ["6", "7"]),
    (prepared("Softmax", 7, [(2, 3)], (2, 3), {"beta": float("nan")}), ["finite"]),
    (prepared("Unknown", 99, [(1,)], (1,)), ["layer type 99"]),
])
def test_the_reference_backend_checks_descriptions_itself(backend, layer, words):
    support = backend.query_layer_support(layer)
    assert not support and support.supported is False
    for word in words:
        assert word in support.reason, support.reason
    factory = backend.create_workload_factory()
    with pytest.raises(loader.BackendStatusError) as raised:
        factory.create_workload_prepared(layer)
    assert support.reason in str(raised.value)


def test_workload_rejects_inputs_of_other_shapes(backend):
    workload = backend.create_workload_factory().create_workload("Activation", [(2, 3)],
                                                                 {"function": "relu"})
    with pytest.raises(loader.InvalidLayerError, match=r"\[2, 3\]"):
        workload.execute([x4(3, 2)])
    with pytest.raises(loader.InvalidLayerError, match="writable C-contiguous float32"):
        workload.execute([x4(2, 3)], [np.empty((2, 3), dtype=np.float64)])
    out = np.empty((2, 3), dtype=F)
    assert workload.execute([-x4(2, 3)], [out])[0] is out
    np.testing.assert_array_equal(out, 0)


@pytest.mark.parametrize("layer, words", [
    (prepared("Activation", 0, [(1,) * 9], (1,) * 9, {"function": 0, "a": 0.0, "b": 0.0}),
     ["at most 8 dimensions"]),
    (prepared("Addition", 1, [(2,)] * 70000, (2,)), ["70000 inputs are too many"]),
    (prepared("Activation", 0, [(2**63,)], (2**63,), {"function": 0, "a": 0.0, "b": 0.0}),
     ["does not fit"]),
    (prepared("Activation", 0, [(3,)], (3,), {"function": -1, "a": 0.0, "b": 0.0}),
     ["does not fit"]),
    (prepared("Activation", -3, [(3,)], (3,), {"function": 0, "a": 0.0, "b": 0.0}),
     ["does not fit", "negative"]),
])
def test_a_description_the_c_structs_cannot_hold_is_refused_before_the_backend(backend, layer,
                                                                              words):
    for call in (lambda: backend.query_layer_support(layer),
                 lambda: backend.create_workload_factory().create_workload_prepared(layer)):
        with pytest.raises(loader.InvalidLayerError) as raised:
            call()
        for word in words:
            assert word in str(raised.value)
