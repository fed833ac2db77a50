"""Mutation tests of the conformance kit: each backend of mock_backends/one_defect/ carries one
realistic defect, and its header names the requirement that must catch it; the backends of
mock_backends/one_defect/correct/ (and the reference backend) must be found conformant with no
finding at all."""
import pytest

import mock_backends
import reference_backend
from conformance import runner
from conformance.requirements import REQUIREMENTS

DEFECTS = mock_backends.one_defect_backends()
CORRECT = mock_backends.correct_backends()
TIMEOUT = 10.0


def caught(result):
    """Whether ``result`` is a finding: a breaking status, or a WARNING where the requirement is a
    quality requirement that only ever warns."""
    if result.status in runner.BREAKING:
        return True
    return result.status == "WARNING" and REQUIREMENTS[result.case.requirement].warning_only


def run_requirement(path, requirement):
    selected = [c for c in runner.select_cases(None) if c.requirement == requirement]
    assert selected, f"no case checks {requirement}"
    return runner.Controller(path, timeout=TIMEOUT).run(selected)


def test_there_are_at_least_thirty_defects_each_naming_a_known_requirement():
    assert len(DEFECTS) >= 30
    unknown = {stem: d.requirement for stem, d in DEFECTS.items() if d.requirement not in REQUIREMENTS}
    assert unknown == {}


@pytest.mark.parametrize("stem", sorted(DEFECTS))
def test_each_defect_is_caught_under_the_requirement_its_header_names(stem):
    backend = DEFECTS[stem]
    run = run_requirement(backend.path, backend.requirement)
    findings = [r for r in run.results if caught(r)]
    assert findings, (f"{stem}: '{backend.defect}' passed {backend.requirement}: " + "; ".join(
        f"{r.case.id}={r.status} {r.message}" for r in run.results))
    assert all(r.message for r in findings)
    if not REQUIREMENTS[backend.requirement].warning_only:
        assert not run.conformant


@pytest.mark.parametrize("path", [reference_backend.LIBRARY_PATH] + list(CORRECT.values()),
                         ids=["reference"] + list(CORRECT))
def test_correct_backends_are_conformant_without_a_single_finding(path):
    run = runner.Controller(path, timeout=TIMEOUT).run(runner.select_cases(None))
    assert [(r.case.id, r.status, r.message) for r in run.results
            if r.status not in ("PASS", "NOT_SUPPORTED")] == []
    assert run.conformant and not run.blocked


def test_the_subset_backend_refuses_what_it_does_not_run_and_passes_what_it_does():
    run = runner.Controller(CORRECT["subset"], timeout=TIMEOUT).run(
        runner.select_cases("layers.activation-relu,layers.fc-basic"))
    assert {r.case.id: r.status for r in run.results} == {
        "layers.activation-relu": "PASS", "layers.fc-basic": "NOT_SUPPORTED"}
