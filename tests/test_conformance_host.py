"""The conformance kit through a backend host (``backend-conformance run --backend-host
process``): the reference backend is conformant there too, and a backend that crashes in
execute, create_workload or its optimizer crashes its host, not the kit's worker: the case ends
CRASH, named by the call, and the run goes on."""
import subprocess
import sys

import pytest

import mock_backends
import reference_backend
from conformance import runner

TIMEOUT = 4.0


def test_the_reference_backend_is_conformant_through_a_host():
    result = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                             reference_backend.LIBRARY_PATH, "--backend-host", "process", "-q",
                             "--json", "-"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert '"backend_host": "process"' in result.stdout
    assert "CONFORMANT" in result.stderr


@pytest.mark.parametrize("stem, cases, call", [
    ("crash_in_execute", "layers.activation-relu,layers.generated-activation,entry.id",
     "execute"),
    ("crash_in_create_workload", "support.clean-refusal,lifecycle.create-destroy-factories",
     "create_workload"),
    ("crash_in_optimizer", "net.views-cover,net.substitutions-match,abi.capabilities",
     "optimize_subgraph"),
])
def test_a_crash_in_a_host_ends_the_case_and_the_run_goes_on(stem, cases, call):
    run = runner.run_cases(mock_backends.path(stem), cases, timeout=TIMEOUT,
                           backend_host="process")
    crashed = [r for r in run.results if r.status == "CRASH"]
    assert crashed, [(r.case.id, r.status, r.message) for r in run.results]
    first = crashed[0]
    assert first.call == call
    assert f"its host process was killed by SIGSEGV in {call}" in first.message
    assert "the worker" not in " ".join(r.message for r in run.results)
    assert len(run.results) == len(runner.select_cases(cases))
    assert any(r.status == "PASS" for r in run.results)        # a case after the crash ran
