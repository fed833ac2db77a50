"""Malformed layer calls get an exception that names the problem; nothing crashes."""
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
    ("Activation", [x4(3)], {"function": "gelu"}, loader.InvalidLayerError, ["'gelu'", "relu"]),
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
    ("Softmax", [x4(3)], {"axis": 0}, loader.InvalidLayerError, ["'axis'"]),
    ("Reshape", [x4(2, 3)], None, loader.InvalidLayerError, ["'shape'"]),
    ("Reshape", [x4(2, 3)], {"shape": [4, 2]}, loader.InvalidLayerError, ["6 elements", "8 elements"]),
    ("Reshape", [x4(2, 3)], {"shape": [-1, -1]}, loader.InvalidLayerError, ["at most one -1"]),
    ("Reshape", [x4(2, 3)], {"shape": [4, -1]}, loader.InvalidLayerError, ["cannot reshape"]),
    ("Reshape", [x4(2, 3)], {"shape": [0, 6]}, loader.InvalidLayerError, ["positive"]),
    ("Reshape", [x4(2, 3)], {"shape": 6}, TypeError, ["'shape'"]),
    ("Reshape", [x4(1)], {"shape": [1] * 9}, loader.InvalidLayerError, ["at most 8"]),
])
def test_malformed_calls_name_the_problem(backend, layer, inputs, descriptor, error, words):
    with pytest.raises(error) as raised:
        backend.execute(layer, inputs, descriptor)
    assert isinstance(raised.value, (loader.BackendError, TypeError, ValueError))
    for word in words:
        assert word in str(raised.value), str(raised.value)


@pytest.mark.parametrize("value, words", [
    (np.ones(3, dtype=np.float64), ["float64", "float32"]),
    (np.ones(3, dtype=np.int32), ["int32"]),
    (np.ones(3, dtype=np.float16), ["float16"]),
    (np.ones(3, dtype=np.complex64), ["complex64"]),
    (np.array(["a", "b"]), ["<U1"]),
    (None, ["NoneType"]),
    ("abc", ["str"]),
    ([1, "x"], ["not a numeric array"]),
    ({"a": 1}, ["dict"]),
])
def test_wrong_input_types_are_refused(backend, value, words):
    with pytest.raises(TypeError) as raised:
        backend.execute("Activation", [value], {"function": "relu"})
    for word in words:
        assert word in str(raised.value)


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
    (prepared("Activation", 0, [(3,)], (3,), {"function": 9, "a": 0.0, "b": 0.0}), ["function 9"]),
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
