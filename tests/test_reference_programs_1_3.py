"""The reference backend's compiled programs with the layer types of Backend API 1.3: steps of any
number of inputs (a Concatenation of many tensors, constants and one tensor read twice), every
1.3 descriptor exported and loaded again with identical results, an activation of 1.3 fused
into a convolution, and every single-byte change to such a program either refused or loaded
without a crash (rule 12.8)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import loader
from conformance.network_reference import evaluate_network

F = np.float32
RNG = np.random.default_rng(13)


def rand(*shape):
    return RNG.standard_normal(shape).astype(F)


@pytest.fixture(scope="module")
def runtime():
    with loader.Runtime() as rt:
        yield rt


def many_layer_types():
    """One program with a layer of nearly every 1.3 type, its Concatenation of 40 tensors."""
    net = loader.Network()
    x = net.add_input("x", (2, 6, 5))
    parts = [x, x] + [net.add_constant(f"c{i}", rand(2, 6, 1 + i % 3)) for i in range(38)]
    y = net.add_layer("Concatenation", parts, {"axis": -1}, name="concat")
    y = net.add_layer("Transpose", [y], {"perm": [2, 0, 1]}, name="transpose")
    y = net.add_layer("Slice", [y], {"begin": [-1, 0, 1], "end": [0, 2, 6], "step": [-2, 1, 2]},
                      name="slice")
    y = net.add_layer("Pad", [y], {"pads": [1, 0, -1, 0, 1, 1], "mode": "reflect"}, name="pad")
    y = net.add_layer("Softmax", [y], {"axis": 1, "log": True}, name="log_softmax")
    y = net.add_layer("LayerNormalization", [y, net.add_constant("g", rand(3)),
                                             net.add_constant("b", rand(3))], {"axis": 1},
                      name="layer_norm")
    y = net.add_layer("Activation", [y], {"function": "mish"}, name="mish")
    z = net.add_layer("Reduce", [y], {"function": "log_sum_exp", "axes": [0]}, name="reduce")
    z = net.add_layer("MatMul", [z, net.add_constant("m", rand(3, 4))], name="matmul")
    z = net.add_layer("ElementwiseUnary", [z], {"function": "atan"}, name="atan")
    z = net.add_layer("Prelu", [z, net.add_constant("slope", rand(4))], name="prelu")
    z = net.add_layer("Maximum", [z, net.add_constant("floor", rand(1))], name="maximum")
    w = net.add_layer("BatchNormalization", [z] + [net.add_constant(n, np.abs(rand(4)) + 0.1)
                                                   for n in ("mean", "var", "scale", "bias")],
                      name="batch_norm")
    net.add_output(net.add_layer("Power", [net.add_layer("Activation", [w], {
        "function": "softplus"}, name="softplus"), net.add_constant("p", np.float32([1.5]))],
        name="power"), "y")
    return net


def test_a_program_of_1_3_layers_runs_and_loads_again_with_identical_results(runtime, tmp_path):
    net = many_layer_types()
    inputs = {"x": rand(2, 6, 5)}
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [(s.kind, s.layers) for s in loaded.plan] == [
            ("compiled", tuple(layer.name for layer in net.layers))]
        out = loaded.execute(inputs)["y"]
        loaded.export(tmp_path / "net.compiled")
    np.testing.assert_allclose(out, evaluate_network(net, inputs)["y"], rtol=2e-4, atol=2e-4)
    with runtime.load_compiled_network(tmp_path / "net.compiled") as again:
        np.testing.assert_array_equal(again.execute(inputs)["y"], out)


@pytest.mark.parametrize("function", ["gelu", "swish", "hard_swish", "clip"])
def test_an_activation_of_1_3_fuses_into_the_convolution(runtime, function):
    net = loader.Network()
    x = net.add_input("x", (1, 9, 9, 6))
    y = net.add_layer("Convolution2d", [x, net.add_constant("w", rand(10, 3, 3, 6))],
                      {"padding": 1}, name="conv")
    net.add_output(net.add_layer("Activation", [y], {"function": function}, name="act"), "y")
    inputs = {"x": rand(1, 9, 9, 6)}
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        out = loaded.execute(inputs, profile=True)["y"]
        steps = [e.layers for e in loaded.last_profile if e.source == "backend"]
    assert steps == [("conv", "act")]
    np.testing.assert_allclose(out, evaluate_network(net, inputs)["y"], rtol=2e-4, atol=2e-4)


GUARDED_LOADS = r"""
import ctypes, mmap, sys
from ctypes import CFUNCTYPE, POINTER, Structure, c_int32, c_uint32, c_uint64, c_void_p, c_size_t
import reference_backend
from conformance import raw

