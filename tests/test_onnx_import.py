"""ONNX models in (docs/onnx.md): faithful inputs and outputs, static shapes, refusals that list
everything at once, malformed models as ModelErrors, external data kept inside the model's
directory."""
import os
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the importer's tests need the onnx package "
                                          "(pip install 'dynamic-backends[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import loader  # noqa: E402
import loader.onnx  # noqa: E402
from conformance.network_reference import evaluate_network  # noqa: E402

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _values_of_its_own(request):
    """Each test draws from a generator seeded by its own name: its values do not depend on
    which tests ran before it (a subset, another order)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def small_cnn():
    """Conv -> BatchNormalization -> Relu -> MaxPool -> Conv (grouped) -> GlobalAveragePool ->
    Flatten -> Gemm -> Softmax, NCHW, as exporters write it."""
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("w1", rand(8, 3, 3, 3)), ("b1", rand(8)), ("gamma", rand(8) + 2), ("beta", rand(8)),
        ("mean", rand(8)), ("var", np.abs(rand(8)) + 0.5), ("w2", rand(8, 2, 3, 3)),
        ("fc_w", rand(10, 8)), ("fc_b", rand(10))]]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"],
                         name="bn1", epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"], name="relu1"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p", "w2"], ["c2"], name="conv2", group=4, pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=1),
    ]
    return model(nodes, [tensor("x", ["N", 3, 8, 8])], [tensor("y", None)], inits)


def onnx_reference(proto, feeds):
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(proto).run(None, feeds)


def test_a_model_is_a_network_with_the_models_names_shapes_and_layout():
    proto = small_cnn()
    net = loader.onnx.load_model(proto, input_shapes={"x": (2, 3, 8, 8)})
    assert net.inputs == {"x": (2, 3, 8, 8)}          # NCHW, as the model takes it
    assert list(net.outputs) == ["y"]
    types = [layer.type for layer in net.layers]
    assert "BatchNormalization" not in types           # folded into conv1
    assert types.count("Transpose") <= 1               # one, at the input
    x = rand(2, 3, 8, 8)
    [want] = onnx_reference(proto, {"x": x})
    got = evaluate_network(net, {"x": x})["y"]
    assert got.shape == want.shape == (2, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_model_runs_on_the_reference_backend_as_onnx_computes_it(tmp_path):
    proto = small_cnn()
    path = tmp_path / "cnn.onnx"
    onnx.save(proto, str(path))
    net = loader.onnx.load_model(path, input_shapes={"x": (1, 3, 8, 8)})
    x = rand(1, 3, 8, 8)
    [want] = onnx_reference(proto, {"x": x})
    with loader.Runtime() as runtime, runtime.load_network(net) as loaded:
        got = loaded.execute({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_symbolic_dimension_without_input_shapes_names_the_input_and_dimension():
    with pytest.raises(loader.onnx.ModelError, match="dimension 0 \\('N'\\) of input 'x'"):
        loader.onnx.load_model(small_cnn())
    with pytest.raises(loader.onnx.ModelError, match="fixes at 3"):
        loader.onnx.load_model(small_cnn(), input_shapes={"x": (1, 4, 8, 8)})
    with pytest.raises(loader.onnx.ModelError, match="not inputs of the model"):
        loader.onnx.load_model(small_cnn(), input_shapes={"x": (1, 3, 8, 8), "z": (1,)})


def test_a_refusal_lists_every_node_that_cannot_be_expressed_at_once():
    nodes = [helper.make_node("NonMaxSuppression", ["x", "x"], ["a"], name="nms"),
             helper.make_node("Relu", ["x"], ["r"], name="fine"),
             helper.make_node("Custom", ["r"], ["b"], name="custom", domain="com.acme"),
             helper.make_node("LpPool", ["x4"], ["c"], name="lp3", kernel_shape=[2, 2], p=3)]
    proto = model(nodes, [tensor("x", [1, 4]), tensor("x4", [1, 1, 4, 4])],
                  [tensor("a", None), tensor("b", None), tensor("c", None)])
    proto.opset_import.append(helper.make_opsetid("com.acme", 1))
    with pytest.raises(loader.onnx.UnsupportedModelError) as raised:
        loader.onnx.load_model(proto)
    message = str(raised.value)
    assert "3 nodes" in message
    for name, words in (("nms", "NonMaxSuppression"), ("custom", "com.acme"), ("lp3", "p = 3")):
        assert f"{name} " in message and words in message
    assert isinstance(raised.value, loader.NetworkError)


@pytest.mark.parametrize("make, words", [
    (lambda: b"\x08\x07garbage" * 3, "not an ONNX model"),
    (lambda: small_cnn().SerializeToString()[:300], "not an ONNX model"),
    (lambda: b"", "empty"),
    (lambda: model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [tensor("x", [2])],
                   [tensor("y", None)]), "reads 'ghost', which no node"),
    (lambda: model([helper.make_node("Relu", ["b"], ["a"], name="one"),
                    helper.make_node("Relu", ["a"], ["b"], name="two")],
                   [tensor("x", [2])], [tensor("a", None)]), "cycle"),
    (lambda: model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", strides=[1.5, 1.0])],
                   [tensor("x", [1, 1, 4, 4])], [tensor("y", None)],
                   [numpy_helper.from_array(rand(1, 1, 1, 1), "w")]), "'strides' is of type"),
    (lambda: model([helper.make_node("Add", ["x", "z"], ["y"], name="add")],
                   [tensor("x", [2, 3]), tensor("z", [4, 5])], [tensor("y", None)]),
     "node 'add'"),
    (lambda: model([helper.make_node("Relu", ["x"], ["y"], name="r"),
                    helper.make_node("Relu", ["x"], ["y"], name="r2")],
                   [tensor("x", [2])], [tensor("y", None)]), "produced twice"),
])
def test_a_malformed_model_is_a_model_error_naming_the_problem(make, words):
    source = make()
    with pytest.raises(loader.onnx.ModelError) as raised:
        loader.onnx.load_model(source.SerializeToString() if hasattr(source, "graph") else source)
    assert words in str(raised.value)


def test_an_initializer_declaring_more_than_its_bytes_is_refused_before_allocation():
    huge = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20],
                            raw_data=b"\0" * 64)
    proto = model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [1])],
                  [tensor("y", None)], [huge])
    with pytest.raises(loader.onnx.ModelError, match="64 bytes of data for shape"):
        loader.onnx.load_model(proto.SerializeToString())


def test_opsets_outside_what_is_supported_are_refused():
    proto = model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])],
                  [tensor("y", None)], opset=9)
    with pytest.raises(loader.onnx.UnsupportedModelError, match="opset 9"):
        loader.onnx.load_model(proto)


# -- external data ---------------------------------------------------------------------------------

def external_model(directory, location, offset=0, length=None):
    w = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)),
                       ("length", str(16 if length is None else length))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    proto = model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [tensor("x", [4])],
                  [tensor("y", None)], [w])
    path = directory / "model.onnx"
    path.write_bytes(proto.SerializeToString())
    return path


def test_external_data_is_read_from_the_models_directory(tmp_path):
    (tmp_path / "weights.bin").write_bytes(np.arange(8, dtype=np.float32).tobytes())
    net = loader.onnx.load_model(external_model(tmp_path, "weights.bin", offset=16))
    assert np.array_equal(evaluate_network(net, {"x": np.zeros(4, np.float32)})["y"],
                          [4, 5, 6, 7])


@pytest.mark.parametrize("location, words", [
    ("/etc/passwd", "absolute"),
    ("../secret.bin", "climbs out"),
    ("link.bin", "leads out"),
    ("weights.bin@", "No such file"),
])
def test_external_data_outside_the_models_directory_is_refused(tmp_path, location, words):
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"\0" * 16)
    inside = tmp_path / "model"
    inside.mkdir()
    os.symlink(outside, inside / "link.bin")
    with pytest.raises(loader.onnx.ModelError, match=words):
        loader.onnx.load_model(external_model(inside, location))


def test_external_data_past_the_end_of_its_file_is_refused(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0" * 20)
    with pytest.raises(loader.onnx.ModelError, match="outside the file"):
        loader.onnx.load_model(external_model(tmp_path, "weights.bin", offset=8))
    with pytest.raises(loader.onnx.ModelError, match="outside the file"):
        loader.onnx.load_model(external_model(tmp_path, "weights.bin", offset=-4))


def test_external_data_of_a_model_given_as_bytes_is_refused(tmp_path):
    path = external_model(tmp_path, "weights.bin")
    with pytest.raises(loader.onnx.ModelError, match="only a model loaded from its path"):
        loader.onnx.load_model(path.read_bytes())


def test_without_the_onnx_package_the_error_names_the_extra(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"dynamic-backends\[onnx\]"):
        loader.onnx.load_model(b"anything")


# -- ONNX's own node tests, through the references (the backend run is in benchmarks/) -----------

def test_onnx_node_tests_give_no_wrong_answer_through_the_references():
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        import onnx_node_tests
    finally:
        sys.path.pop(0)
    outcomes = {}
    for case in onnx_node_tests.float32_cases()[::3]:    # a third here; all of them in benchmarks/
        outcome, detail = onnx_node_tests.run_case(case, "numpy")
        outcomes.setdefault(outcome, []).append((case.name, detail))
    assert not outcomes.get("wrong") and not outcomes.get("error"), \
        outcomes.get("wrong", []) + outcomes.get("error", [])
    assert len(outcomes["passed"]) >= 130


# -- layouts: whatever the model does to its axes, the importer's bookkeeping follows ---------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LAYOUT_OPS = ("Transpose", "Reshape", "Flatten", "Relu", "AddBias", "Concat", "Slice",
              "ReduceMean", "Softmax", "Conv", "Squeeze")


def _layout_model(ops, draw_int):
    """A chain of operators that move, merge and split axes, starting from an NCHW tensor."""
    shape = [1, 4, 3, 5]
    nodes, inits, current = [], [], "x"
    for k, op in enumerate(ops):
        out = f"v{k}"
        rank = len(shape)
        if op == "Transpose":
            perm = list(range(rank))
            for i in range(rank - 1, 0, -1):
                j = draw_int(0, i)
                perm[i], perm[j] = perm[j], perm[i]
            nodes.append(helper.make_node("Transpose", [current], [out], perm=perm))
            shape = [shape[p] for p in perm]
        elif op == "Reshape" and rank >= 2:
            a = draw_int(0, rank - 2)          # merge axes a and a+1
            new = shape[:a] + [shape[a] * shape[a + 1]] + shape[a + 2:]
            inits.append(numpy_helper.from_array(np.array(new, np.int64), f"s{k}"))
            nodes.append(helper.make_node("Reshape", [current, f"s{k}"], [out]))
            shape = new
        elif op == "Flatten":
            axis = draw_int(0, rank)
            nodes.append(helper.make_node("Flatten", [current], [out], axis=axis))
            shape = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
        elif op == "AddBias":
            bias = rand(*[shape[i] if i == rank - 1 - draw_int(0, rank - 1) else 1
                          for i in range(rank)])
            inits.append(numpy_helper.from_array(bias, f"b{k}"))
            nodes.append(helper.make_node("Add", [current, f"b{k}"], [out]))
        elif op == "Concat":
            axis = draw_int(0, rank - 1)
            nodes.append(helper.make_node("Concat", [current, current], [out], axis=axis))
            shape = list(shape)
            shape[axis] *= 2
        elif op == "Slice":
            axis = draw_int(0, rank - 1)
            for name, value in (("st", 0), ("en", max(1, shape[axis] - 1)), ("ax", axis)):
                inits.append(numpy_helper.from_array(np.array([value], np.int64), f"{name}{k}"))
            nodes.append(helper.make_node("Slice", [current, f"st{k}", f"en{k}", f"ax{k}"], [out]))
            shape = list(shape)
            shape[axis] = max(1, shape[axis] - 1)
        elif op == "ReduceMean":
            axis = draw_int(0, rank - 1)
            keep = draw_int(0, 1) if rank > 1 else 1
            nodes.append(helper.make_node("ReduceMean", [current], [out], axes=[axis],
                                          keepdims=keep))
            shape = [1 if i == axis else v for i, v in enumerate(shape)] if keep else \
                [v for i, v in enumerate(shape) if i != axis]
        elif op == "Softmax":
            nodes.append(helper.make_node("Softmax", [current], [out],
                                          axis=draw_int(0, rank - 1)))
        elif op == "Conv" and rank == 4:
            inits.append(numpy_helper.from_array(rand(2, shape[1], 1, 1), f"w{k}"))
            nodes.append(helper.make_node("Conv", [current, f"w{k}"], [out]))
            shape = [shape[0], 2, shape[2], shape[3]]
        elif op == "Squeeze" and 1 in shape and rank > 1:
            axis = shape.index(1)
            inits.append(numpy_helper.from_array(np.array([axis], np.int64), f"q{k}"))
            nodes.append(helper.make_node("Squeeze", [current, f"q{k}"], [out]))
            shape = shape[:axis] + shape[axis + 1:]
        else:
            nodes.append(helper.make_node("Relu", [current], [out]))
        current = out
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    return model(nodes, [tensor("x", [1, 4, 3, 5])], [tensor("y", None)], inits, opset=13)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(LAYOUT_OPS), min_size=1, max_size=7), st.data())
def test_any_chain_of_axis_moves_computes_what_onnx_computes(ops, data):
    proto = _layout_model(ops, lambda lo, hi: data.draw(st.integers(lo, hi)))
    x = rand(1, 4, 3, 5)
    [want] = onnx_reference(proto, {"x": x})
    got = evaluate_network(loader.onnx.load_model(proto), {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("perm", [list(p) for p in __import__("itertools").permutations(range(4))])
def test_every_transpose_then_reshape_reads_the_data_in_the_models_order(perm):
    shape = [2, 1, 3, 4]
    after = [shape[p] for p in perm]
    target = [after[0] * after[1], after[2] * after[3]]
    proto = model([helper.make_node("Transpose", ["x"], ["t"], perm=perm),
                   helper.make_node("Reshape", ["t", "s"], ["y"])],
                  [tensor("x", shape)], [tensor("y", None)],
                  [numpy_helper.from_array(np.array(target, np.int64), "s")])
    x = rand(*shape)
    got = evaluate_network(loader.onnx.load_model(proto), {"x": x})["y"]
    np.testing.assert_array_equal(got, np.transpose(x, perm).reshape(target))


def _conv_then(tail_nodes, tail_inits, head=(), rng=None):
    """x -> [head nodes] -> Conv (output c) -> tail nodes -> y."""
    draw = rand if rng is None else (lambda *shape: rng.standard_normal(shape).astype(np.float32))
    inits = [numpy_helper.from_array(draw(6, 3, 3, 3), "w"),
             numpy_helper.from_array(draw(6), "b")] + list(tail_inits)
    conv_input = head[-1].output[0] if head else "x"
    nodes = list(head) + [helper.make_node("Conv", [conv_input, "w", "b"], ["c"], name="conv",
                                           pads=[1, 0, 1, 2])] + list(tail_nodes)
    return model(nodes, [tensor("x", [2, 3, 7, 6])], [tensor("y", None)], inits)


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


AFFINE_TAILS = {
    # (nodes after the convolution, their constants, whether they fold into it)
    "mul then add per channel (tf2onnx's batch norm)": (
        [helper.make_node("Mul", ["c", "s"], ["m"]), helper.make_node("Add", ["m", "t"], ["y"])],
        [_const("s", rand(1, 6, 1, 1)), _const("t", rand(6, 1, 1))], True),
    "constant first, then div and sub": (
        [helper.make_node("Mul", ["s", "c"], ["m"]), helper.make_node("Div", ["m", "d"], ["q"]),
         helper.make_node("Sub", ["q", "t"], ["y"])],
        [_const("s", rand(6, 1, 1)), _const("d", np.abs(rand(6, 1, 1)) + 1),
         _const("t", [2.5])], True),
    "batch norm then a scalar add": (
        [helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"]),
         helper.make_node("Add", ["n", "t"], ["y"])],
        [_const("g", rand(6)), _const("be", rand(6)), _const("mu", rand(6)),
         _const("var", np.abs(rand(6)) + 0.1), _const("t", 0.5)], True),
    "a constant varying along the width is not per channel": (
        [helper.make_node("Mul", ["c", "s"], ["y"])], [_const("s", rand(1, 1, 1, 6))], False),
    "a constant divided by the convolution is not affine": (
        [helper.make_node("Div", ["d", "c"], ["y"])], [_const("d", np.abs(rand(6, 1, 1)) + 1)],
        False),
}


@pytest.mark.parametrize("case", AFFINE_TAILS, ids=list(AFFINE_TAILS))
def test_per_channel_affine_layers_after_a_convolution_fold_into_it(case):
    nodes, inits, folds = AFFINE_TAILS[case]
    # values of their own, whatever ran before: dividing by the convolution's output magnifies
    # the float32 reference's rounding where that output is near 0, and some draws put an
    # element close enough to 0 for that to exceed the tolerance (these do not)
    rng = np.random.default_rng(11)
    proto = _conv_then(nodes, inits, rng=rng)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    [want] = onnx_reference(proto, {"x": x})
    net = loader.onnx.load_model(proto)
    layers = [layer.type for layer in net.layers]
    assert (layers.count("Convolution2d") == len(layers) - layers.count("Transpose")) == folds
    np.testing.assert_allclose(evaluate_network(net, {"x": x})["y"], want, rtol=1e-4, atol=1e-4)


BIAS_TAILS = {
    # (the Add after x [2, 6, 8] @ w [8, 6], its constant, whether FullyConnected takes it in)
    "a bias vector (a linear layer, as PyTorch exports it)": ("p", "bias", [6], True),
    "the bias first": ("bias", "p", [6], True),
    "a bias of shape [1, 1, 6]": ("p", "bias", [1, 1, 6], True),
    "a constant that varies along the rows": ("p", "bias", [6, 1], False),
    "a constant that adds an axis": ("p", "bias", [1, 1, 1, 6], False),
    "a scalar": ("p", "bias", [], False),
}


@pytest.mark.parametrize("case", BIAS_TAILS, ids=list(BIAS_TAILS))
def test_a_bias_added_after_a_matmul_becomes_the_fully_connected_bias(case):
    first, second, shape, folds = BIAS_TAILS[case]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]),
             helper.make_node("Add", [first, second], ["y"])]
    proto = model(nodes, [tensor("x", [2, 6, 8])], [tensor("y", None)],
                  [_const("w", rand(8, 6)), _const("bias", rand(*shape))])
    x = rand(2, 6, 8)
    [want] = onnx_reference(proto, {"x": x})
    net = loader.onnx.load_model(proto)
    layers = [layer.type for layer in net.layers]
    assert ("Addition" not in layers) == folds, layers
    assert layers.count("FullyConnected") == 1
    np.testing.assert_allclose(evaluate_network(net, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_a_bias_addition_with_an_attribute_it_does_not_know_is_refused_not_absorbed():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]),
             helper.make_node("Add", ["p", "bias"], ["y"], some_flag=1)]
    proto = model(nodes, [tensor("x", [5, 8])], [tensor("y", None)],
                  [_const("w", rand(8, 6)), _const("bias", rand(6))])
    with pytest.raises(loader.onnx.UnsupportedModelError, match="some_flag"):
        loader.onnx.load_model(proto)


def test_a_product_that_another_node_also_reads_keeps_its_addition():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]),
             helper.make_node("Add", ["p", "bias"], ["a"]),
             helper.make_node("Mul", ["p", "a"], ["y"])]
    proto = model(nodes, [tensor("x", [5, 8])], [tensor("y", None)],
                  [_const("w", rand(8, 6)), _const("bias", rand(6))])
    x = rand(5, 8)
    [want] = onnx_reference(proto, {"x": x})
    net = loader.onnx.load_model(proto)
    assert "Addition" in [layer.type for layer in net.layers]
    np.testing.assert_allclose(evaluate_network(net, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pads, mode, value, folds", [
    ([0, 0, 1, 2, 0, 0, 3, 0], "constant", None, True),      # zeros around H and W
    ([0, 0, 1, 2, 0, 0, 3, 0], "constant", 1.0, False),      # not zeros
    ([0, 0, 1, 2, 0, 0, 3, 0], "reflect", None, False),
    ([0, 1, 0, 0, 0, 0, 0, 0], "constant", None, False),     # pads the channels
])
def test_a_zero_pad_read_only_by_a_convolution_becomes_its_padding(pads, mode, value, folds):
    """The Pad's zeros and the Conv's own pads add up; any other Pad stays a layer."""
    inputs = ["x", "pads"] + (["v"] if value is not None else [])
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    if value is not None:
        inits.append(_const("v", value))
    head = [helper.make_node("Pad", inputs, ["p"], mode=mode)]
    channels = 3 + pads[1] + pads[5]
    proto = _conv_then([helper.make_node("Relu", ["c"], ["y"])], inits, head)
    if channels != 3:
        proto.graph.initializer[0].CopyFrom(numpy_helper.from_array(rand(6, channels, 3, 3), "w"))
    x = rand(2, 3, 7, 6)
    [want] = onnx_reference(proto, {"x": x})
    net = loader.onnx.load_model(proto)
    assert ("Pad" not in [layer.type for layer in net.layers]) == folds
    np.testing.assert_allclose(evaluate_network(net, {"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_a_pad_that_another_node_also_reads_stays_a_layer():
    inits = [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
    head = [helper.make_node("Pad", ["x", "pads"], ["p"])]
    proto = _conv_then([helper.make_node("ReduceMean", ["p"], ["r"], axes=[1, 2, 3]),
                        helper.make_node("Add", ["c", "r"], ["y"])], inits, head)
    x = rand(2, 3, 7, 6)
    [want] = onnx_reference(proto, {"x": x})
    net = loader.onnx.load_model(proto)
    assert "Pad" in [layer.type for layer in net.layers]
    np.testing.assert_allclose(evaluate_network(net, {"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def _attention_model(q, k, v, attributes, mask=None, past=None, outputs=1, frozen_mask=False):
    """One Attention node (opset 24) over run-time Q, K, V (and mask, past key and value)."""
    names = ["q", "k", "v"]
    inputs = [tensor("q", q), tensor("k", k), tensor("v", v)]
    inits = []
    if mask is not None or past is not None:
        names.append("mask" if mask is not None else "")
        if mask is not None and frozen_mask:
            inits.append(numpy_helper.from_array(mask, "mask"))
        elif mask is not None:
            elem = TensorProto.BOOL if mask.dtype == np.bool_ else TensorProto.FLOAT
            inputs.append(tensor("mask", mask.shape, elem))
    if past is not None:
        names += ["past_k", "past_v"]
        inputs += [tensor("past_k", past[0]), tensor("past_v", past[1])]
    out = ["y", "present_k", "present_v", "qk"][:outputs]
    node = helper.make_node("Attention", names, out, **attributes)
    return model([node], inputs, [tensor(n, None) for n in out], inits, opset=24)


ATTENTION_CASES = {
    "4-D, defaults": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), {}, None, None, 1),
    "3-D, grouped heads, causal, with a cache": (
        (2, 4, 12), (2, 4, 6), (2, 4, 6), {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1},
        None, ((2, 2, 3, 3), (2, 2, 3, 3)), 3),
    "float mask at run time with a row masked out": (
        (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), {"scale": 0.3}, "float-row", None, 1),
    "short boolean mask as a constant": (
        (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), {}, "bool-short", None, 1),
    "soft cap, scores after the bias": (
        (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4),
        {"softcap": 2.0, "qk_matmul_output_mode": 2, "is_causal": 1}, None, None, 4),
    "probabilities out, sliding window": (
        (1, 1, 6, 4), (1, 1, 6, 4), (1, 1, 6, 4),
        {"qk_matmul_output_mode": 3, "left_window_size": 1, "right_window_size": 0}, None,
        None, 4),
}


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=list(ATTENTION_CASES))
def test_attention_computes_what_onnx_computes(case):
    q, k, v, attributes, mask_kind, past, outputs = ATTENTION_CASES[case]
    if attributes.get("left_window_size") is not None and \
            "left_window_size" not in {a.name for a in
                                       __import__("onnx").defs.get_schema("Attention").attributes
                                       .values()}:
        pytest.skip("this onnx has no sliding-window attention")
    feeds = {"q": rand(*q), "k": rand(*k), "v": rand(*v)}
    mask, frozen = None, False
    if mask_kind == "float-row":
        mask = rand(1, 1, q[2], k[2])
        mask[0, 0, 1, :] = -np.inf                 # query 1 may attend to nothing: zeros
        feeds["mask"] = mask
    elif mask_kind == "bool-short":
        mask, frozen = RNG.random((q[2], k[2] - 2)) > 0.3, True
    if past is not None:
        feeds["past_k"], feeds["past_v"] = rand(*past[0]), rand(*past[1])
    proto = _attention_model(q, k, v, attributes, mask, past, outputs, frozen)
    want = onnx_reference(proto, feeds)
    net = loader.onnx.load_model(proto)
    got = evaluate_network(net, feeds)
    for name, expected in zip(["y", "present_k", "present_v", "qk"], want):
        assert np.all(np.isfinite(got[name]) == np.isfinite(expected)), name
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)
    if mask_kind == "float-row":
        assert not np.any(got["y"][0, :, 1]) and np.any(got["y"][0, :, 0])


def test_attention_refuses_what_it_cannot_express_faithfully():
    """Scores before a soft cap (mode 0): ONNX's specification and its reference evaluator
    disagree on them; a softmax in half precision."""
    for attributes, words in [({"softcap": 2.0}, "qk_matmul_output_mode 0 and a softcap"),
                              ({"softmax_precision": 10}, "softmax_precision 10")]:
        proto = _attention_model((1, 1, 2, 4), (1, 1, 2, 4), (1, 1, 2, 4), attributes,
                                 outputs=4)
        with pytest.raises(loader.onnx.UnsupportedModelError, match=words):
            loader.onnx.load_model(proto)


@pytest.mark.parametrize("condition, picks", [(True, "a"), (False, "b"), (None, None)])
def test_where_with_a_constant_condition_picks_a_run_time_operand(condition, picks):
    cond = np.array([[True, False, True]]) if condition is None else np.full((2, 1), condition)
    proto = model([helper.make_node("Where", ["c", "a", "b"], ["y"])],
                  [tensor("a", [1, 3]), tensor("b", [2, 3])], [tensor("y", None)],
                  [numpy_helper.from_array(cond, "c")])
    a = np.array([[-0.0, np.nan, np.inf]], np.float32)
    b = rand(2, 3)
    if picks is None:
        with pytest.raises(loader.onnx.UnsupportedModelError, match="differs between elements"):
            loader.onnx.load_model(proto)
        return
    got = evaluate_network(loader.onnx.load_model(proto), {"a": a, "b": b})["y"]
    want = np.broadcast_to(a if picks == "a" else b, (2, 3))
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))     # -0 stays -0
