"""Networks (docs/networks.md): building and serializing them, assignment
across backends in preference order, sub-graphs, the check of a backend's optimization views,
fallback of failed layers, the lifecycle of a loaded network, and execution against NumPy."""
import json
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loader
from conformance.network_reference import evaluate_network
from loader.networks import planning
from helpers import install_mock, install_reference

F = np.float32
RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(F)


def relu_chain(length=3, shape=(2, 5)):
    net = loader.Network()
    t = net.add_input("x", shape)
    for i in range(length):
        t = net.add_layer("Activation", [t], {"function": "relu"}, name=f"relu{i}")
    net.add_output(t, "y")
    return net


def conv_network():
    """conv1 -> relu1 -> pool -> sigmoid -> conv2 (+bias) -> leaky -> fc-free tail."""
    net = loader.Network()
    x = net.add_input("x", (1, 8, 8, 3))
    w1 = net.add_constant("w1", rand(4, 3, 3, 3))
    w2 = net.add_constant("w2", rand(5, 3, 3, 4))
    b2 = net.add_constant("b2", rand(5))
    y = net.add_layer("Convolution2d", [x, w1], {"padding": 1}, name="conv1")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu1")
    y = net.add_layer("Pooling2d", [y], {"pool": "max", "kernel": 2, "stride": 2}, name="pool")
    y = net.add_layer("Activation", [y], {"function": "sigmoid"}, name="sigmoid")
    y = net.add_layer("Convolution2d", [y, w2, b2], {"padding": 1}, name="conv2")
    y = net.add_layer("Activation", [y], {"function": "leaky_relu", "a": 0.1}, name="leaky")
    net.add_output(y, "y")
    return net


@pytest.fixture
def runtime(backend_dir):
    """CpuRef and the partial backend."""
    install_reference(backend_dir)
    install_mock("partial", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        yield rt


def close(actual, expected):
    return np.allclose(actual, expected, rtol=1e-4, atol=1e-5)


# -- building and the serialized form (section 11, rule 12.10) -----------------------------------

def test_the_documented_example_round_trips(tmp_path):
    net = conv_network()
    d = net.to_dict()
    json.dumps(d)
    assert loader.Network.from_dict(d).to_dict() == d
    for name in ("net.json", "net.yaml"):
        net.save(tmp_path / name)
        assert loader.Network.load(tmp_path / name).to_dict() == d
    saved = json.loads((tmp_path / "net.json").read_text())
    assert [c["data"] for c in saved["constants"]] == ["w1", "w2", "b2"]


@pytest.mark.parametrize("build, message", [
    (lambda n: n.add_layer("Activation", ["nowhere"], {"function": "relu"}), "unknown tensor"),
    (lambda n: n.add_input("x", (2, 5)), "duplicate name"),
    (lambda n: n.add_layer("Addition", ["x"]), "takes inputs"),
    (lambda n: n.add_layer("Activation", ["x"], {"function": "cube"}), "'function'"),
    (lambda n: n.add_layer("FullyConnected", ["x", n.add_constant("w", rand(3, 4))]), "K ="),
    (lambda n: n.add_layer("Activation", ["x"], {"funktion": "relu"}), "unknown descriptor key"),
])
def test_malformed_layers_are_refused_when_added(build, message):
    net = loader.Network()
    net.add_input("x", (2, 5))
    with pytest.raises(loader.NetworkError, match=message) as error:
        build(net)
    assert isinstance(error.value, ValueError) and isinstance(error.value, loader.BackendError)


def test_an_unknown_layer_type_is_an_unknown_layer_error():
    net = loader.Network()
    net.add_input("x", (2,))
    with pytest.raises(loader.UnknownLayerError):
        net.add_layer("Dropout", ["x"])


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["layers"][0].update(inputs=["relu2"]), "cycle"),
    (lambda d: d["layers"][1].update(inputs=["ghost"]), "unknown tensor"),
    (lambda d: d["layers"].append(dict(d["layers"][0])), "duplicate name"),
    (lambda d: d.pop("outputs"), "lacks 'outputs'"),
    (lambda d: d["inputs"][0].pop("shape"), "lacks 'shape'"),
])
def test_malformed_dicts_raise_network_error(mutate, message):
    d = relu_chain().to_dict()
    mutate(d)
    with pytest.raises(loader.NetworkError, match=message):
        loader.Network.from_dict(d)


