"""Hostile layer descriptions handed to the reference backend's C interface directly (ctypes), where
the Python API cannot reach: every value of a 1.3 descriptor inconsistent with the tensor infos
is INVALID_ARGUMENT (a value it does not know, UNSUPPORTED) with a message, from
is_layer_supported and create_workload alike, and nothing is written outside the message
buffer. A descriptor is read only as far as its struct_size (a short one ends at an unmapped
page), no kernel reads past its inputs (each ends at an unmapped page), and results do not
depend on the number of threads."""
import ctypes
import os
import subprocess
import sys
from ctypes import POINTER, Structure, byref, c_float, c_int64, c_uint32, c_void_p, sizeof

import numpy as np
import pytest

import reference_backend
from conformance import raw
from conformance.raw import LayerDescription, Message, TensorInfo

OK, INVALID, UNSUPPORTED = 0, 1, 2
HERE = os.path.dirname(os.path.abspath(__file__))

Int64x8, Uint32x8 = c_int64 * 8, c_uint32 * 8


def fields(*names, kind=c_uint32):
    return [(name, kind) for name in names]


class Softmax(Structure):
    _fields_ = [("struct_size", c_uint32), ("beta", c_float), ("axis", c_uint32), ("log", c_uint32)]


class Activation(Structure):
    _fields_ = fields("struct_size", "function") + [("a", c_float), ("b", c_float)]


class Unary(Structure):
    _fields_ = fields("struct_size", "function")


class Concatenation(Structure):
    _fields_ = fields("struct_size", "axis")


class Slice(Structure):
    _fields_ = fields("struct_size", "reserved") + [("begin", Int64x8), ("step", Int64x8)]


class Transpose(Structure):
    _fields_ = [("struct_size", c_uint32), ("perm", Uint32x8)]


class Pad(Structure):
    _fields_ = fields("struct_size", "mode") + [("value", c_float), ("reserved", c_uint32),
                                                ("pad_begin", Int64x8), ("pad_end", Int64x8)]


class Reduce(Structure):
    _fields_ = fields("struct_size", "function", "axes", "keep_dims")


class BatchNormalization(Structure):
    _fields_ = [("struct_size", c_uint32), ("epsilon", c_float)]


class LayerNormalization(Structure):
    _fields_ = [("struct_size", c_uint32), ("axis", c_uint32), ("epsilon", c_float),
                ("bias_enabled", c_uint32)]


LAYER = {name: code for code, name in enumerate([
    "Activation", "Addition", "Multiplication", "FullyConnected", "Convolution2d",
    "DepthwiseConvolution2d", "Pooling2d", "Softmax", "Reshape", "Subtraction", "Division",
    "Maximum", "Minimum", "Power", "ElementwiseUnary", "Prelu", "Concatenation", "Slice",
    "Transpose", "Pad", "Resize", "Reduce", "BatchNormalization", "LayerNormalization", "MatMul"])}


def made(structure, **values):
    d = structure()
    d.struct_size = sizeof(structure)
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                getattr(d, key)[i] = v
        else:
            setattr(d, key, value)
    return d


class Description:
    """A BackendLayerDescription of any number of inputs and everything it points to."""

    def __init__(self, layer, inputs, output, descriptor=None, num_inputs=None, num_outputs=1,
                 data_type=0):
        shapes = list(inputs) + [output]
        self.infos = (TensorInfo * len(shapes))()
        for info, shape in zip(self.infos, shapes):
            info.struct_size = sizeof(TensorInfo)
            info.data_type = data_type
            info.num_dimensions = len(shape)
            for d, v in enumerate(shape):
                info.dimensions[d] = v
        self.descriptor = descriptor
        n = len(inputs) if num_inputs is None else num_inputs
        self.description = LayerDescription(
            sizeof(LayerDescription), LAYER.get(layer, layer), n, num_outputs,
            ctypes.cast(self.infos, POINTER(TensorInfo)),
            ctypes.cast(byref(self.infos, len(inputs) * sizeof(TensorInfo)), POINTER(TensorInfo)),
            ctypes.addressof(descriptor) if descriptor is not None else None)


