"""The conformance kit on the reference backend, on every broken or hostile mock, and through
each of its front doors."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from xml.etree import ElementTree

import pytest

import loader
import mock_backends
import reference_backend
from conformance import cases, runner
from conformance.requirements import REQUIREMENTS

TIMEOUT = 2.0  # per case; the hanging mocks cost this much each


def run_kit(path, expression=None):
    return runner.run_cases(path, expression, timeout=TIMEOUT)


def statuses_of(run, requirement):
    return {r.status for r in run.results if r.case.requirement == requirement}


# mock -> (requirement that must break, statuses it may end with)
BROKEN = {
    # loader mocks: the loader refuses them, the kit says why
    "missing_get_backend_id": ("FILE-3", {"FAIL"}),
    "mangled_entry_points": ("FILE-3", {"FAIL"}),
    "missing_dependency": ("FILE-5", {"FAIL"}),
    "unresolved_symbol": ("ENTRY-1", {"FAIL"}),
    "null_id": ("ENTRY-2", {"FAIL"}),
    "id_with_space": ("ENTRY-2", {"FAIL"}),
    "major_too_new": ("ENTRY-4", {"FAIL"}),
    "minor_too_new": ("ENTRY-4", {"FAIL"}),
    "factory_returns_null": ("ENTRY-5", {"FAIL"}),
    "factory_malformed_instance": ("ENTRY-5", {"FAIL"}),
    "factory_missing_required_function": ("ABI-2", {"FAIL"}),
    # hostile mocks: the loader may take them, the kit must not
    "crash_at_load": ("ENTRY-1", {"CRASH"}),
    "hang_in_factory": ("ENTRY-5", {"TIMEOUT"}),
    "unstable_id": ("ENTRY-3", {"FAIL"}),
    "exit_in_capabilities": ("ABI-4", {"CRASH"}),
    "leaks_instances": ("LIFE-1", {"FAIL"}),
    "refuses_to_create": ("SUP-1", {"FAIL"}),
    "abort_in_support_query": ("SUP-2", {"CRASH"}),
    "crash_in_execute": ("LAYER-1", {"CRASH"}),
    "crash_in_create_workload": ("ABI-1", {"CRASH"}),
    "crash_in_optimizer": ("NET-1", {"CRASH"}),
    "wrong_convolution": ("LAYER-1", {"FAIL"}),
    "blob_crashes_on_load": ("NET-5", {"CRASH"}),
}

CONFORMANT = ["alpha", "minor_older"]


def test_every_hostile_mock_is_in_the_table():
    hostile = set(mock_backends.available(mock_backends.HOSTILE_DIR))
    assert hostile <= {mock_backends.library_name(stem) for stem in BROKEN}


# The reference backend allocates with malloc and declines a custom allocator, honestly.
REFERENCE_NOT_SUPPORTED = {"abi.custom-allocator"}


def test_the_reference_backend_is_conformant():
    run = run_kit(reference_backend.LIBRARY_PATH)
    assert [(r.case.id, r.status, r.message) for r in run.results if r.status != "PASS"
            and not (r.status == "NOT_SUPPORTED" and r.case.id in REFERENCE_NOT_SUPPORTED)] == []
    assert run.conformant and not run.blocked
    assert (run.backend_id, run.backend_version) == ("CpuRef", str(loader.BACKEND_API_VERSION))
    assert {r.case.id for r in run.results} == set(cases.CASES)


@pytest.mark.parametrize("stem", CONFORMANT)
def test_minimal_but_valid_backends_are_conformant(stem):
    run = run_kit(mock_backends.path(stem))
    assert run.conformant, [(r.case.id, r.status, r.message) for r in run.results
                            if r.status in runner.BREAKING]
    assert statuses_of(run, "LAYER-1") == {"NOT_SUPPORTED"}


@pytest.mark.parametrize("stem, expected", sorted(BROKEN.items()))
def test_every_broken_backend_fails_its_requirement_and_the_kit_stands(stem, expected):
    requirement, allowed = expected
    run = run_kit(mock_backends.path(stem))
    assert not run.conformant
    broken = statuses_of(run, requirement)
    assert broken & allowed, f"{requirement} ended {broken}; results: " + "; ".join(
        f"{r.case.id}={r.status}" for r in run.results if r.status != "PASS")
    for result in run.results:
        if result.status in runner.BREAKING:
            assert result.message and result.stage in cases.STAGES


def test_a_crash_names_the_stage_and_the_signal():
    run = run_kit(mock_backends.path("crash_in_execute"), "layers.activation-relu")
    [result] = run.results
    assert (result.status, result.stage) == ("CRASH", "layers")
    assert "SIGSEGV" in result.message


def test_an_exit_with_status_zero_is_a_crash_not_a_pass():
    run = run_kit(mock_backends.path("exit_in_capabilities"), "abi.capabilities")
    [result] = run.results
    assert result.status == "CRASH" and "exited with status 0" in result.message


def test_a_failed_entry_tier_blocks_the_rest_once():
    run = run_kit(mock_backends.path("null_id"))
    assert run.blocked_by.case.id == "entry.id"
    assert len(run.blocked) > 30
    assert [r.status for r in run.results if r.status in runner.BREAKING] == ["FAIL"]


def test_a_crash_at_load_blocks_the_rest():
    run = run_kit(mock_backends.path("crash_at_load"))
    assert run.blocked_by.case.id == "entry.load" and run.blocked_by.status == "CRASH"
    assert "SIGSEGV" in run.blocked_by.message


# -- one defect, reported once, where it belongs -------------------------------------------------

@pytest.fixture(scope="module")
def relu_returns_x(tmp_path_factory):
    """The scaffold's backend with one defect: relu returns its input unchanged."""
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    from conformance import scaffold
    directory = tmp_path_factory.mktemp("relu") / "acme"
    scaffold.write(str(directory), "Acme", "Npu")
    source = directory / "backend.c"
    correct = "y[i] = x[i] > 0 ? x[i] : 0;"
    assert source.read_text().count(correct) == 1
    source.write_text(source.read_text().replace(correct, "y[i] = x[i];"))
    library = directory / "Acme_Npu_backend.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", f"-I{loader.get_include()}", "-o", str(library),
                    str(source), "-lm"], check=True)
    return str(library)


