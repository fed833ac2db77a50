"""Reports of a run: the JSON summary, JUnit XML and the terminal summary."""
import datetime
import hashlib
import platform
import shlex
import shutil
import sys
from typing import Dict, Optional
from xml.etree import ElementTree

import conformance
from conformance.runner import BREAKING, STATUSES, Result, Run



def reproduce_command(run: Run, case_id: str) -> str:
    seed = f" --seed {run.seed}" if run.seed is not None else ""
    return (f"backend-conformance run --backend {shlex.quote(run.backend_file)} "
            f"-k {shlex.quote(case_id)}{seed}")


def _sha256(path: str) -> Optional[str]:
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def counts(run: Run) -> Dict[str, int]:
    result = {status: 0 for status in STATUSES}
    for r in run.results:
        result[r.status] += 1
    result["BLOCKED"] = len(run.blocked)
    return result


def _utc(timestamp: float) -> Optional[str]:
    if not timestamp:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def platform_info() -> dict:
    libc, libc_version = platform.libc_ver()
    return {"system": platform.system(), "release": platform.release(),
            "machine": platform.machine(), "python": platform.python_version(),
            "libc": f"{libc} {libc_version}".strip() or None}


def selection(run: Run) -> dict:
    return {"k": run.selection, "selected": len(run.selected), "total": run.total_cases}


def summary(run: Run, expectations=None, options: Optional[dict] = None) -> dict:
    """The JSON summary: the documented keys (verdict, backend, cases) and what makes a run
    reproducible (selection, options, versions, platform, time)."""
    import loader
    cases = []
    for r in run.results:
        item = {"id": r.case.id, "requirement": r.case.requirement, "status": r.status,
                "stage": r.stage, "message": r.message, "seconds": round(r.seconds, 4)}
        if r.status not in ("PASS", "NOT_SUPPORTED"):
            item["reproduce"] = reproduce_command(run, r.case.id)
        if r.status in BREAKING:
            item.update(call=r.call, layer=r.layer, consequence_of=r.consequence_of)
        if r.output:
            item["output"] = r.output
        if expectations is not None:
            item["expected_failure"] = expectations.reason_for_result(r)
        cases.append(item)
    document = {
        "verdict": run.verdict,
        "partial": run.partial,
        "selection": selection(run),
        "backend": {"file": run.backend_file, "canonical": run.canonical or run.backend_file,
                    "id": run.backend_id, "version": run.backend_version,
                    "sha256": _sha256(run.canonical or run.backend_file)},
        "kit_version": conformance.version(),
        "api_version": str(loader.BACKEND_API_VERSION),
        "options": options or {},
        "platform": platform_info(),
        "started": _utc(run.started),
        "finished": _utc(run.finished),
        "counts": counts(run),
        "duration_seconds": round(run.seconds, 3),
        "tier": run.tier,
        "seed": run.seed,
        "cases": cases,
        "blocked": None,
        "interrupted": None,
    }
    if run.blocked:
        document["blocked"] = {"by": run.blocked_by.case.id, "reason": run.blocked_by.message,
                               "cases": [c.id for c in run.blocked]}
    if run.interrupted is not None:
        document["interrupted"] = {"during": run.interrupted.id,
                                   "not_run": [c.id for c in run.not_run]}
    if expectations is not None:
        document["expectations"] = expectations.findings(run)
    return document


