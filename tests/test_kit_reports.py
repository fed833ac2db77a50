"""The kit's text output keeps the words that explain a failure: in a log (not a terminal),
whatever COLUMNS says, and in a one-case run (every reproduce command), nothing is cut; only a
terminal showing many cases cuts its lines, to its own width."""
import io
import json
import os
import subprocess

import mock_backends
from conformance import cases, report, runner

DEFECT = mock_backends.one_defect_backends()["broadcast_second_input_higher_rank"].path
SELECTION = "layers.generated-broadcast,layers.addition"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def kit(*args, columns="300"):
    env = dict(os.environ, COLUMNS=columns)
    return subprocess.run(["backend-conformance", "run", "--backend", DEFECT, *args],
                          capture_output=True, text=True, timeout=300, cwd="/", env=env)


def failure_message(tmp_path, *args):
    result = kit("--json", str(tmp_path / "r.json"), *args)
    [failure] = [c for c in json.loads((tmp_path / "r.json").read_text())["cases"]
                 if c["status"] == "FAIL"]
    return result, failure["message"]


def test_a_log_keeps_the_whole_line_that_explains_a_failure_whatever_columns_says(tmp_path):
    result, message = failure_message(tmp_path, "-k", SELECTION)
    assert len(message) > 300 and "got " in message and "expected " in message
    assert result.returncode == 1
    assert message in result.stdout, result.stdout  # the summary
    assert f"FAIL     layers.generated-broadcast: {message}\n" in result.stderr  # the progress
    assert "…" not in result.stdout + result.stderr


def test_a_one_case_run_keeps_the_whole_line(tmp_path):
    result, message = failure_message(tmp_path, "-k", "layers.generated-broadcast")
    assert message in result.stdout and "…" not in result.stdout


def test_only_a_terminal_showing_several_cases_cuts_to_its_own_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    assert report.line_width(Terminal(), 5) == 300
    assert report.line_width(Terminal(), 1) is None
    assert report.line_width(io.StringIO(), 5) is None
    monkeypatch.setenv("COLUMNS", "100")
    assert report.line_width(Terminal(), 5) == 100


def _crashed_run(message, output):
    case = cases.CASES["layers.activation-relu"]
    run = runner.Run("/x/Acme_Npu_backend.so", selected=[case.id, "layers.fc-basic"],
                     total_cases=2)
    run.results.append(runner.Result(case, "CRASH", message, output=output))
    return run


def test_the_summary_cuts_a_crash_and_its_note_only_when_given_a_width():
    detail = "the worker was killed by SIGSEGV in execute, while " + "x" * 300 + " END"
    note = "crash note: " + "y" * 300 + " NOTE-END"
    run = _crashed_run(detail, f"earlier line\n{note}")
    whole = report.terminal_summary(run)
    assert detail in whole and note in whole and "…" not in whole
    cut = report.terminal_summary(run, width=120)
    assert "END" not in cut and "NOTE-END" not in cut
    assert all(len(line) <= 120 for line in cut.splitlines() if "$ backend-conformance" not in line)


def test_progress_on_a_terminal_cuts_to_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    stream = Terminal()
    progress = report.Progress(stream)
    case = cases.CASES["layers.activation-relu"]
    progress.finished(runner.Result(case, "FAIL", "z" * 200), 1, 3)
    [line] = [x for x in stream.getvalue().split("\r\x1b[K") if x.startswith("FAIL")]
    assert len(line.rstrip("\n")) == 90 and line.rstrip("\n").endswith("…")
    stream = Terminal()
    report.Progress(stream).finished(runner.Result(case, "FAIL", "z" * 200), 1, 1)
    assert "z" * 200 in stream.getvalue()