def test_a_wrong_layer_is_reported_first_by_its_own_case_and_the_rest_as_consequences(relu_returns_x):
    run = run_kit(relu_returns_x)
    failed = [r for r in run.results if r.status in runner.BREAKING]
    assert [r.case.id for r in failed] == [
        "layers.activation-relu", "layers.generated-activation", "layers.repeated-Activation",
        "lifecycle.outlive-instance", "concurrency.threads"]
    root, *consequences = failed
    assert root.consequence_of is None
    assert all(r.status == "FAIL" and r.consequence_of == "layers.activation-relu"
               for r in consequences)
    assert consequences[0].message.startswith("consequence of layers.activation-relu (LAYER-1)")
    # the worst index shows the input that produced it: relu of a negative number
    match = re.search(r"worst at index \[[\d, ]+\]: got (\S+), expected 0 \(tolerance \S+\) "
                      r"\(input (\S+)\)$", root.message)
    assert match and float(match.group(1)) == pytest.approx(float(match.group(2)), abs=1e-6)
    assert float(match.group(2)) < 0, root.message


def test_an_expectation_for_the_root_cause_covers_its_consequences(relu_returns_x, tmp_path):
    expectations = tmp_path / "expected.yaml"
    expectations.write_text("expected_failures:\n"
                            "  - {case: layers.activation-relu, reason: relu fix in 2.1}\n")
    common = ["run", "--backend", relu_returns_x, "--expectations", str(expectations),
              "--json", str(tmp_path / "r.json")]
    assert kit(*common).returncode == 1
    allowed = kit(*common, "--exit-zero-on-expected")
    assert allowed.returncode == 0, allowed.stdout
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["verdict"] == "not-conformant"
    expected = {c["id"]: c["expected_failure"] for c in summary["cases"] if c["status"] == "FAIL"}
    assert expected == dict.fromkeys(["layers.activation-relu", "layers.generated-activation",
                                      "layers.repeated-Activation", "lifecycle.outlive-instance",
                                      "concurrency.threads"], "relu fix in 2.1")
    consequence = next(c for c in summary["cases"] if c["id"] == "concurrency.threads")
    assert consequence["consequence_of"] == "layers.activation-relu"
    assert ("consequences (the same defect, seen again): layers.generated-activation"
            in allowed.stdout)


def test_layer_cases_run_before_the_cases_that_also_run_a_layer():
    stages = [c.stage for c in cases.ordered_cases()]
    assert stages.index("layers") < stages.index("lifecycle") < stages.index("concurrency")


@pytest.mark.parametrize("stem, case_id, status, call", [
    ("crash_at_load", "entry.load", "CRASH", "dlopen"),
    ("hang_in_factory", "entry.factory", "TIMEOUT", "BackendFactory"),
    ("exit_in_capabilities", "abi.capabilities", "CRASH", "get_capabilities"),
    ("abort_in_support_query", "support.clean-refusal", "CRASH", "is_layer_supported"),
    ("crash_in_execute", "layers.activation-relu", "CRASH", "execute"),
])
def test_a_crash_or_hang_names_the_backend_call_it_happened_in(stem, case_id, status, call):
    result = next(r for r in run_kit(mock_backends.path(stem), case_id.split(".")[0] + ".*").results
                  if r.case.id == case_id)
    assert (result.status, result.call) == (status, call)
    assert result.message.split("; ")[0].endswith(f" in {call}"), result.message