@pytest.fixture(scope="module")
def backend():
    library = raw.Raw(reference_backend.LIBRARY_PATH)
    instance = library.new_instance()
    factory = library.factory(instance)
    yield library, instance, factory
    library.destroy_factory(factory)
    library.close()


def answers(backend, description):
    """(status of is_layer_supported, its message, status of create_workload); checks the
    message buffers' canaries and destroys any workload made."""
    library, instance, factory = backend
    message, created = Message(256), Message(256)
    supported = raw.Instance.from_address(instance).is_layer_supported(
        instance, byref(description.description), message.pointer, message.size)
    workload = c_void_p()
    status = raw.WorkloadFactory.from_address(factory).create_workload(
        factory, byref(description.description), byref(workload), created.pointer, created.size)
    if workload.value:
        library.destroy_workload(workload.value)
    assert message.problem() is None and created.problem() is None
    assert (status == OK) == bool(workload.value)
    return supported, message.text, status


S = [2, 3, 4]
MISUSE = [
    # what every layer type shares
    ("rank 7", Description("Transpose", [[1] * 7], [1] * 7, made(Transpose, perm=list(range(7)))),
     INVALID, "at most 6"),
    ("rank 0", Description("Subtraction", [[], []], []), INVALID, "rank 1 to 6"),
    ("no descriptor", Description("Slice", [S], S), INVALID, "needs a descriptor"),
    ("short descriptor", Description("Pad", [S], S, made(Unary)), INVALID, "struct_size"),
    ("two outputs", Description("Subtraction", [S, S], S, num_outputs=2), INVALID, "1 output"),
    ("no inputs", Description("Concatenation", [], S, made(Concatenation)), INVALID, "inputs"),
    ("too many inputs", Description("Concatenation", [S] * 3, S, made(Concatenation),
                                    num_inputs=70000), INVALID, "inputs"),
    ("float16", Description("Maximum", [S, S], S, data_type=1), UNSUPPORTED, "data type"),
    ("zero extent", Description("Minimum", [[2, 0], [2, 1]], [2, 0]), INVALID, "at least 1"),
    ("2^41 elements", Description("Power", [[2**21, 2**20], [1]], [2**21, 2**20]), UNSUPPORTED,
     "2^40"),
    ("unknown type", Description(26, [S], S), UNSUPPORTED, "layer type 26"),
    ("unknown type max", Description(2**32 - 1, [S], S), UNSUPPORTED, "layer type"),
    # element-wise
    ("no broadcast", Description("Division", [[2, 3], [4]], [2, 3]), INVALID, "broadcast"),
    ("binary output", Description("Subtraction", [[2, 1], [3]], [2, 1]), INVALID, "output shape"),
    ("prelu widens", Description("Prelu", [[2, 1], [3]], [2, 3]), INVALID, "slope"),
    ("unary code", Description("ElementwiseUnary", [S], S, made(Unary, function=23)),
     UNSUPPORTED, "function 23"),
    ("activation code", Description("Activation", [S], S, made(Activation, function=18)),
     UNSUPPORTED, "function 18"),
    ("celu 0", Description("Activation", [S], S, made(Activation, function=15, a=0.0)), INVALID,
     "celu"),
    ("activation nan", Description("Activation", [S], S, made(Activation, function=5,
                                                              a=float("nan"))), INVALID, "finite"),
    # tensors
    ("perm repeats", Description("Transpose", [S], S, made(Transpose, perm=[0, 0, 1])), INVALID,
     "permutation"),
    ("perm beyond", Description("Transpose", [S], S, made(Transpose, perm=[0, 1, 2**32 - 1])),
     INVALID, "permutation"),
    ("perm output", Description("Transpose", [S], S, made(Transpose, perm=[2, 1, 0])), INVALID,
     "output shape"),
    ("step 0", Description("Slice", [S], S, made(Slice, step=[1, 0, 1])), INVALID, "step"),
    ("begin < 0", Description("Slice", [S], [1, 1, 1], made(Slice, begin=[0, -1, 0],
                                                             step=[1, 1, 1])), INVALID, "begins"),
    ("begin past", Description("Slice", [S], [1, 1, 1], made(Slice, begin=[0, 3, 0],
                                                              step=[1, 1, 1])), INVALID, "begins"),
    ("count past", Description("Slice", [S], [2, 2, 4], made(Slice, begin=[0, 2, 0],
                                                              step=[1, 1, 1])), INVALID, "past"),
    ("negative step past 0", Description("Slice", [S], [2, 3, 2], made(
        Slice, begin=[0, 1, 3], step=[1, -1, -3])), INVALID, "past"),
    ("huge step", Description("Slice", [S], [1, 2, 1], made(
        Slice, begin=[0, 2, 0], step=[1, -2**63, 1])), INVALID, "past"),
    ("slice rank", Description("Slice", [S], [2, 3], made(Slice, step=[1, 1, 1])), INVALID, "rank"),
    ("axis beyond", Description("Concatenation", [S, S], [4, 3, 4], made(Concatenation, axis=3)),
     INVALID, "axis 3"),
    ("concat mismatch", Description("Concatenation", [S, [2, 4, 4]], [4, 3, 4],
                                    made(Concatenation)), INVALID, "does not match"),
    ("concat sum", Description("Concatenation", [S, S], [5, 3, 4], made(Concatenation)),
     INVALID, "add up"),
    ("concat ranks", Description("Concatenation", [S, [2, 3]], [4, 3, 4], made(Concatenation)),
     INVALID, "rank"),
    ("pad mode", Description("Pad", [S], S, made(Pad, mode=3)), UNSUPPORTED, "mode"),
    ("pad huge", Description("Pad", [S], S, made(Pad, pad_begin=[2**62, 0, 0],
                                                 pad_end=[-2**62, 0, 0])), INVALID, "range"),
    ("pad beyond 2^40", Description("Pad", [S], [2, 3, 4], made(Pad, pad_begin=[0, -2**41, 0],
                                                                   pad_end=[0, 2**41, 0])), INVALID,
     "range"),
    ("pad empties", Description("Pad", [S], [2, 1, 4], made(Pad, pad_begin=[0, -2, 0],
                                                               pad_end=[0, -1, 0])), INVALID, "empty"),
    ("reflect too far", Description("Pad", [S], [2, 6, 4], made(Pad, mode=1, pad_begin=[0, 3, 0])),
     INVALID, "reflect"),
    ("nothing to repeat", Description("Pad", [S], [2, 3, 4], made(
        Pad, mode=2, pad_begin=[0, -3, 0], pad_end=[0, 3, 0])), INVALID, "nothing to repeat"),
    ("pad output", Description("Pad", [S], [2, 4, 4], made(Pad, pad_begin=[0, 2, 0])), INVALID,
     "output shape"),
    # normalization
    ("softmax axis", Description("Softmax", [S], S, made(Softmax, beta=1.0, axis=3)), INVALID,
     "axis 3"),
    ("reduce nothing", Description("Reduce", [S], S, made(Reduce, axes=0)), INVALID, "axes"),
    ("reduce beyond", Description("Reduce", [S], [2, 3], made(Reduce, axes=0b1100)), INVALID,
     "axes"),
    ("reduce code", Description("Reduce", [S], [1, 3, 4], made(Reduce, function=9, axes=1,
                                                                  keep_dims=1)), UNSUPPORTED,
     "function 9"),
    ("reduce output", Description("Reduce", [S], [1, 3, 4], made(Reduce, axes=1)), INVALID,
     "output shape"),
    ("epsilon 0", Description("BatchNormalization", [S] + [[4]] * 4, S,
                              made(BatchNormalization)), INVALID, "epsilon"),
    ("epsilon nan", Description("BatchNormalization", [S] + [[4]] * 4, S,
                                made(BatchNormalization, epsilon=float("nan"))), INVALID, "epsilon"),
    ("mean shape", Description("BatchNormalization", [S, [3], [4], [4], [4]], S,
                               made(BatchNormalization, epsilon=1e-3)), INVALID, "mean"),
    ("four inputs", Description("BatchNormalization", [S] + [[4]] * 3, S,
                                made(BatchNormalization, epsilon=1e-3)), INVALID, "5 inputs"),
    ("norm axis", Description("LayerNormalization", [S, [4]], S,
                              made(LayerNormalization, axis=3, epsilon=1e-3)), INVALID, "axis 3"),
    ("norm scale", Description("LayerNormalization", [S, [3, 1]], S,
                               made(LayerNormalization, axis=2, epsilon=1e-3)), INVALID, "scale"),
    ("norm bias missing", Description("LayerNormalization", [S, [4]], S, made(
        LayerNormalization, axis=2, epsilon=1e-3, bias_enabled=1)), INVALID, "3 inputs"),
    ("matmul inner", Description("MatMul", [[2, 3], [4, 5]], [2, 5]), INVALID, "inner"),
    ("matmul batch", Description("MatMul", [[2, 2, 3], [3, 3, 4]], [3, 2, 4]), INVALID,
     "broadcast"),
    ("matmul output", Description("MatMul", [[3], [3]], [3]), INVALID, "output shape"),
]