def junit_xml(run: Run) -> bytes:
    c = counts(run)
    suite = ElementTree.Element("testsuite", {
        "name": "backend-conformance",
        "tests": str(len(run.results) + len(run.blocked) + len(run.not_run)),
        "failures": str(c["FAIL"]), "errors": str(c["CRASH"] + c["TIMEOUT"] + c["ERROR"]),
        "skipped": str(c["NOT_SUPPORTED"] + c["BLOCKED"] + len(run.not_run)),
        "time": f"{run.seconds:.3f}"})
    properties = ElementTree.SubElement(suite, "properties")
    for name, value in (("backend", run.backend_file), ("canonical", run.canonical or run.backend_file),
                        ("backend_id", run.backend_id or ""),
                        ("backend_version", run.backend_version or ""), ("verdict", run.verdict),
                        ("selection", run.selection or ""), ("kit_version", conformance.version()),
                        ("interrupted", run.interrupted.id if run.interrupted else "")):
        ElementTree.SubElement(properties, "property", {"name": name, "value": value})
    for r in run.results:
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": f"conformance.{r.stage}", "name": r.case.id, "time": f"{r.seconds:.4f}"})
        text = f"{r.case.requirement}: {r.message}\nreproduce: {reproduce_command(run, r.case.id)}"
        if r.output:
            text += f"\nthe worker's last output:\n{r.output}"
        if r.status == "FAIL":
            ElementTree.SubElement(case, "failure", {"message": r.message[:500], "type": "FAIL"}).text = text
        elif r.status in ("CRASH", "TIMEOUT", "ERROR"):
            ElementTree.SubElement(case, "error", {"message": r.message[:500], "type": r.status}).text = text
        elif r.status == "NOT_SUPPORTED":
            ElementTree.SubElement(case, "skipped", {"message": f"not supported: {r.message}"})
        elif r.status == "WARNING":
            ElementTree.SubElement(case, "system-out").text = f"WARNING {r.case.requirement}: {r.message}"
    for blocked in run.blocked:
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": f"conformance.{blocked.stage}", "name": blocked.id, "time": "0"})
        ElementTree.SubElement(case, "skipped", {
            "message": f"blocked: {run.blocked_by.case.id} failed ({run.blocked_by.status})"})
    for not_run in run.not_run:
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": f"conformance.{not_run.stage}", "name": not_run.id, "time": "0"})
        ElementTree.SubElement(case, "skipped", {"message": "not run: the run was interrupted"})
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def line_width(stream, cases: int) -> Optional[int]:
    """How long a line of ``stream`` may be before it is cut, or None for never. Only a
    terminal showing a run of several cases cuts (to its width, COLUMNS when set): a log keeps
    every word of the line that explains a failure, and so does a one-case run, which is what
    every reproduce command starts."""
    if cases == 1 or not stream.isatty():
        return None
    return max(shutil.get_terminal_size().columns, 40)


class Progress:
    """Progress on a stream (standard error). Each case is announced when it starts, so during a
    hang the last line names the case that hangs. On a terminal one line rewrites itself; in a
    log (not a terminal: CI) each case gets a plain line. Anything but a pass or a "not
    supported" is printed as it happens, cut only as line_width says."""

    def __init__(self, stream=sys.stderr, quiet=False):
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty()

    def started(self, case, index: int, total: int):
        if self.quiet:
            return
        counter = f"[{index:>{len(str(total))}}/{total}]"
        if self.tty:
            self.stream.write(f"\r\x1b[K{counter} {case.id}")
        else:
            self.stream.write(f"{counter} {case.id}\n")
        self.stream.flush()

    def finished(self, result: Result, index: int, total: int):
        if self.quiet:
            return
        if result.status in BREAKING or result.status == "WARNING":
            if self.tty:
                self.stream.write("\r\x1b[K")
            head = f"{result.status:<8} {result.case.id}: "
            self.stream.write(head + _first_line(result.message,
                                                 _room(line_width(self.stream, total), head)) + "\n")
        if self.tty and index == total:
            self.stream.write("\r\x1b[K")
        self.stream.flush()


