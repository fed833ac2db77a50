"""The kit's NET requirements: every network mock caught under the requirement it breaks and
no other; the reference and partial backends pass; 1.0 and 1.1 backends get NOT_SUPPORTED."""
import pytest

import mock_backends
import reference_backend
from conformance import runner

NET = ("NET-1", "NET-2", "NET-3", "NET-4", "NET-5", "NET-6", "NET-7")
OPTIONAL_MEMBERS = ("NET-5", "NET-6", "NET-7")

# mock -> the one NET requirement it breaks
BROKEN = {
    "views_miss_a_layer": "NET-1",
    "views_claim_a_layer_twice": "NET-1",
    "views_name_a_layer_not_offered": "NET-1",
    "substitution_wrong_boundary": "NET-1",
    "compiled_wrong_result": "NET-2",
    "compiled_dies_with_instance": "NET-4",
    "blob_not_round_trip": "NET-5",
    "profiling_bad_events": "NET-6",
    "availability_flips": "NET-7",
}


def statuses(path):
    """NET requirement -> status (net.create-destroy is LIFE-1's, over compiled sub-graphs)."""
    run = runner.run_cases(path, "net", timeout=60)
    return {r.case.requirement: r.status for r in run.results if r.case.requirement in NET}


@pytest.mark.parametrize("stem", sorted(BROKEN))
def test_each_network_mock_fails_its_requirement_only(stem):
    found = statuses(mock_backends.path(stem))
    assert found[BROKEN[stem]] == "FAIL", found
    assert all(status in ("PASS", "NOT_SUPPORTED") for req, status in found.items()
               if req != BROKEN[stem]), found


def test_the_reference_backend_passes_every_net_requirement():
    assert statuses(reference_backend.LIBRARY_PATH) == {req: "PASS" for req in NET}


def test_a_correct_optimizer_without_the_optional_members_is_not_failed():
    assert statuses(mock_backends.path("partial")) == {
        req: "NOT_SUPPORTED" if req in OPTIONAL_MEMBERS else "PASS" for req in NET}


def test_a_blob_that_crashes_on_load_is_reported_as_a_crash_in_that_call():
    run = runner.run_cases(mock_backends.path("blob_crashes_on_load"), "net", timeout=60)
    result = {r.case.requirement: r for r in run.results}["NET-5"]
    assert (result.status, result.call) == ("CRASH", "load_compiled_subgraph"), result


@pytest.mark.parametrize("stem", ["minor_older", "minor_previous"])
def test_older_minor_versions_are_not_supported_never_failed(stem):
    assert statuses(mock_backends.path(stem)) == {req: "NOT_SUPPORTED" for req in NET}
