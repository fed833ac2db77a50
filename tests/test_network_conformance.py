"""The kit's NET requirements: every network mock caught under the requirement it breaks and
no other; the reference and partial backends pass; 1.0 and 1.1 backends get NOT_SUPPORTED."""
import pytest

import mock_backends
import reference_backend
from conformance import runner

NET = ("NET-1", "NET-2", "NET-3", "NET-4")

# mock -> the one NET requirement it breaks
BROKEN = {
    "views_miss_a_layer": "NET-1",
    "views_claim_a_layer_twice": "NET-1",
    "views_name_a_layer_not_offered": "NET-1",
    "substitution_wrong_boundary": "NET-1",
    "compiled_wrong_result": "NET-2",
    "compiled_dies_with_instance": "NET-4",
}


def statuses(path):
    run = runner.run_cases(path, "net", timeout=60)
    return {r.case.requirement: r.status for r in run.results}


@pytest.mark.parametrize("stem", sorted(BROKEN))
def test_each_network_mock_fails_its_requirement_only(stem):
    found = statuses(mock_backends.path(stem))
    assert found[BROKEN[stem]] == "FAIL", found
    assert all(status in ("PASS", "NOT_SUPPORTED") for req, status in found.items()
               if req != BROKEN[stem]), found


@pytest.mark.parametrize("path", [reference_backend.LIBRARY_PATH, mock_backends.path("partial")],
                         ids=["CpuRef", "MockPartial"])
def test_correct_optimizers_pass(path):
    assert statuses(path) == {req: "PASS" for req in NET}


@pytest.mark.parametrize("stem", ["minor_older", "minor_previous"])
def test_older_minor_versions_are_not_supported_never_failed(stem):
    assert statuses(mock_backends.path(stem)) == {req: "NOT_SUPPORTED" for req in NET}