def _first_line(text: str, width: Optional[int] = None) -> str:
    """The first line of ``text``, cut to ``width`` characters (None: whole)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if width is None or len(line) <= width else line[:width - 1] + "…"


def _room(width: Optional[int], prefix: str) -> Optional[int]:
    """What is left of a line of ``width`` after ``prefix`` (never less than 40)."""
    return None if width is None else max(width - len(prefix), 40)


def terminal_summary(run: Run, expectations=None, width: Optional[int] = None) -> str:
    """The summary for people; ``width``: the longest line (line_width), None for whole lines."""
    c = counts(run)
    stages = []
    for r in run.results:
        if r.stage not in stages:
            stages.append(r.stage)
    shown = run.backend_file
    if run.canonical and run.canonical != run.backend_file:
        shown += f" -> {run.canonical}"
    lines = ["", f"backend  {shown}",
             f"id       {run.backend_id or '?'}   Backend API {run.backend_version or '?'}"
             + (f"   seed {run.seed}" if run.seed is not None else "")
             + ("   quick tier" if run.tier == "quick" else ""), ""]
    header = f"{'stage':<12}" + "".join(f"{s:>14}" for s in STATUSES)
    lines.append(header)
    for stage in stages:
        row = {s: 0 for s in STATUSES}
        for r in run.results:
            if r.stage == stage:
                row[r.status] += 1
        lines.append(f"{stage:<12}" + "".join(f"{row[s] or '.':>14}" for s in STATUSES))
    lines.append(f"{'total':<12}" + "".join(f"{c[s]:>14}" for s in STATUSES))
    failures = _failure_lines(run, expectations, width)
    if failures:
        lines += ["", "Failures (each with the command that reproduces it alone):"] + failures
    warnings = [r for r in run.results if r.status == "WARNING"]
    if warnings:
        lines += ["", "Warnings:"]
        for r in warnings:
            head = f"  {r.case.id} ({r.case.requirement}): "
            lines.append(head + _first_line(r.message, _room(width, head)))
    if run.blocked:
        lines += ["", f"{len(run.blocked)} cases were not run: {run.blocked_by.case.id} "
                      f"({run.blocked_by.case.requirement}) must pass first; it ended "
                      f"{run.blocked_by.status}: {_first_line(run.blocked_by.message, width)}"]
    if expectations is not None:
        findings = expectations.findings(run)
        for finding in findings["unexpected_passes"]:
            lines.append(f"  unexpected pass: {finding} is listed as an expected failure")
        for entry in findings["unmatched"]:
            lines.append(f"  expectations entry {entry!r} matches no case")
    if run.interrupted is not None:
        lines += ["", f"INTERRUPTED during {run.interrupted.id}: {len(run.not_run)} cases not run"]
    lines += ["", verdict_line(run)]
    return "\n".join(lines) + "\n"


_SAME = {"FAIL": "failure", "CRASH": "crash", "TIMEOUT": "hang", "ERROR": "error"}
_INDENT = " " * 11


def _failure_lines(run: Run, expectations=None, width: Optional[int] = None) -> list:
    """One entry per distinct failure: cases that failed with the same message are counted on
    one line, and failures marked as consequences are listed under the case they stem from."""
    problems = [r for r in run.results if r.status in BREAKING]
    consequences: Dict[str, list] = {}
    groups: Dict[tuple, list] = {}
    for r in problems:
        if r.consequence_of:
            consequences.setdefault(r.consequence_of, []).append(r)
        else:
            groups.setdefault((r.status, r.message), []).append(r)
    lines = []
    for (status, message), members in groups.items():
        first = members[0]
        expected = expectations.reason_for_result(first) if expectations else None
        note = f" [expected: {expected}]" if expected else ""
        more = (f" and {len(members) - 1} more with the same {_SAME[status]}"
                if len(members) > 1 else "")
        head = (f"  {status:<8} {first.case.id} ({first.case.requirement}, stage "
                f"{first.stage}){more}{note}: ")
        lines.append(head + _first_line(message, _room(width, head)))
        if len(members) > 1:
            lines.append(_INDENT + _first_line(", ".join(m.case.id for m in members[1:]),
                                               _room(width, _INDENT)))
        lines.append(f"{_INDENT}$ {reproduce_command(run, first.case.id)}")
        if status in ("CRASH", "TIMEOUT"):
            lines.append(f"{_INDENT}in one process, under gdb, valgrind or ASan: add --in-process "
                         f"(README: debugging a crash)")
        if first.output:
            head = f"{_INDENT}its last output: "
            lines.append(head + _first_line(first.output.splitlines()[-1], _room(width, head)))
        followers = [c for m in members for c in consequences.get(m.case.id, [])]
        if followers:
            lines.append(f"{_INDENT}consequences (the same defect, seen again): " + ", ".join(
                f"{c.case.id} ({c.case.requirement}, {c.status})" for c in followers))
    return lines


def verdict_line(run: Run) -> str:
    counted = f"{len(run.results)} run, {len(run.blocked)} blocked, {run.seconds:.2f} s"
    ran = len(run.selected) - len(run.not_run)
    partial = (f"PARTIAL RUN: {ran} of {run.total_cases} cases"
               + (f", -k {run.selection!r}" if run.selection else "")
               + (", interrupted" if run.interrupted else ""))
    if run.verdict == "conformant":
        return f"CONFORMANT{' (quick tier)' if run.tier == 'quick' else ''}  ({counted})"
    if run.verdict == "partial":
        return (f"PASSED ({partial})  ({counted})\n"
                f"Not a conformance verdict: only a run of every case (no -k) says CONFORMANT.")
    return f"NOT CONFORMANT  ({counted}" + (f"; {partial})" if run.partial else ")")


def write(path: str, data: bytes):
    """Write a report file; its directory must exist (it is never created)."""
    with open(path, "wb") as f:
        f.write(data)