@pytest.mark.parametrize("what, description, expected, words", MISUSE, ids=[m[0] for m in MISUSE])
def test_misuse_is_refused_with_a_message(backend, what, description, expected, words):
    supported, text, created = answers(backend, description)
    assert (supported, created) == (expected, expected), (what, text)
    assert words in text, text


@pytest.mark.parametrize("description", [
    Description("Concatenation", [S] * 300, [600, 3, 4], made(Concatenation)),
    Description("Softmax", [S], S, made(Softmax, beta=1.0, axis=0, log=1)),
    Description("Slice", [S], [1, 2, 1], made(Slice, begin=[1, 2, 3], step=[-1, -2, -2**40])),
    Description("Pad", [S], [2, 3, 1], made(Pad, pad_begin=[0, 0, -3], pad_end=[0, 0, 0])),
    Description("Pad", [S], [2, 1, 4], made(Pad, pad_begin=[0, -3, 0], pad_end=[0, 1, 0])),
    Description("MatMul", [[7], [7]], [1]),
    Description("Reduce", [[1, 1, 1]], [1], made(Reduce, axes=0b111, function=8)),
    Description("Pad", [S], [2, 2, 4], made(Pad, pad_begin=[0, -5, 0], pad_end=[0, 4, 0])),
], ids=["concat 300", "log softmax axis 0", "slice steps", "pad crops", "pad all constant",
        "dot", "reduce ones", "pad crops past the axis"])