def test_identical_crashes_collapse_into_one_line_with_a_count(tmp_path):
    result = kit("run", "--backend", mock_backends.path("abort_in_support_query"), "-k",
                 "layers.activation", "--timeout", str(TIMEOUT), "--json", str(tmp_path / "r.json"))
    assert result.returncode == 1
    failures = result.stdout.split("Failures")[1].split("\n\n")[0]
    assert failures.count("CRASH") == 1
    activations = [c for c in cases.CASES if c.startswith("layers.activation")]
    assert ("CRASH    layers.activation-relu (LAYER-1, stage layers) and "
            f"{len(activations) - 1} more with the same crash: "
            "the worker was killed by SIGABRT in is_layer_supported") in failures
    # the JSON keeps one entry per case
    summary = json.loads((tmp_path / "r.json").read_text())
    assert [c["call"] for c in summary["cases"]] == ["is_layer_supported"] * len(activations)


def test_in_process_runs_the_case_in_the_kit_process_for_a_debugger():
    crash = kit("run", "--backend", mock_backends.path("crash_in_execute"), "-k",
                "layers.activation-relu", "--in-process")
    assert crash.returncode == -11  # SIGSEGV: no worker caught it, as a debugger needs
    passing = kit("run", "--backend", reference_backend.LIBRARY_PATH, "-k", "layers", "--in-process")
    assert passing.returncode == 4, passing.stdout + passing.stderr
    assert "PASSED (PARTIAL RUN" in passing.stdout


def test_the_controller_never_loads_the_library():
    path = mock_backends.path("crash_in_execute")
    run_kit(path, "layers")
    with open("/proc/self/maps") as maps:
        assert os.path.realpath(path) not in maps.read()


# -- a backend given through a symlink ----------------------------------------------------------

@pytest.fixture
def versioned_layout(tmp_path):
    """The usual layout: Acme_Npu_backend.so -> Acme_Npu_backend.so.2 (the real file)."""
    directory = tmp_path / "v"
    directory.mkdir()
    target = directory / "Acme_Npu_backend.so.2"
    shutil.copyfile(reference_backend.LIBRARY_PATH, target)
    link = directory / "Acme_Npu_backend.so"
    link.symlink_to(target.name)
    return link, target


def test_a_backend_given_through_a_symlink_is_tested_like_the_file(versioned_layout):
    link, target = versioned_layout
    run = run_kit(str(link))
    assert [(r.case.id, r.status, r.message) for r in run.results if r.status != "PASS"
            and not (r.status == "NOT_SUPPORTED" and r.case.id in REFERENCE_NOT_SUPPORTED)] == []
    assert run.conformant
    assert (run.backend_file, run.canonical) == (str(link), str(target))


def test_the_name_rule_applies_to_the_name_given_not_to_the_target(tmp_path):
    real = tmp_path / "libacme.so.2"
    shutil.copyfile(reference_backend.LIBRARY_PATH, real)
    good_name = tmp_path / "Acme_Npu_backend.so"
    good_name.symlink_to(real)
    bad_name = tmp_path / "acme-npu.so"
    bad_name.symlink_to(good_name)
    [passed] = run_kit(str(good_name), "file.name").results
    [failed] = run_kit(str(bad_name), "file.name").results
    assert (passed.status, failed.status) == ("PASS", "FAIL")
    assert "acme-npu.so" in failed.message