# -- rule 12.2: grouping without cycles ------------------------------------------------------------

def grouping(edges, backend_of):
    """Groups of a small layer graph given as edges between layer names."""
    net = loader.Network()
    net.add_input("x", (2,))
    names = sorted(backend_of)
    for name in names:
        sources = [a for a, b in edges if b == name] or ["x"]
        if len(sources) == 1:
            net.add_layer("Activation", sources, {"function": "relu"}, name=name)
        else:
            net.add_layer("Addition", sources, name=name)
    graph = planning.Graph(net)
    index = {layer.name: i for i, layer in enumerate(graph.layers)}
    groups = planning.group_layers(graph, {index[n]: b for n, b in backend_of.items()})
    return sorted(sorted(graph.layers[i].name for i in g) for g in groups)


def _unit_graph_is_acyclic(graph, groups):
    """Whether the graph with each group contracted to one node has no cycle."""
    owner = {i: ("g", k) for k, g in enumerate(groups) for i in g}
    node = lambda i: owner.get(i, ("l", i))  # noqa: E731
    edges = {}
    for i in range(len(graph.layers)):
        for p in graph.predecessors[i]:
            if node(p) != node(i):
                edges.setdefault(node(p), set()).add(node(i))
    state = {}

    def visit(n):
        state[n] = 1
        for m in edges.get(n, ()):
            if state.get(m) == 1 or (m not in state and not visit(m)):
                return False
        state[n] = 2
        return True
    return all(visit(n) for n in list(edges) if n not in state)


@settings(max_examples=400, deadline=None)
@given(st.integers(2, 14).flatmap(lambda n: st.tuples(
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n),
    st.lists(st.sampled_from("AB"), min_size=n, max_size=n))))
def test_grouping_is_a_partition_into_connected_acyclic_maximal_subgraphs(case):
    edges, backends = case
    net = loader.Network()
    net.add_input("x", (2,))
    names = [f"l{i}" for i in range(len(backends))]
    for i, name in enumerate(names):   # edges only go forward: the layer graph is a DAG
        sources = sorted({names[a] for a, b in edges if a < b == i}) or ["x"]
        net.add_layer("Activation", sources[:1], {"function": "relu"}, name=name) \
            if len(sources) == 1 else net.add_layer("Addition", sources[:2], name=name)
    graph = planning.Graph(net)
    backend_of = dict(enumerate(backends))
    groups = planning.group_layers(graph, backend_of)
    assert sorted(i for g in groups for i in g) == list(range(len(backends)))
    for g in groups:
        assert len({backend_of[i] for i in g}) == 1
        inside = set(g)                  # connected, ignoring direction
        reached, stack = set(), [g[0]]
        while stack:
            i = stack.pop()
            if i not in reached:
                reached.add(i)
                stack += [j for j in graph.predecessors[i] + graph.successors[i] if j in inside]
        assert reached == inside
    assert _unit_graph_is_acyclic(graph, groups)
    # maximal: no two groups joined by an edge could merge without a cycle
    for k, g in enumerate(groups):
        for h in groups[k + 1:]:
            if backend_of[g[0]] == backend_of[h[0]] and any(
                    j in h for i in g for j in graph.successors[i] + graph.predecessors[i]):
                merged = [x for x in groups if x is not g and x is not h] + [sorted(g + h)]
                assert not _unit_graph_is_acyclic(graph, merged), (g, h)


def test_a_b_c_with_a_and_c_on_one_backend_gives_three_subgraphs():
    edges = [("a", "b"), ("b", "c"), ("a", "c")]
    assert grouping(edges, {"a": "A", "b": "B", "c": "A"}) == [["a"], ["b"], ["c"]]


def test_connected_layers_of_one_backend_form_one_subgraph():
    edges = [("a", "b"), ("b", "c"), ("a", "d"), ("c", "d")]
    assert grouping(edges, {"a": "A", "b": "A", "c": "A", "d": "A"}) == [["a", "b", "c", "d"]]
    assert grouping(edges, {"a": "A", "b": "A", "c": "B", "d": "A"}) == [["a", "b"], ["c"], ["d"]]