class Instance(Structure):       # BackendInstance through load_compiled_subgraph (1.2)
    _fields_ = raw.Instance._fields_ + [
        ("optimize_subgraph", c_void_p), ("is_available", c_void_p),
        ("create_profiling_context", c_void_p),
        ("load_compiled_subgraph", CFUNCTYPE(c_int32, c_void_p, c_void_p, c_uint64,
                                             POINTER(c_void_p), c_void_p, c_size_t))]

class Compiled(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32), ("execute", c_void_p),
                ("destroy", CFUNCTYPE(None, c_void_p))]

blob = open(sys.argv[1], "rb").read()
libc = ctypes.CDLL(None)
libc.mprotect.argtypes = [c_void_p, c_size_t, ctypes.c_int]
pages = -(-len(blob) // mmap.PAGESIZE) + 1
memory = mmap.mmap(-1, pages * mmap.PAGESIZE)
base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
guard = base + (pages - 1) * mmap.PAGESIZE
assert libc.mprotect(guard, mmap.PAGESIZE, 0) == 0
start = guard - len(blob)                    # the bytes end where the unmapped page begins
library = raw.Raw(reference_backend.LIBRARY_PATH)
pointer = library.new_instance()
instance = Instance.from_address(pointer)
loaded = refused = 0
for offset in range(-1, len(blob)):
    damaged = bytearray(blob)
    if offset >= 0:
        damaged[offset] ^= 0x5A
    ctypes.memmove(start, bytes(damaged), len(damaged))
    compiled, message = c_void_p(), raw.Message(256)
    status = instance.load_compiled_subgraph(pointer, start, len(damaged), ctypes.byref(compiled),
                                             message.pointer, message.size)
    assert message.problem() is None
    if status == 0:
        Compiled.from_address(compiled.value).destroy(compiled.value)
        loaded += 1
    else:
        assert status == 1 and message.text, (offset, status)
        refused += 1
    assert offset >= 0 or status == 0                   # the bytes as written load
library.close()
print(loaded, refused)
"""


def test_every_single_byte_change_to_a_program_with_a_wide_step_is_loaded_or_refused(runtime,
                                                                                      tmp_path):
    """Each byte of a program whose Concatenation step has four inputs (and its Slice the largest
    descriptor) changed in turn, the bytes ending where an unmapped page begins: the reference
    backend refuses them (INVALID_ARGUMENT with a message) or loads a program, never reading past
    their end (a child process: a read past them would crash it)."""
    net = loader.Network()
    x = net.add_input("x", (2, 3))
    y = net.add_layer("Concatenation", [x, net.add_constant("c", rand(2, 2)), x, x], {"axis": 1})
    y = net.add_layer("Slice", [y], {"begin": [1, -1], "end": [-3, 0], "step": [-1, -2]})
    net.add_output(net.add_layer("Transpose", [y]), "y")
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        blob = loaded.plan[0].compiled.serialize()
    (tmp_path / "program").write_bytes(blob)
    result = subprocess.run([sys.executable, "-c", GUARDED_LOADS, str(tmp_path / "program")],
                            capture_output=True, text=True, timeout=300,
                            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    loaded_count, refused = map(int, result.stdout.split())
    assert refused > len(blob) // 4 and loaded_count >= 1