def test_edge_descriptions_are_accepted(backend, description):
    assert answers(backend, description)[::2] == (OK, OK)


GUARDED = r"""
import ctypes, mmap, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import reference_backend
from conformance import raw
from test_layers_1_3_misuse import Description, Transpose, answers, made, S
libc = ctypes.CDLL(None)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
pages = mmap.mmap(-1, 2 * mmap.PAGESIZE)
base = ctypes.addressof(ctypes.c_char.from_buffer(pages))
assert libc.mprotect(base + mmap.PAGESIZE, mmap.PAGESIZE, 0) == 0      # the second page unmapped

library = raw.Raw(reference_backend.LIBRARY_PATH)
instance = library.new_instance()
factory = library.factory(instance)
backend = (library, instance, factory)
# Softmax of Backend API 1.1: 8 bytes, axis and log absent (the last axis, not the log)
ctypes.memmove(base + mmap.PAGESIZE - 8, bytes(ctypes.c_uint32(8)) + bytes(ctypes.c_float(1.0)), 8)
description = Description("Softmax", [S], S)
description.description.descriptor = base + mmap.PAGESIZE - 8
assert answers(backend, description)[::2] == (0, 0)
x = np.random.default_rng(0).standard_normal(S).astype(np.float32)
out = np.empty(S, np.float32)
workload = ctypes.c_void_p()
message = raw.Message(256)
status = raw.WorkloadFactory.from_address(factory).create_workload(
    factory, ctypes.byref(description.description), ctypes.byref(workload), message.pointer, 256)
assert status == 0, message.text
assert library.execute(workload.value, raw.buffers([x]), 1, raw.buffers([out]), 1) == 0
library.destroy_workload(workload.value)
e = np.exp(x - x.max(axis=-1, keepdims=True))
np.testing.assert_allclose(out, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)
# a Transpose descriptor that says it is larger than this build's (a later minor version):
# only this build's members are read, the rest lies on the unmapped page
size = ctypes.sizeof(Transpose)
ctypes.memmove(base + mmap.PAGESIZE - size, bytes(made(Transpose, perm=[2, 1, 0])), size)
ctypes.c_uint32.from_address(base + mmap.PAGESIZE - size).value = size + 64
description = Description("Transpose", [S], S[::-1])
description.description.descriptor = base + mmap.PAGESIZE - size
assert answers(backend, description)[::2] == (0, 0)
library.destroy_factory(factory)
library.close()
print("ok")
"""


