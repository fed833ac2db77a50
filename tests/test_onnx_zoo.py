"""The model zoo check on its small models (benchmarks/zoo_check.py has them all): torchvision's
networks with random weights, exported by both of torch's exporters, imported and run on the
reference backend, each within 1e-4 of its largest output magnitude from ONNX Runtime's answer.

torch, torchvision and ONNX Runtime are development-only (``pip install -e '.[zoo]'``): without
them the test skips and says which is missing."""
import importlib.util
import os
import sys

import pytest

MISSING = [name for name in ("torch", "torchvision", "onnxruntime", "onnx")
           if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"the zoo check needs {', '.join(MISSING)} "
                          "(development extra: pip install -e '.[zoo]')")


def zoo_check():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    try:
        import zoo_check as module
    finally:
        sys.path.pop(0)
    return module


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize("model", ["squeezenet1_1", "shufflenet_v2_x1_0", "mobilenet_v2"])
def test_a_small_torchvision_model_matches_onnx_runtime(model, exporter):
    module = zoo_check()
    row = module.check(model, exporter, rounds=1, through="backend")
    assert row["layers"] > 10, row
    assert row["difference"] <= module.TOLERANCE, row
