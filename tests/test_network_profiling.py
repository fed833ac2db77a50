"""Rule 12.7: profiling. The runtime's events (the run, each step) and the backends' own events,
named by the layers they cover (debug handles mapped back to names), checked before they are
kept, and written as Chrome trace event JSON."""
import json
import logging
import time

import numpy as np
import pytest

import loader
from helpers import install_mock, install_reference

F = np.float32
RNG = np.random.default_rng(11)


def two_backend_network():
    """conv1+relu1 on MockPartial; pool, flatten and fc+act2 (fused) in one program on CpuRef."""
    net = loader.Network()
    x = net.add_input("x", (1, 8, 8, 3))
    w1 = net.add_constant("w1", RNG.standard_normal((4, 3, 3, 3)).astype(F))
    wf = net.add_constant("wf", RNG.standard_normal((10, 64)).astype(F))
    y = net.add_layer("Convolution2d", [x, w1], {"padding": 1}, name="conv1")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu1")
    y = net.add_layer("Pooling2d", [y], {"pool": "max", "kernel": 2, "stride": 2}, name="pool")
    y = net.add_layer("Reshape", [y], {"shape": [1, 64]}, name="flatten")
    y = net.add_layer("FullyConnected", [y, wf], {}, name="fc")
    y = net.add_layer("Activation", [y], {"function": "sigmoid"}, name="act2")
    net.add_output(y, "y")
    return net


def relu_chain():
    net = loader.Network()
    t = net.add_input("x", (2, 5))
    for i in range(3):
        t = net.add_layer("Activation", [t], {"function": "relu"}, name=f"relu{i}")
    net.add_output(t, "y")
    return net


@pytest.fixture
def runtime(backend_dir):
    install_reference(backend_dir)
    install_mock("partial", backend_dir)
    install_mock("profiling_bad_events", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        yield rt


def test_backend_events_name_the_layers_they_cover(runtime):
    net = two_backend_network()
    with runtime.load_network(net, backends=["MockPartial", "CpuRef"]) as loaded:
        before = time.monotonic_ns()
        loaded.execute({"x": RNG.standard_normal((1, 8, 8, 3)).astype(F)}, profile=True)
        after = time.monotonic_ns()
        profile = loaded.last_profile
    backend_events = [e for e in profile if e.source == "backend"]
    # one event per step of CpuRef's program, in execution order
    assert [(e.backend, e.name, e.layers) for e in backend_events] == [
        ("CpuRef", "Pooling2d", ("pool",)), ("CpuRef", "Reshape", ("flatten",)),
        ("CpuRef", "fused FullyConnected", ("fc", "act2"))]
    run = profile[0]
    assert (run.name, run.backend) == ("execute", None)
    for e in profile:
        assert before <= run.start_ns <= e.start_ns <= e.end_ns <= run.end_ns <= after
    assert set().union(*(e.layers for e in profile[1:])) == {layer.name for layer in net.layers}
    assert loaded.last_counters[("CpuRef", "macs")] == 64 * 10


def test_an_unprofiled_execution_leaves_the_backends_silent(runtime):
    with runtime.load_network(two_backend_network(), backends=["MockPartial", "CpuRef"]) as loaded:
        x = {"x": np.ones((1, 8, 8, 3), F)}
        loaded.execute(x)
        assert loaded.last_profile is None
        loaded.execute(x, profile=True)
        assert len([e for e in loaded.last_profile if e.source == "backend"]) == 3


def test_bad_backend_events_are_dropped_with_a_warning(runtime, caplog):
    with runtime.load_network(relu_chain(), backends=["MockProfilingBadEvents"]) as loaded:
        with caplog.at_level(logging.WARNING, logger="loader"):
            loaded.execute({"x": np.ones((2, 5), F)}, profile=True)
    kept = [e for e in loaded.last_profile if e.source == "backend"]
    assert [(e.name, e.layers) for e in kept] == [("good", ("relu0",))]
    problems = loaded.profile_problems
    assert len(problems) == 3
    assert "not layers this backend runs" in problems[0]
    assert "before it starts" in problems[1]
    assert "outside the execution" in problems[2]
    assert "dropped" in caplog.text
    assert loaded.last_counters == {("MockProfilingBadEvents", "events"): 4}


def test_save_trace_writes_chrome_trace_events(runtime, tmp_path):
    with runtime.load_network(two_backend_network(), backends=["MockPartial", "CpuRef"]) as loaded:
        with pytest.raises(loader.BackendError, match="no profile yet"):
            loaded.save_trace(tmp_path / "none.json")
        loaded.execute({"x": np.ones((1, 8, 8, 3), F)}, profile=True)
        loaded.save_trace(tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    tracks = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e["name"] == "thread_name"}
    assert sorted(tracks.values()) == ["CpuRef", "runtime"]
    by_track = {}
    for e in spans:
        by_track.setdefault(tracks[e["tid"]], []).append(e["name"])
    assert by_track["CpuRef"] == ["pool", "flatten", "fc+act2"]
    assert by_track["runtime"] == ["execute", "conv1+relu1", "pool+flatten+fc+act2"]
    assert all(e["dur"] >= 0 and isinstance(e["ts"], float) for e in spans)
    assert [e["name"] for e in trace["traceEvents"] if e["ph"] == "C"] == ["macs"]