# -- execution against NumPy ---------------------------------------------------------------------

def test_a_network_on_the_reference_backend_gives_numpys_result(runtime):
    net = conv_network()
    x = rand(1, 8, 8, 3)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert set(loaded.assignments.values()) == {"CpuRef"}
        out = loaded.execute({"x": x})
        again = loaded.execute({"x": x})
    assert close(out["y"], evaluate_network(net, {"x": x})["y"])
    assert out["y"] is not again["y"] and np.array_equal(out["y"], again["y"])


def test_a_network_split_across_the_partial_backend_and_cpuref(runtime):
    net = conv_network()
    x = rand(1, 8, 8, 3)
    with runtime.load_network(net, backends=["MockPartial", "CpuRef"]) as loaded:
        out = loaded.execute({"x": x})
        assert loaded.assignments == {"conv1": "MockPartial", "relu1": "MockPartial",
                                      "pool": "CpuRef", "sigmoid": "CpuRef",
                                      "conv2": "MockPartial", "leaky": "MockPartial"}
        assert [(s.backend, s.kind, s.layers) for s in loaded.plan][0] == \
            ("MockPartial", "compiled", ("conv1", "relu1"))
        assert "no sigmoid" in loaded.declined["sigmoid"]["MockPartial"]
        assert "only Convolution2d and Activation" in loaded.declined["pool"]["MockPartial"]
    assert close(out["y"], evaluate_network(net, {"x": x})["y"])


def test_a_failed_layer_falls_back_to_the_next_backend(runtime):
    net = loader.Network()
    x = net.add_input("x", (1, 4, 4, 2))
    y = net.add_layer("Activation", [x], {"function": "relu"}, name="lonely_relu")
    net.add_output(y, "y")
    with runtime.load_network(net, backends=["MockPartial", "CpuRef"]) as loaded:
        assert loaded.assignments == {"lonely_relu": "CpuRef"}
        assert "right after its own convolution" in loaded.failed["lonely_relu"]["MockPartial"]
        assert [(s.backend, s.kind) for s in loaded.plan] == [("CpuRef", "compiled")]
        xa = rand(1, 4, 4, 2)
        assert np.array_equal(loaded.execute({"x": xa})["y"], np.maximum(xa, 0))


def test_a_layer_no_backend_takes_names_every_reason(runtime):
    net = loader.Network()
    x = net.add_input("x", (2, 3))
    net.add_output(net.add_layer("Softmax", [x], name="soft"), "y")
    with pytest.raises(loader.NoBackendForLayerError, match="soft") as error:
        runtime.load_network(net, backends=["MockPartial"])
    assert isinstance(error.value, LookupError) and "MockPartial" in str(error.value)


def test_an_unregistered_backend_name_raises_backend_not_found(runtime):
    with pytest.raises(loader.BackendNotFoundError, match="AcmeNpu"):
        runtime.load_network(relu_chain(), backends=["AcmeNpu", "CpuRef"])


# -- rule 12.3: every network mock refused under the rule it breaks ---------------------------------

