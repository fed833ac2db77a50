"""``backend-loader plan`` and ``backend-loader run`` (docs/networks.md)."""
import json

import numpy as np
import pytest

from conformance.network_reference import evaluate_network
from helpers import install_mock, install_reference, run_module
from test_networks import conv_network, rand


def setup(tmp_path, backend_dir):
    install_reference(backend_dir)
    install_mock("partial", backend_dir)
    net = conv_network()
    net.save(tmp_path / "net.json")
    return net, str(tmp_path / "net.json")


def test_plan_json_shows_assignment_reasons_and_steps(tmp_path, backend_dir):
    _, path = setup(tmp_path, backend_dir)
    result = run_module("plan", path, "--path", str(backend_dir), "--backends",
                        "MockPartial,CpuRef", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    layers = {layer["name"]: layer for layer in plan["layers"]}
    assert layers["pool"]["backend"] == "CpuRef"
    assert "only Convolution2d and Activation" in layers["pool"]["declined"]["MockPartial"]
    assert layers["conv1"] == {"name": "conv1", "type": "Convolution2d", "backend": "MockPartial",
                               "declined": {}}
    assert plan["steps"][0] == {"backend": "MockPartial", "kind": "compiled",
                                "layers": ["conv1", "relu1"]}


def test_plan_text_names_the_fallback(tmp_path, backend_dir):
    net = conv_network()
    d = net.to_dict()
    # an Activation that follows the pooling: MockPartial accepts it, its optimizer fails it
    d["layers"][3]["descriptor"] = {"function": "relu"}
    import loader
    loader.Network.from_dict(d).save(tmp_path / "net.yaml")
    install_reference(backend_dir)
    install_mock("partial", backend_dir)
    result = run_module("plan", str(tmp_path / "net.yaml"), "--path", str(backend_dir),
                        "--backends", "MockPartial,CpuRef")
    assert result.returncode == 0, result.stderr
    assert "Failed layers:" in result.stdout
    assert "sigmoid on MockPartial: MockPartial runs an Activation only right after" in result.stdout


def test_run_writes_numpys_result(tmp_path, backend_dir):
    net, path = setup(tmp_path, backend_dir)
    x = rand(1, 8, 8, 3)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    result = run_module("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--path",
                        str(backend_dir), "--backends", "MockPartial,CpuRef", "--output-dir",
                        str(out), "--profile", str(tmp_path / "trace.json"))
    assert result.returncode == 0, result.stderr
    y = np.load(out / "y.npy")
    assert np.allclose(y, evaluate_network(net, {"x": x})["y"], rtol=1e-4, atol=1e-5)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"} == \
        {"runtime", "MockPartial", "CpuRef"}


def test_run_failures_exit_1_and_usage_errors_exit_2(tmp_path, backend_dir):
    _, path = setup(tmp_path, backend_dir)
    missing_input = run_module("run", path, "--path", str(backend_dir))
    assert missing_input.returncode == 1 and "missing ['x']" in missing_input.stderr
    no_file = run_module("plan", str(tmp_path / "absent.json"), "--path", str(backend_dir))
    assert no_file.returncode == 1 and "absent.json" in no_file.stderr
    no_backend = run_module("plan", path, "--path", str(backend_dir), "--backends", "Nobody")
    assert no_backend.returncode == 1 and "Nobody" in no_backend.stderr
    assert run_module("run").returncode == 2


def test_the_network_example_splits_and_matches_numpy():
    import os
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "examples", "pipeline.py")
    result = subprocess.run([sys.executable, example], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MockPartial  compiled  conv1 + relu1" in result.stdout
    assert "its optimizer failed the layer" in result.stdout


@pytest.mark.parametrize("option, make, words", [
    ("--profile", lambda tmp: str(tmp / "missing" / "t.json"), "the directory"),
    ("--profile", lambda tmp: str(tmp), "is a directory"),
    ("--output-dir", lambda tmp: str(tmp / "net.json"), "exists and is not a directory"),
    ("--output-dir", lambda tmp: str(tmp / "net.json" / "out"), "cannot be created"),
])
def test_run_checks_where_it_will_write_before_loading_anything(tmp_path, option, make, words):
    net = conv_network()
    net.save(tmp_path / "net.json")
    np.save(tmp_path / "x.npy", rand(1, 8, 8, 3))
    result = run_module("run", str(tmp_path / "net.json"), "--input", f"x={tmp_path / 'x.npy'}",
                        option, make(tmp_path), "--backends", "NoSuchBackend")
    # a usage error about the path, not the unknown backend that loading would meet first
    assert result.returncode == 2, result.stderr
    assert f"{option} {make(tmp_path)}: {words}" in result.stderr
    assert "does not exist" in result.stderr or "directory" in result.stderr
    assert "NoSuchBackend" not in result.stderr


def test_export_names_the_path_it_was_given(tmp_path):
    import loader
    with loader.Runtime() as runtime, runtime.load_network(conv_network(),
                                                           backends=["CpuRef"]) as loaded:
        with pytest.raises(loader.CompiledNetworkError) as raised:
            loaded.export(tmp_path / "missing" / "net.compiled")
    assert str(raised.value).startswith(str(tmp_path / "missing" / "net.compiled") + ":")