def test_a_descriptor_is_read_no_further_than_its_struct_size_or_this_builds_struct():
    """A 1.1 Softmax descriptor (8 bytes) ending at an unmapped page runs over the last axis; a
    Transpose descriptor claiming more than this build knows ends likewise: a read past either
    would crash the child."""
    result = subprocess.run([sys.executable, "-c", GUARDED, HERE], capture_output=True, text=True,
                            timeout=120, cwd=os.path.dirname(HERE))
    assert result.returncode == 0 and result.stdout.strip() == "ok", \
        (result.returncode, result.stderr[-2000:])


THREADED = r"""
import sys
import numpy as np
import loader
rng = np.random.default_rng(21)
x = rng.standard_normal((1, 64, 64, 128)).astype(np.float32)
c = rng.standard_normal((128,)).astype(np.float32)
cases = [
    ("Concatenation", [x, x[..., :50]], {"axis": 3}), ("Concatenation", [x, x], {"axis": 0}),
    ("Transpose", [x], {"perm": [0, 3, 1, 2]}), ("Transpose", [x], {"perm": [2, 1, 3, 0]}),
    ("Slice", [x], {"step": [1, 1, 1, -2], "begin": [0, 0, 0, -1], "end": [1, 64, 64, -200]}),
    ("Slice", [x], {"step": [1, 2, 1, 1]}),
    ("Pad", [x], {"pads": [0, 2, -1, 0, 0, 1, 3, 0], "mode": "reflect"}),
    ("Pad", [x], {"pads": [0, 2, -1, 0, 0, 1, 3, 0], "value": 2.0}),
    ("Subtraction", [x, c], None), ("Maximum", [x, x[:, :1]], None), ("Prelu", [x, c], None),
    ("Power", [np.abs(x), c], None), ("Activation", [x], {"function": "gelu"}),
    ("Activation", [x], {"function": "clip", "a": -1.0}), ("ElementwiseUnary", [x], {"function": "round"}),
    ("ElementwiseUnary", [x], {"function": "exp"}), ("Softmax", [x], {"axis": 1}),
    ("Softmax", [x], {"log": True}), ("BatchNormalization", [x, c, np.abs(c), c, c], None),
    ("LayerNormalization", [x, c, c], {"axis": 2}), ("MatMul", [x[0], x[0, 0].T], None),
]
with loader.Runtime() as runtime:
    backend = runtime.create_backend("CpuRef")
    np.savez(sys.argv[1], *[backend.execute(layer, inputs, d)[0] for layer, inputs, d in cases])
print("ok")
"""


def test_results_do_not_depend_on_the_number_of_threads(tmp_path):
    """Every layer that shares its work with the thread pool gives the same bits on one thread
    and on three (uneven parts on two cores)."""
    results = []
    for threads in ("1", "3"):
        path = str(tmp_path / f"threads{threads}.npz")
        result = subprocess.run([sys.executable, "-c", THREADED, path], capture_output=True,
                                text=True, timeout=120, cwd=os.path.dirname(HERE),
                                env=dict(os.environ, REFERENCE_BACKEND_THREADS=threads))
        assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
        with np.load(path) as saved:
            results.append([saved[key] for key in saved.files])
    for one, three in zip(*results):
        np.testing.assert_array_equal(one, three)