@pytest.mark.parametrize("stem, message", [
    ("views_miss_a_layer", "in no view"),
    ("views_claim_a_layer_twice", "more than once"),
    ("views_name_a_layer_not_offered", "not offered"),
    ("substitution_wrong_boundary", "boundary inputs"),
])
def test_invalid_views_are_refused(backend_dir, stem, message):
    install_mock(stem, backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        [backend_id] = rt.backend_ids
        with pytest.raises(loader.InvalidOptimizationError, match=message) as error:
            rt.load_network(relu_chain())
    assert backend_id in str(error.value)


def test_a_compiled_subgraph_that_dies_with_its_instance_fails_at_execute(backend_dir):
    install_mock("compiled_dies_with_instance", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        with rt.load_network(relu_chain()) as loaded:
            assert [s.kind for s in loaded.plan] == ["compiled"]
            with pytest.raises(loader.InvalidStateError, match="instance .* destroyed"):
                loaded.execute({"x": rand(2, 5)})


def test_a_wrong_compiled_subgraph_is_accepted_but_differs_from_numpy(backend_dir):
    install_mock("compiled_wrong_result", backend_dir)
    net = relu_chain()
    x = rand(2, 5)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        with rt.load_network(net) as loaded:
            out = loaded.execute({"x": x})
    assert not close(out["y"], evaluate_network(net, {"x": x})["y"])


# -- 1.0, 1.1 and 1.2 builds side by side ----------------------------------------------------------

def test_older_minor_versions_load_beside_12_and_never_receive_subgraphs(backend_dir):
    install_mock("minor_older", backend_dir)
    install_mock("minor_previous", backend_dir)
    install_mock("compiled_wrong_result", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        versions = {b: str(rt.create_backend(b).version) for b in rt.backend_ids}
        assert versions == {"MockMinorOlder": "1.0", "MockMinorPrevious": "1.1",
                            "MockCompiledWrongResult": str(loader.BACKEND_API_VERSION)}
        assert rt.create_backend("MockMinorPrevious").features["SubgraphOptimization"] is False
        net = relu_chain()
        with rt.load_network(net, backends=["MockMinorOlder", "MockMinorPrevious"]) as loaded:
            assert set(loaded.assignments.values()) == {"MockMinorPrevious"}
            assert [s.kind for s in loaded.plan] == ["workload"] * 3
            assert "1.0" in loaded.declined["relu0"]["MockMinorOlder"]
            x = rand(2, 5)
            assert np.array_equal(loaded.execute({"x": x})["y"], np.maximum(x, 0))


@pytest.mark.parametrize("layer, shapes, descriptor", [
    ("Subtraction", [(2, 3), (2, 3)], None),
    ("Concatenation", [(2, 3), (2, 3)], {"axis": 0}),
    ("Softmax", [(2, 3)], {"axis": 0}),
    ("Softmax", [(2, 3)], {"log": True}),
    ("Convolution2d", [(1, 4, 4, 2), (2, 1, 1, 1)], {"groups": 2}),
    ("Pooling2d", [(1, 4, 4, 2)], {"pool": "max", "kernel": 3, "ceil_mode": True}),
    ("Pooling2d", [(1, 4, 4, 2)], {"pool": "l2", "kernel": 2}),
    ("Activation", [(2, 3)], {"function": "gelu"}),
])
def test_a_12_backend_is_never_offered_what_13_added(backend_dir, layer, shapes, descriptor):
    install_mock("minor_1_2_says_yes", backend_dir)
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        old = rt.create_backend("MockMinor12SaysYes")
        support = old.is_layer_supported(layer, shapes, descriptor)
        assert not support and "not supported by this backend's API version" in support.reason
        assert "needs Backend API 1.3" in support.reason
        with pytest.raises(loader.LayerNotSupportedError, match="API version"):
            old.create_workload_factory().create_workload(layer, shapes, descriptor)
        # what 1.2 could already express is asked of the backend itself (it says yes)
        assert old.is_layer_supported("Softmax", [(2, 3)], {"axis": -1, "log": False})
        assert old.is_layer_supported("Convolution2d", [(1, 4, 4, 2), (2, 1, 1, 2)], {"groups": 1})
        net = loader.Network()
        inputs = [net.add_input(f"x{i}", shape) if i == 0 or layer not in ("Convolution2d",)
                  else net.add_constant(f"w{i}", rand(*shape)) for i, shape in enumerate(shapes)]
        net.add_output(net.add_layer(layer, inputs, descriptor, name="it"), "y")
        with rt.load_network(net, backends=["MockMinor12SaysYes", "CpuRef"]) as loaded:
            assert loaded.assignments == {"it": "CpuRef"}
            assert "API version" in loaded.declined["it"]["MockMinor12SaysYes"]


# -- rule 12.5: lifecycle ------------------------------------------------------------------------

def test_unload_is_idempotent_and_execute_after_it_says_so(runtime):
    loaded = runtime.load_network(relu_chain())
    loaded.unload()
    loaded.unload()
    with pytest.raises(loader.BackendError, match="unloaded"):
        loaded.execute({"x": rand(2, 5)})


def test_closing_the_runtime_unloads_its_networks(backend_dir):
    install_reference(backend_dir)
    rt = loader.Runtime(dynamic_backends_path=str(backend_dir))
    loaded = rt.load_network(relu_chain())
    rt.close()
    assert loaded.unloaded


def test_network_ids_are_distinct_and_contexts_balance(runtime):
    a, b = runtime.load_network(relu_chain()), runtime.load_network(relu_chain())
    assert a.id != b.id
    a.unload()
    b.unload()
    # The reference context refuses unbalanced notifications: a third load proves it is idle.
    runtime.load_network(relu_chain()).unload()


# -- rule 12.10: inputs at execute ---------------------------------------------------------------

@pytest.mark.parametrize("inputs, message", [
    ({}, "missing"),
    ({"x": np.zeros((2, 5), F), "z": np.zeros(1, F)}, "unknown"),
    ({"x": np.zeros((2, 5), np.float64)}, "float32"),
    ({"x": np.zeros((5, 2), F)}, "shape"),
])
def test_wrong_inputs_at_execute_raise_network_error(runtime, inputs, message):
    with runtime.load_network(relu_chain()) as loaded:
        with pytest.raises(loader.NetworkError, match=message):
            loaded.execute(inputs)


# -- planning: buffers are reused ----------------------------------------------------------------

def test_intermediate_buffers_between_workloads_are_reused(backend_dir):
    install_mock("minor_previous", backend_dir)          # no optimizer: one workload per layer
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        with rt.load_network(relu_chain(length=6)) as loaded:
            assert [s.kind for s in loaded.plan] == ["workload"] * 6
            plan = loaded.buffer_plan
            assert plan.arena_bytes < plan.unshared_bytes
            assert len(set(plan.offsets.values())) == 2  # ping-pong between two buffers


def test_the_reference_backend_runs_its_whole_subgraph_as_one_program(runtime):
    net = conv_network()
    x = rand(1, 8, 8, 3)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [(s.backend, s.kind, s.layers) for s in loaded.plan] == [
            ("CpuRef", "compiled", tuple(layer.name for layer in net.layers))]
        assert loaded.buffer_plan.offsets == {}          # the intermediates live in the program
        out = loaded.execute({"x": x})
    assert close(out["y"], evaluate_network(net, {"x": x})["y"])


def test_a_program_keeps_an_intermediate_that_is_also_a_network_output(runtime):
    net = loader.Network()
    x = net.add_input("x", (2, 6))
    a = net.add_layer("Activation", [x], {"function": "relu"}, name="relu")
    b = net.add_layer("Activation", [a], {"function": "sigmoid"}, name="sigmoid")
    c = net.add_layer("Addition", [a, b], name="add")
    d = net.add_layer("Multiplication", [c, x], name="mul")
    net.add_output(a, "a")
    net.add_output(d, "d")
    xa = rand(2, 6)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [s.kind for s in loaded.plan] == ["compiled"]
        out = loaded.execute({"x": xa})
    want = evaluate_network(net, {"x": xa})
    assert close(out["a"], want["a"]) and close(out["d"], want["d"])


def test_a_long_chain_in_one_program_matches_numpy(runtime):
    """Many short-lived intermediates share the program's arena: a wrong overlap shows here."""
    net = loader.Network()
    x = net.add_input("x", (3, 7))
    t, keep = x, []
    for i in range(12):
        t = net.add_layer("Activation", [t], {"function": "tanh" if i % 2 else "sigmoid"},
                          name=f"act{i}")
        keep.append(t)
        if i >= 3:
            t = net.add_layer("Addition", [t, keep[i - 3]], name=f"skip{i}")
    net.add_output(t, "y")
    xa = rand(3, 7)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [s.kind for s in loaded.plan] == ["compiled"]
        out = loaded.execute({"x": xa})
    assert close(out["y"], evaluate_network(net, {"x": xa})["y"])


# -- rule 12.9: thread safety --------------------------------------------------------------------

def test_execute_from_several_threads(runtime):
    net = conv_network()
    with runtime.load_network(net, backends=["MockPartial", "CpuRef"]) as loaded:
        xs = [rand(1, 8, 8, 3) for _ in range(4)]
        expected = [loaded.execute({"x": x})["y"] for x in xs]
        results, errors = {}, []

        def work(k):
            try:
                for _ in range(5):
                    results[k] = loaded.execute({"x": xs[k]})["y"]
                    assert np.array_equal(results[k], expected[k])
            except BaseException as error:  # noqa: BLE001 - reported below
                errors.append(error)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors


def test_a_substitution_that_a_path_leaves_and_reenters_is_refused():
    """a -> b -> c and a -> c on one backend: replacing {a, c} alone would need b's output
    before b can run."""
    net = loader.Network()
    x = net.add_input("x", (2,))
    a = net.add_layer("Activation", [x], {"function": "relu"}, name="a")
    b = net.add_layer("Activation", [a], {"function": "relu"}, name="b")
    net.add_output(net.add_layer("Addition", [a, b], name="c"), "y")
    graph = planning.Graph(net)
    spec = planning.describe_subgraph(graph, "Acme", [0, 1, 2])
    position = {name: k for k, (name, _, _) in enumerate(spec.tensors)}
    views = planning.Views(substitutions=[([0, 2], [position["x"], position["b"]],
                                           [position["a"], position["c"]],
                                           object())], untouched=[1])
    with pytest.raises(loader.InvalidOptimizationError, match="not convex"):
        planning.validate_views(graph, spec, views)
    views.substitutions = [([0, 1, 2], [position["x"]], [position["c"]], object())]
    views.untouched = []
    planning.validate_views(graph, spec, views)      # the whole chain is fine


def test_outputs_may_expose_an_input_and_one_tensor_twice(runtime):
    net = loader.Network()
    x = net.add_input("x", (3,))
    y = net.add_layer("Activation", [x], {"function": "relu"}, name="relu")
    net.add_output(x, "echo")
    net.add_output(y, "y")
    net.add_output(y, "relu")
    a = np.array([-1, 0, 2], F)
    with runtime.load_network(net) as loaded:
        out = loaded.execute({"x": a})
    assert out["echo"] is not a and np.array_equal(out["echo"], a)
    assert np.array_equal(out["y"], [0, 0, 2]) and np.array_equal(out["relu"], [0, 0, 2])
    assert out["y"] is not out["relu"]


def test_memory_managers_are_acquired_while_loaded(runtime):
    loaded = runtime.load_network(relu_chain(), backends=["CpuRef"])
    [manager] = loaded._managers
    assert manager.acquired == 1
    loaded.unload()
    with pytest.raises(loader.BackendError, match="closed"):
        manager.acquire()


def test_every_context_hears_each_network_load_and_unload_in_order(runtime):
    host = runtime._network_host()
    contexts = host.contexts()
    assert set(contexts) == {"CpuRef"}         # MockPartial offers none
    calls = []

    class Recorder:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, event):
            def call(network_id):
                calls.append((event, network_id))
                getattr(self.inner, event)(network_id)
            return call

    host._contexts = {k: Recorder(v) for k, v in contexts.items()}
    try:
        loaded = runtime.load_network(relu_chain(), backends=["MockPartial", "CpuRef"])
        loaded.unload()
    finally:
        host._contexts = contexts
    n = loaded.id
    assert calls == [("before_load_network", n), ("after_load_network", n),
                     ("before_unload_network", n), ("after_unload_network", n)]


def test_two_substitutions_that_need_each_other_are_refused():
    """a -> b and c -> d with {a, d} and {b, c} substituted: each is convex, but each needs the
    other's output first."""
    net = loader.Network()
    x = net.add_input("x", (2,))
    a = net.add_layer("Activation", [x], {"function": "relu"}, name="a")
    net.add_layer("Activation", [a], {"function": "relu"}, name="b")
    c = net.add_layer("Activation", [x], {"function": "relu"}, name="c")
    net.add_layer("Activation", [c], {"function": "relu"}, name="d")
    net.add_output(net.tensor("b"), "b")
    net.add_output(net.tensor("d"), "d")
    graph = planning.Graph(net)
    spec = planning.describe_subgraph(graph, "Acme", [0, 1, 2, 3])
    t = {name: k for k, (name, _, _) in enumerate(spec.tensors)}
    views = planning.Views(substitutions=[
        ([0, 3], [t["x"], t["c"]], [t["a"], t["d"]], object()),
        ([1, 2], [t["x"], t["a"]], [t["b"], t["c"]], object())])
    with pytest.raises(loader.InvalidOptimizationError, match="each need the other"):
        planning.validate_views(graph, spec, views)
