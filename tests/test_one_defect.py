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
    """Whether ``result`` is a finding about the backend: FAIL, CRASH or TIMEOUT (an ERROR is the
    kit's own failure), or a WARNING where the requirement only ever warns."""
    if result.status in ("FAIL", "CRASH", "TIMEOUT"):
        return True
    return result.status == "WARNING" and REQUIREMENTS[result.case.requirement].warning_only


def run_requirement(path, requirement):
    """The cases of ``requirement``, in the kit's order, up to the first that catches the
    backend (the fixed cases come before the generated sweeps, so most stop early)."""
    selected = [c for c in runner.select_cases(None) if c.requirement == requirement]
    assert selected, f"no case checks {requirement}"
    controller = runner.Controller(path, timeout=TIMEOUT)
    results = []
    try:
        for case in selected:
            results.append(controller.run_one(case))
            if caught(results[-1]):
                break
    finally:
        controller.close()
    return results


def test_there_are_at_least_thirty_defects_each_naming_a_known_requirement():
    assert len(DEFECTS) >= 30
    unknown = {stem: d.requirement for stem, d in DEFECTS.items() if d.requirement not in REQUIREMENTS}
    assert unknown == {}


@pytest.mark.parametrize("stem", sorted(DEFECTS))
def test_each_defect_is_caught_under_the_requirement_its_header_names(stem):
    backend = DEFECTS[stem]
    results = run_requirement(backend.path, backend.requirement)
    findings = [r for r in results if caught(r)]
    assert findings, (f"{stem}: '{backend.defect}' passed {backend.requirement}: " + "; ".join(
        f"{r.case.id}={r.status} {r.message}" for r in results))
    assert all(r.message for r in findings)
    if not REQUIREMENTS[backend.requirement].warning_only:
        assert findings[0].status in runner.BREAKING


@pytest.mark.parametrize("path", [reference_backend.LIBRARY_PATH] + list(CORRECT.values()),
                         ids=["reference"] + list(CORRECT))
def test_correct_backends_are_conformant_without_a_single_finding(path):
    run = runner.Controller(path, timeout=TIMEOUT).run(runner.select_cases(None))
    # A speed warning depends on how busy the machine is: benchmarks/bench_kill_rate.py counts
    # those; here every other finding is a false alarm.
    assert [(r.case.id, r.status, r.message) for r in run.results
            if r.status not in ("PASS", "NOT_SUPPORTED")
            and not (r.status == "WARNING" and REQUIREMENTS[r.case.requirement].warning_only)] == []
    assert run.conformant and not run.blocked


def test_the_subset_backend_refuses_what_it_does_not_run_and_passes_what_it_does():
    run = runner.Controller(CORRECT["subset"], timeout=TIMEOUT).run(
        runner.select_cases("layers.activation-relu,layers.fc-basic"))
    assert {r.case.id: r.status for r in run.results} == {
        "layers.activation-relu": "PASS", "layers.fc-basic": "NOT_SUPPORTED"}


# -- what a vendor reads first -----------------------------------------------------------------

def only(stem, expression):
    run = runner.run_cases(DEFECTS[stem].path, expression, timeout=TIMEOUT)
    [result] = run.results
    return run, result


def test_a_nan_output_is_counted_with_the_case_parameters_and_seed():
    _, result = only("tanh_nan_at_zero", "layers.generated-activation")
    assert result.status == "FAIL"
    assert "NaN" in result.message and "where the reference is finite" in result.message
    assert "function tanh" in result.message and "values zeros" in result.message
    assert "seed 20261123" in result.message and "worst at index" in result.message


def test_an_overrun_crashes_in_the_case_that_does_it_and_names_the_buffer():
    _, result = only("writes_past_output", "memory.Activation")
    assert result.status == "CRASH"
    assert "SIGSEGV" in result.message and "past the end of the output" in result.message


def test_a_write_into_an_input_is_named_as_such():
    _, result = only("writes_to_input", "memory.Softmax")
    assert result.status in ("FAIL", "CRASH")
    assert "input 0" in result.message