BEFORE_A_HOLE = r"""
import ctypes, mmap
import numpy as np
import loader
from conformance import reference
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
keep = []

def before_a_hole(values):
    # a copy of values whose last element is the last 4 bytes before a PROT_NONE page
    nbytes = values.size * 4
    pages = -(-nbytes // mmap.PAGESIZE)
    m = mmap.mmap(-1, (pages + 1) * mmap.PAGESIZE)
    hole = ctypes.addressof(ctypes.c_char.from_buffer(m)) + pages * mmap.PAGESIZE
    assert libc.mprotect(hole, mmap.PAGESIZE, 0) == 0, ctypes.get_errno()
    a = np.frombuffer(m, np.float32, count=values.size, offset=pages * mmap.PAGESIZE - nbytes)
    a[...] = values.reshape(-1)
    keep.append(m)
    return a.reshape(values.shape)

rng = np.random.default_rng(8)
cases = [
    ("Slice", [(3, 41)], {"begin": [0, 0], "step": [1, 2]}),             # reads the last element
    ("Slice", [(3, 40)], {"begin": [0, 1], "step": [1, 2]}),
    ("Slice", [(3, 37)], {"begin": [2, -1], "end": [-9, -99], "step": [-1, -1]}),
    ("Slice", [(5, 9, 7)], {"begin": [-1, -1, -1], "end": [-99, -99, -99], "step": [-2, -3, -2]}),
    ("Transpose", [(3, 37, 33)], {"perm": [2, 0, 1]}), ("Transpose", [(1, 5, 7, 9)], {"perm": [0, 3, 1, 2]}),
    ("Pad", [(3, 7, 5)], {"pads": [1, -2, 2, 0, 3, 1], "mode": "reflect"}),
    ("Pad", [(3, 7, 5)], {"pads": [0, 2, 0, 2, 0, 3], "mode": "edge"}),
    ("Concatenation", [(2, 3, 5), (2, 1, 5), (2, 7, 5)], {"axis": 1}),
    ("Prelu", [(4, 33), (33,)], None), ("Maximum", [(5, 1, 7), (3, 1)], None),
    ("Activation", [(1, 37)], {"function": "mish"}), ("ElementwiseUnary", [(37,)], {"function": "erf"}),
    ("Softmax", [(3, 37, 5)], {"axis": 1, "log": True}),
    ("Reduce", [(3, 37, 5)], {"function": "log_sum_exp", "axes": [1]}),
    ("Reduce", [(3, 37, 5)], {"function": "l2", "axes": [0, 2]}),
    ("LayerNormalization", [(3, 37), (37,), (1,)], {"axis": 1}),
    ("BatchNormalization", [(3, 37), (37,), (37,), (37,), (37,)], None),
    ("MatMul", [(3, 5, 37), (37,)], None),
]
with loader.Runtime() as runtime:
    backend = runtime.create_backend("CpuRef")
    for layer, shapes, descriptor in cases:
        inputs = [before_a_hole(rng.uniform(0.5, 1.5, shape).astype(np.float32)) for shape in shapes]
        [out] = backend.execute(layer, inputs, descriptor)
        np.testing.assert_allclose(out, reference.evaluate(layer, inputs, descriptor), rtol=1e-4,
                                   atol=1e-4)
print("ok")
"""


def test_kernels_read_nothing_past_their_inputs():
    """Every input ends right before an unmapped page, on the extents the vector paths leave to
    their scalar tails: a read past one would crash the child."""
    result = subprocess.run([sys.executable, "-c", BEFORE_A_HOLE], capture_output=True,
                            text=True, timeout=120, cwd=os.path.dirname(HERE))
    assert result.returncode == 0 and result.stdout.strip() == "ok", \
        (result.returncode, result.stderr[-2000:])