def test_the_cli_reports_the_path_given_and_the_canonical_file(versioned_layout, tmp_path):
    link, target = versioned_layout
    result = kit("run", "--backend", str(link), "--json", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    backend = json.loads((tmp_path / "r.json").read_text())["backend"]
    assert (backend["file"], backend["canonical"]) == (str(link), str(target))
    assert f"{link} -> {target}" in result.stdout
    info = kit("info", "--backend", str(link))
    assert info.returncode == 0 and "CpuRef" in info.stdout, info.stderr


@pytest.mark.parametrize("make, words", [
    (lambda d: (d / "Acme_Npu_backend.so").symlink_to(d / "gone.so.2"), "dangling symlink"),
    (lambda d: (d / "Acme_Npu_backend.so").mkdir(), "a directory"),
])
def test_a_backend_path_that_leads_to_no_file_is_a_usage_error(tmp_path, make, words):
    make(tmp_path)
    result = kit("run", "--backend", str(tmp_path / "Acme_Npu_backend.so"))
    assert result.returncode == 2 and words in result.stderr
    assert "Traceback" not in result.stderr


# -- the command line -------------------------------------------------------------------------

def kit(*args, cwd="/"):
    return subprocess.run(["backend-conformance", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_run_reports_json_and_junit(tmp_path):
    result = kit("run", "--backend", reference_backend.LIBRARY_PATH, "--json",
                 str(tmp_path / "r.json"), "--junit-xml", str(tmp_path / "r.xml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CONFORMANT" in result.stdout
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["verdict"] == "conformant"
    assert summary["backend"]["id"] == "CpuRef" and summary["backend"]["version"] == str(loader.BACKEND_API_VERSION)
    assert re.fullmatch(r"[0-9a-f]{64}", summary["backend"]["sha256"])
    assert summary["counts"]["PASS"] == len(cases.CASES) - len(REFERENCE_NOT_SUPPORTED)
    for case in summary["cases"]:
        assert set(case) >= {"id", "requirement", "status", "stage", "message"}
        assert case["requirement"] in REQUIREMENTS
    assert summary["partial"] is False
    assert summary["selection"] == {"k": None, "selected": len(cases.CASES), "total": len(cases.CASES)}
    assert summary["options"]["timeout"] == runner.DEFAULT_TIMEOUT
    assert summary["kit_version"] and summary["api_version"] == str(loader.BACKEND_API_VERSION)
    assert summary["platform"]["machine"] and summary["platform"]["python"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", summary["started"])
    suite = ElementTree.parse(tmp_path / "r.xml").getroot()
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    assert len(suite.findall("testcase")) == len(cases.CASES)


# -- progress -----------------------------------------------------------------------------------

def test_progress_in_a_log_names_each_case_as_it_starts_so_a_hang_shows_where():
    """Standard error is a pipe, as in CI: each case still gets a line, written before the case
    runs, so while the factory hangs the last line names entry.factory."""
    process = subprocess.Popen(
        ["backend-conformance", "run", "--backend", mock_backends.path("hang_in_factory"),
         "--timeout", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd="/")
    lines = []
    try:
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            if line.split()[-1:] == ["entry.factory"]:
                assert process.poll() is None, "the line came only after the case"
                break
        total = len(cases.CASES)
        assert lines[0] == f"[{1:>{len(str(total))}}/{total}] file.name", lines
        assert [line.split()[-1] for line in lines[:4]] == [
            "file.name", "file.elf", "file.entry-points", "file.symbol-hygiene"]
        assert "entry.factory" in lines[-1]
        rest = process.stderr.read()
        assert "TIMEOUT  entry.factory" in rest
    finally:
        process.wait(timeout=60)
    assert process.returncode == 1


def test_progress_on_a_terminal_rewrites_one_line_announcing_the_case_that_starts():
    import io
    from conformance import report

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    stream = Terminal()
    progress = report.Progress(stream)
    case = cases.CASES["entry.factory"]
    progress.started(case, 5, 55)
    assert stream.getvalue() == "\r\x1b[K[ 5/55] entry.factory"
    progress.finished(runner.Result(case, "TIMEOUT", "no answer"), 5, 55)
    assert stream.getvalue().endswith("\r\x1b[KTIMEOUT  entry.factory: no answer\n")


# -- Ctrl-C ------------------------------------------------------------------------------------

def _worker_processes(backend_path):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                arguments = f.read().split(b"\0")
        except OSError:
            continue
        if b"conformance.worker" in arguments and os.fsencode(backend_path) in arguments:
            found.append(int(pid))
    return found


def test_ctrl_c_writes_the_partial_reports_and_exits_130(tmp_path):
    import signal
    path = mock_backends.path("hang_in_factory")
    process = subprocess.Popen(
        ["backend-conformance", "run", "--backend", path, "--timeout", "120",
         "--json", str(tmp_path / "r.json"), "--junit-xml", str(tmp_path / "r.xml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        for line in process.stderr:
            if line.split()[-1:] == ["entry.factory"]:
                break
        time.sleep(0.5)  # the worker is inside BackendFactory, which never returns
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert "INTERRUPTED during entry.factory" in stdout
    summary = json.loads((tmp_path / "r.json").read_text())
    assert (summary["verdict"], summary["partial"]) == ("partial", True)
    assert summary["interrupted"]["during"] == "entry.factory"
    assert len(summary["interrupted"]["not_run"]) == len(cases.CASES) - len(summary["cases"])
    assert [c["status"] for c in summary["cases"]] == ["PASS"] * len(summary["cases"])
    assert summary["cases"][-1]["id"] == "entry.version"
    suite = ElementTree.parse(tmp_path / "r.xml").getroot()
    assert len(suite.findall("testcase")) == len(cases.CASES)
    assert not _worker_processes(os.path.realpath(path)), "the hanging worker was left behind"


# -- partial runs -----------------------------------------------------------------------------

def test_a_subset_that_passes_is_a_partial_run_never_conformant():
    run = run_kit(reference_backend.LIBRARY_PATH, "file,entry")
    assert all(r.status == "PASS" for r in run.results)
    assert run.partial and run.verdict == "partial" and not run.conformant


def test_a_selection_that_covers_every_case_is_a_full_run():
    run = run_kit(reference_backend.LIBRARY_PATH, "not no-such-case")
    assert not run.partial and run.verdict == "conformant"


def test_the_cli_gives_a_partial_run_its_own_verdict_exit_code_and_record(tmp_path):
    result = kit("run", "--backend", reference_backend.LIBRARY_PATH, "-k", "file",
                 "--json", str(tmp_path / "r.json"), "--junit-xml", str(tmp_path / "r.xml"))
    assert result.returncode == 4, result.stdout + result.stderr
    assert f"PASSED (PARTIAL RUN: 5 of {len(cases.CASES)} cases, -k 'file')" in result.stdout
    assert not any(line.startswith("CONFORMANT") for line in result.stdout.splitlines())
    summary = json.loads((tmp_path / "r.json").read_text())
    assert (summary["verdict"], summary["partial"]) == ("partial", True)
    assert summary["selection"] == {"k": "file", "selected": 5, "total": len(cases.CASES)}
    assert summary["options"]["k"] == "file"
    properties = {p.get("name"): p.get("value")
                  for p in ElementTree.parse(tmp_path / "r.xml").getroot().iter("property")}
    assert (properties["verdict"], properties["selection"]) == ("partial", "file")


def test_a_failure_in_a_partial_run_is_not_conformant(tmp_path):
    result = kit("run", "--backend", mock_backends.path("wrong_convolution"), "-k", "conv-valid",
                 "--json", str(tmp_path / "r.json"))
    assert result.returncode == 1
    summary = json.loads((tmp_path / "r.json").read_text())
    assert (summary["verdict"], summary["partial"]) == ("not-conformant", True)


def test_the_seed_is_in_the_report_and_in_every_reproduce_command(tmp_path):
    result = kit("run", "--backend", mock_backends.path("wrong_convolution"), "--quick", "--seed",
                 "5", "--json", str(tmp_path / "r.json"), "-k", "layers.conv-valid")
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["seed"] == 5 and "seed 5" in result.stdout
    [case] = summary["cases"]
    assert case["reproduce"].endswith("-k layers.conv-valid --seed 5")


def test_a_failure_comes_with_a_command_that_reproduces_it(tmp_path):
    path = mock_backends.path("wrong_convolution")
    result = kit("run", "--backend", path, "--json", str(tmp_path / "r.json"), "-k", "layers.conv")
    assert result.returncode == 1
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["verdict"] == "not-conformant"
    failed = [c for c in summary["cases"] if c["status"] == "FAIL"]
    assert failed and all(c["requirement"] == "LAYER-1" for c in failed)
    again = subprocess.run(failed[0]["reproduce"], shell=True, capture_output=True, text=True, cwd="/")
    assert again.returncode == 1
    assert f"FAIL     {failed[0]['id']}" in again.stdout
    assert "1 run" in again.stdout


def test_junit_marks_crashes_as_errors_and_blocked_cases_as_skipped(tmp_path):
    kit("run", "--backend", mock_backends.path("crash_at_load"), "--junit-xml",
        str(tmp_path / "r.xml"), "--timeout", str(TIMEOUT))
    suite = ElementTree.parse(tmp_path / "r.xml").getroot()
    assert suite.get("errors") == "1"
    assert int(suite.get("skipped")) > 30


def test_expectations_annotate_but_never_make_conformant(tmp_path):
    path = mock_backends.path("wrong_convolution")
    expectations = tmp_path / "expected.yaml"
    expectations.write_text(
        "expected_failures:\n"
        "  - {case: 'layers.conv-*', reason: padding rework lands in 2.0}\n"
        "  - {case: 'layers.*onvolution*', reason: padding rework lands in 2.0}\n"
        "  - {case: 'raw.*', reason: argument checks arrive in 2.0}\n"
        "  - {case: concurrency.threads, reason: runs a convolution}\n"
        "  - {case: lifecycle.outlive-instance, reason: runs a convolution}\n"
        "  - {case: layers.no-such-case, reason: stale}\n"
        "  - {case: file.name, reason: fixed already}\n")
    common = ["run", "--backend", path, "--expectations", str(expectations), "--json",
              str(tmp_path / "r.json")]
    plain = kit(*common)
    assert plain.returncode == 1
    assert "padding rework lands in 2.0" in plain.stdout
    assert "'layers.no-such-case' matches no case" in plain.stdout
    assert "unexpected pass: file.name" in plain.stdout
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["verdict"] == "not-conformant"
    assert summary["expectations"]["unmatched"] == ["layers.no-such-case"]
    allowed = kit(*common, "--exit-zero-on-expected")
    assert allowed.returncode == 0, allowed.stdout
    assert "NOT CONFORMANT" in allowed.stdout


@pytest.mark.parametrize("content, words", [
    ("expected_failures: [{case: x}]", ["reason"]),
    ("[1, 2]", ["expected_failures"]),
    ("expected_failures: [", ["not valid YAML"]),
    ("expected_failures: [{case: x, reason: y, reasons: z}]", ["unknown key 'reasons'", "entry 1"]),
    ("expected_failure: [{case: x, reason: y}]", ["unknown key 'expected_failure'"]),
])
def test_malformed_expectations_are_a_usage_error(tmp_path, content, words):
    (tmp_path / "e.yaml").write_text(content)
    result = kit("run", "--backend", reference_backend.LIBRARY_PATH, "--expectations",
                 str(tmp_path / "e.yaml"))
    assert result.returncode == 2
    for word in words:
        assert word in result.stderr


@pytest.mark.parametrize("args", [["run"], ["run", "--backend", "/does/not/exist.so"],
                                  ["run", "--backend", reference_backend.LIBRARY_PATH, "-k", "zzz"],
                                  ["frobnicate"], ["run", "--backend", reference_backend.LIBRARY_PATH,
                                                   "--timeout", "0"]])
def test_usage_errors_exit_2(args):
    assert kit(*args).returncode == 2


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "-1", "ten", "1e9"])
def test_a_timeout_that_is_not_a_finite_positive_number_is_a_usage_error(value):
    result = kit("run", "--backend", reference_backend.LIBRARY_PATH, "--timeout", value)
    assert result.returncode == 2
    assert "--timeout" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("option", ["--json", "--junit-xml"])
def test_a_report_path_that_cannot_be_written_is_refused_before_the_run(tmp_path, option):
    for path, words in ((tmp_path, "is a directory"),
                        (tmp_path / "missing" / "dir" / "r.json", "does not exist")):
        result = kit("run", "--backend", reference_backend.LIBRARY_PATH, option, str(path))
        assert result.returncode == 2, result.stdout + result.stderr
        assert words in result.stderr and "Traceback" not in result.stderr
        assert "CONFORMANT" not in result.stdout  # nothing ran
    assert not (tmp_path / "missing").exists()  # never created


def test_json_to_standard_output_leaves_the_summary_for_people_on_standard_error():
    result = kit("run", "--backend", reference_backend.LIBRARY_PATH, "--json", "-")
    assert result.returncode == 0
    assert json.loads(result.stdout)["verdict"] == "conformant"
    assert "CONFORMANT" in result.stderr


def test_a_report_that_cannot_be_written_after_the_run_exits_3(tmp_path, monkeypatch, capsys):
    from conformance import cli, report

    def disk_full(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(report, "write", disk_full)
    code = cli.main(["run", "--backend", reference_backend.LIBRARY_PATH, "-q", "-k", "file.name",
                     "--json", str(tmp_path / "r.json")])
    assert code == cli.EXIT_INTERNAL == 3
    assert "No space left on device" in capsys.readouterr().err


def test_an_internal_error_exits_3_with_its_trace(monkeypatch, capsys):
    from conformance import cli, report

    def broken(*args):
        raise RuntimeError("planted bug")
    monkeypatch.setattr(report, "terminal_summary", broken)
    code = cli.main(["run", "--backend", reference_backend.LIBRARY_PATH, "-q", "-k", "file.name"])
    err = capsys.readouterr().err
    assert code == 3 and "internal error" in err and "RuntimeError: planted bug" in err


@pytest.mark.parametrize("make_directory, words", [
    (lambda tmp: "/proc/x", "cannot create /proc/x"),
    (lambda tmp: str(tmp / "missing" / "acme"), "does not exist"),
    (lambda tmp: (tmp / "file").write_text("x") and str(tmp / "file"), "not a directory"),
])
def test_init_refuses_a_directory_it_cannot_use(tmp_path, make_directory, words):
    directory = make_directory(tmp_path)
    result = kit("init", "--vendor", "Acme", "--name", "Npu", directory)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "missing").exists()


def test_list_names_every_case_and_its_requirement():
    lines = kit("list").stdout.splitlines()
    assert len(lines) == len(cases.CASES)
    assert all(line.split()[1] in REQUIREMENTS for line in lines)


def test_version_names_the_kit_and_the_backend_api_it_implements():
    import conformance
    result = kit("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (f"backend-conformance {conformance.version()} "
                             f"(Backend API {loader.BACKEND_API_VERSION})\n")


def test_init_help_says_what_vendor_and_name_may_contain():
    text = " ".join(kit("init", "--help").stdout.split())
    assert text.count("ASCII letters and digits only: the library is <vendor>_<name>_backend.so") == 2


def test_info_shows_id_version_and_claimed_layers():
    result = kit("info", "--backend", reference_backend.LIBRARY_PATH, "--json")
    info = json.loads(result.stdout)
    assert info["id"] == "CpuRef" and info["version"] == str(loader.BACKEND_API_VERSION)
    from loader.layers import LAYERS
    assert set(info["layers"]) == set(LAYERS)  # every layer of Backend API 1.3


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "conformance", "list", "-k", "entry."],
                            capture_output=True, text=True, cwd="/")
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 5
    assert all(line.startswith("entry.") for line in result.stdout.splitlines())


# -- the pytest plugin ------------------------------------------------------------------------

def pytest_in(directory, *args):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=directory, timeout=300)


def test_pytest_runs_the_same_cases(tmp_path):
    result = pytest_in(tmp_path, "-q", f"--conformance-backend={mock_backends.path('wrong_convolution')}",
                       "-k", "conv")
    assert result.returncode == 1
    assert "FAIL layers.conv-valid (LAYER-1" in result.stdout
    assert "reproduce: backend-conformance run" in result.stdout
    ok = pytest_in(tmp_path, "-q", f"--conformance-backend={reference_backend.LIBRARY_PATH}")
    assert ok.returncode == 0, ok.stdout
    assert f"{len(cases.CASES) - len(REFERENCE_NOT_SUPPORTED)} passed, 1 skipped" in ok.stdout


def test_pytest_runs_the_quick_tier_and_a_chosen_seed(tmp_path):
    quick = [case.id for case in runner.select_cases(None, quick=True)]
    assert 0 < len(quick) < len(cases.CASES)
    result = pytest_in(tmp_path, "-q", "--co", f"--conformance-backend={reference_backend.LIBRARY_PATH}",
                       "--conformance-quick")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(quick)} tests collected" in result.stdout
    result = pytest_in(tmp_path, "-q", f"--conformance-backend={mock_backends.path('wrong_convolution')}",
                       "--conformance-seed=1234", "-k", "conv")
    assert result.returncode == 1
    assert "seed 1234" in result.stdout
    assert "--seed 1234" in result.stdout       # in every reproduce command


@pytest.fixture
def suite_with_its_own_backend_option(tmp_path):
    """Someone else's test suite, with a --backend option of its own."""
    (tmp_path / "conftest.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.addoption('--backend', default='cpu', help='which device to test')\n")
    (tmp_path / "test_device.py").write_text(
        "def test_device(request):\n"
        "    assert request.config.getoption('backend') == 'gpu'\n")
    return tmp_path


def test_a_suite_that_defines_its_own_backend_option_is_left_alone(suite_with_its_own_backend_option):
    result = pytest_in(suite_with_its_own_backend_option, "-q", "--backend", "gpu")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert "deprecated" not in result.stdout + result.stderr


def test_the_namespaced_option_runs_beside_a_suite_own_backend_option(suite_with_its_own_backend_option,
                                                                       tmp_path):
    link = tmp_path / "Acme_Npu_backend.so"  # through a symlink, as vendors install them
    link.symlink_to(reference_backend.LIBRARY_PATH)
    result = pytest_in(suite_with_its_own_backend_option, "-rA", "--backend", "gpu",
                       f"--conformance-backend={link}", "-k", "device or file.",
                       f"--junit-xml={tmp_path / 'j.xml'}", ".")  # the suite's tests too
    assert result.returncode == 0, result.stdout + result.stderr
    # counted like any other items: collected, then deselected and selected
    assert f"collected {len(cases.CASES) + 1} items / {len(cases.CASES) - 5} deselected / " \
           f"6 selected" in result.stdout
    assert f"backend-conformance: {link} -> {reference_backend.LIBRARY_PATH}" in result.stdout
    assert "PASSED Acme_Npu_backend.so::file.elf" in result.stdout
    assert "::file" not in result.stdout.replace("Acme_Npu_backend.so::file", "")
    assert ".." not in "".join(line for line in result.stdout.splitlines() if "PASSED" in line)
    classnames = {case.get("name"): case.get("classname")
                  for case in ElementTree.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    assert classnames == {"test_device": "test_device", **{
        case_id: "Acme_Npu_backend.so" for case_id in cases.CASES if case_id.startswith("file.")}}


@pytest.fixture
def project_elsewhere(tmp_path):
    """A project with its own rootdir, testpaths and test, and a backend outside it."""
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "sub").mkdir()
    (project / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (project / "tests" / "test_own.py").write_text("def test_own():\n    pass\n")
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "Acme_Npu_backend.so").symlink_to(reference_backend.LIBRARY_PATH)
    return project


@pytest.mark.parametrize("where, extra", [("project", []), ("project/sub", []),
                                          ("project/sub", ["--rootdir=../../vendor"])])
def test_node_ids_are_the_backend_file_name_wherever_pytest_runs_and_its_rootdir_is(
        project_elsewhere, where, extra):
    start = project_elsewhere.parent / where
    backend = os.path.relpath(project_elsewhere.parent / "vendor" / "Acme_Npu_backend.so", start)
    assert backend.startswith("..")
    selection = ["-k", "file.name or entry.load", f"--conformance-backend={backend}", *extra]
    verbose = pytest_in(start, "-v", "-rA", *selection)
    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    assert "Acme_Npu_backend.so::entry.load PASSED" in verbose.stdout
    assert "PASSED Acme_Npu_backend.so::file.name" in verbose.stdout
    progress = pytest_in(start, *selection)
    assert progress.returncode == 0, progress.stdout + progress.stderr
    assert re.search(r"^Acme_Npu_backend\.so \.\. ", progress.stdout, re.MULTILINE), progress.stdout
    shown = [word for word in (verbose.stdout + progress.stdout).split() if "Acme_Npu_backend.so" in word]
    assert shown and not [word for word in shown if ".." in word]


def test_the_conformance_option_alone_collects_the_cases_not_the_projects_tests(project_elsewhere):
    backend = f"--conformance-backend={reference_backend.LIBRARY_PATH}"
    alone = pytest_in(project_elsewhere, "--co", "-q", backend)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert f"{len(cases.CASES)} tests collected" in alone.stdout and "test_own" not in alone.stdout
    assert "the conformance cases only (no test paths given)" in pytest_in(
        project_elsewhere, "--co", backend).stdout
    both = pytest_in(project_elsewhere, "--co", "-q", backend, "tests")
    assert f"{len(cases.CASES) + 1} tests collected" in both.stdout and "test_own" in both.stdout
    own = pytest_in(project_elsewhere, "--co", "-q")
    assert "1 test collected" in own.stdout


def test_the_former_backend_option_still_works_with_a_deprecation_warning(tmp_path):
    result = pytest_in(tmp_path, "-q", "--backend", reference_backend.LIBRARY_PATH, "-k", "file.")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout
    assert "--backend is deprecated: use --conformance-backend" in result.stdout


def test_the_plugin_can_be_kept_out_of_a_session(tmp_path):
    result = pytest_in(tmp_path, "-p", "no:backend_conformance",
                       f"--conformance-backend={reference_backend.LIBRARY_PATH}")
    assert result.returncode == 4  # pytest: usage error
    assert "unrecognized arguments: --conformance-backend" in result.stderr


def test_pytest_refuses_a_backend_that_is_not_a_file_and_a_timeout_that_is_not_finite(tmp_path):
    result = pytest_in(tmp_path, f"--conformance-backend={tmp_path}")
    assert result.returncode == 4 and "a directory" in result.stderr
    result = pytest_in(tmp_path, f"--conformance-backend={reference_backend.LIBRARY_PATH}",
                       "--conformance-timeout=inf")
    assert result.returncode == 4 and "--conformance-timeout: 'inf'" in result.stderr


# -- onboarding -------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                    reason="needs make and a C compiler")
def test_init_writes_a_backend_that_passes_out_of_the_box(tmp_path):
    directory = tmp_path / "acme"
    assert kit("init", "--vendor", "Acme", "--name", "Npu", str(directory)).returncode == 0
    build = subprocess.run(["make", "-C", str(directory)], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    library = directory / "Acme_Npu_backend.so"
    result = kit("run", "--backend", str(library))
    assert result.returncode == 0, result.stdout
    assert "CONFORMANT" in result.stdout
    # Cleanly: not even a speed warning (PERF-1 repeats its rounds before it warns).
    [total] = [line.split() for line in result.stdout.splitlines() if line.startswith("total")]
    assert total[2] == "0" and "Warnings:" not in result.stdout, result.stdout
    assert kit("init", "--vendor", "Acme", "--name", "Npu", str(directory)).returncode == 2
    assert kit("init", "--vendor", "Ac-me", "--name", "Npu", str(tmp_path / "x")).returncode == 2


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                    reason="needs make and a C compiler")
def test_the_generated_makefile_builds_outside_the_environment_and_fails_clearly(tmp_path):
    directory = tmp_path / "acme"
    assert kit("init", "--vendor", "Acme", "--name", "Npu", str(directory)).returncode == 0
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no virtualenv, no loader
    build = subprocess.run(["make", "-C", str(directory)], capture_output=True, text=True, env=bare)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "Traceback" not in build.stderr
    assert (directory / "Acme_Npu_backend.so").is_file()
    wrong = subprocess.run(["make", "-C", str(directory), "-B", "BACKEND_API_INCLUDE=/nonexistent"],
                           capture_output=True, text=True, env=bare)
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    assert "backend_api.h is not in BACKEND_API_INCLUDE=/nonexistent" in wrong.stderr
    check = subprocess.run(["make", "-C", str(directory), "check",
                            "BACKEND_CONFORMANCE=no-such-kit-command"],
                           capture_output=True, text=True, env=bare)
    assert check.returncode != 0 and "no-such-kit-command is not on PATH" in check.stderr


def test_requirements_document_and_table_agree():
    document = os.path.join(os.path.dirname(cases.__file__), "REQUIREMENTS.md")
    if not os.path.exists(document):
        pytest.skip("REQUIREMENTS.md is not installed beside the package")
    with open(document) as f:
        ids = re.findall(r"^\| ([A-Z]+-\d+)", f.read(), re.MULTILINE)
    assert sorted(ids) == sorted(REQUIREMENTS)
    assert {c.requirement for c in cases.CASES.values()} == set(REQUIREMENTS)