def test_a_workload_too_small_is_one_abi_failure_that_blocks_only_what_executes_workloads():
    run = runner.run_cases(DEFECTS["workload_struct_size_too_small"].path, timeout=TIMEOUT)
    broken = [r for r in run.results if r.status in runner.BREAKING]
    assert [(r.case.id, r.case.requirement) for r in broken] == [("abi.workload-struct", "ABI-1")]
    assert "BackendWorkload.struct_size is 8" in broken[0].message
    assert "destroy" in broken[0].message
    blocked = {c.id for c in run.blocked}
    assert "layers.fc-basic" in blocked and "concurrency.threads" in blocked
    assert {"support.clean-refusal", "lifecycle.create-destroy"} <= {r.case.id for r in run.results}


def test_an_instance_id_mismatch_shows_both_ids():
    _, result = only("instance_id_mismatch", "entry.factory")
    assert "'DefectIdMismatch'" in result.message and "'DefectIdOld'" in result.message


def test_the_kits_own_allocator_counts_what_a_backend_holds_back():
    _, result = only("allocator_never_deallocates", "abi.custom-allocator")
    assert result.status == "FAIL" and "0 returned through its deallocate" in result.message


def test_a_slow_backend_gets_a_warning_with_the_ratio_and_stays_conformant():
    run, result = only("ten_times_slower", "speed.layers")
    assert result.status == "WARNING" and "x slower than the reference backend" in result.message
    assert not run.failed


def test_the_quick_tier_leaves_out_the_full_tier_and_the_seed_replays():
    quick = runner.select_cases(None, quick=True)
    assert quick and all(c.tier == "quick" for c in quick)
    assert len(quick) < len(runner.select_cases(None))
    first = runner.run_cases(DEFECTS["fc_reduction_tail_dropped"].path,
                             "layers.generated-fully-connected", seed=7)
    again = runner.run_cases(DEFECTS["fc_reduction_tail_dropped"].path,
                             "layers.generated-fully-connected", seed=7)
    other = runner.run_cases(DEFECTS["fc_reduction_tail_dropped"].path,
                             "layers.generated-fully-connected", seed=8)
    assert first.seed == 7 and "seed 7" in first.results[0].message
    assert first.results[0].message == again.results[0].message != other.results[0].message


def test_every_header_a_one_defect_backend_includes_is_one_setup_py_rebuilds_it_for():
    """setup.py lists mock_backends/one_defect/*.h as what each of these backends depends on; a
    header included from anywhere else would be missed by an incremental build."""
    import glob
    import os
    import re
    directory = mock_backends.ONE_DEFECT_DIR
    if not os.path.exists(os.path.join(directory, "base.h")):
        pytest.skip("needs a checkout (the backends' sources)")
    headers = {os.path.realpath(h) for h in glob.glob(os.path.join(directory, "*.h"))}
    sources = glob.glob(os.path.join(directory, "*.c")) + glob.glob(
        os.path.join(mock_backends.CORRECT_DIR, "*.c"))
    included, stack = set(), list(sources)
    while stack:
        path = stack.pop()
        with open(path) as f:
            for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.MULTILINE):
                if name == "backend_api.h":
                    continue
                header = os.path.realpath(os.path.join(os.path.dirname(path), name))
                if header not in included:
                    included.add(header)
                    stack.append(header)
    assert included and included <= headers, sorted(included - headers)
    assert headers <= included, f"headers no backend includes: {sorted(headers - included)}"


@pytest.mark.parametrize("stem, case_id, words", [
    ("instance_opens_fd_per_create", "lifecycle.create-destroy",
     ["instances: ", "file descriptors opened and never closed", "(1 per create/destroy cycle)"]),
    ("factory_opens_fd_per_create", "lifecycle.create-destroy-factories",
     ["workload factories: ", "file descriptors opened and never closed"]),
    ("context_thread_per_create", "lifecycle.create-destroy-contexts",
     ["backend contexts: ", "threads started and never ended", "(1 per create/destroy cycle)"]),
    ("manager_maps_per_create", "lifecycle.create-destroy-managers",
     ["memory managers: memory mapped and never unmapped", "65536 bytes per create/destroy cycle"]),
])
def test_a_leak_is_named_by_the_objects_and_the_kind_of_resource(stem, case_id, words):
    """Every create/destroy loop counts heap, mappings, descriptors and threads: each of these
    backends leaks one kind in one loop, and only that loop's case fails."""
    run = runner.run_cases(DEFECTS[stem].path, "create-destroy", timeout=TIMEOUT)
    findings = {r.case.id: r.message for r in run.results if r.status in runner.BREAKING}
    assert list(findings) == [case_id], findings
    assert all(word in findings[case_id] for word in words), findings[case_id]
