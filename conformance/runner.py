"""The controlling side of the kit: runs file cases itself, hands every other case to a worker
process, watches it, and turns a crash, an exit or a hang into a result instead of a failure of
the kit, named by the backend call in progress. The controlling process never loads the vendor
library (unless asked to run in-process, for a debugger or a sanitizer).
"""
import fnmatch
import json
import math
import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Iterable, List, Optional

from conformance import cases as _cases
from conformance import tracing
from conformance.cases import Case
from loader.isolation import signal_name

STATUSES = ("PASS", "WARNING", "NOT_SUPPORTED", "FAIL", "CRASH", "TIMEOUT", "ERROR")
BREAKING = ("FAIL", "CRASH", "TIMEOUT", "ERROR")
DEFAULT_TIMEOUT = 10.0
MAX_TIMEOUT = 86400.0
STARTUP_TIMEOUT = 60.0  # Python, NumPy and the loader importing on a busy machine


def parse_seconds(text: str) -> float:
    """A per-case timeout: a finite number of seconds in (0, MAX_TIMEOUT]; ValueError otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT:
        raise ValueError(f"{text!r}: give a number of seconds greater than 0 and at most "
                         f"{MAX_TIMEOUT:g}")
    return value


class BackendFileError(ValueError):
    """The backend file named by the user cannot be tested at all (missing, not a file)."""


def check_backend_file(path: str) -> str:
    """``path`` made absolute, after checking that it leads (through any symlinks) to a regular
    file; raises BackendFileError naming the problem. The name itself is the kit's FILE-1 case."""
    given = os.path.abspath(path)
    try:
        mode = os.stat(given).st_mode
    except FileNotFoundError:
        if os.path.islink(given):
            raise BackendFileError(f"{path}: dangling symlink (-> {os.readlink(given)})") from None
        raise BackendFileError(f"{path}: no such file") from None
    except OSError as error:
        raise BackendFileError(f"{path}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise BackendFileError(f"{path}: {kind}")
    return given


@dataclass
class Result:
    case: Case
    status: str
    message: str = ""
    seconds: float = 0.0
    call: Optional[str] = None            # CRASH/TIMEOUT: the backend function it happened in
    layer: Optional[str] = None           # the layer case (layer_cases.yaml id) it concerns
    consequence_of: Optional[str] = None  # the earlier case that failed the same way first
    output: str = ""                      # CRASH: the tail of what the worker printed

    @property
    def stage(self) -> str:
        return self.case.stage


@dataclass
class Run:
    """Everything one run found."""

    backend_file: str            # as the user gave it (absolute, symlinks kept)
    canonical: str = ""          # the regular file it resolves to: what is read and loaded
    results: List[Result] = field(default_factory=list)
    blocked: List[Case] = field(default_factory=list)
    blocked_by: Optional[Result] = None
    backend_id: Optional[str] = None
    backend_version: Optional[str] = None
    seconds: float = 0.0
    selection: Optional[str] = None       # the -k expression, None for every case
    selected: List[str] = field(default_factory=list)  # ids of the cases asked for, in order
    total_cases: int = 0                  # cases in the whole kit
    started: float = 0.0                  # wall-clock times (time.time())
    finished: float = 0.0
    interrupted: Optional[Case] = None    # the case that was running at Ctrl-C
    seed: Optional[int] = None            # of the generated cases' values
    tier: str = "full"                    # "quick": the fixed cases only
    not_run: List[Case] = field(default_factory=list)  # after an interruption, that case on

    @property
    def failed(self) -> bool:
        """Something broke: the backend is not conformant, whatever else did not run."""
        return bool(self.blocked) or any(r.status in BREAKING for r in self.results)

    @property
    def partial(self) -> bool:
        """Not every case of the kit was asked for, or the run was interrupted: passing says
        nothing about conformance."""
        return self.interrupted is not None or len(set(self.selected)) < self.total_cases

    @property
    def verdict(self) -> str:
        """``not-conformant``, ``partial`` (no failure, but not every case ran) or
        ``conformant``."""
        if self.failed:
            return "not-conformant"
        return "partial" if self.partial else "conformant"

    @property
    def conformant(self) -> bool:
        return self.verdict == "conformant"


def select_cases(expression: Optional[str], quick: bool = False) -> List[Case]:
    """Cases whose id matches ``expression``: comma-separated substrings or globs, each optionally
    prefixed with ``not `` to exclude; a term that is a case's whole id selects that case alone
    (``memory.Transpose`` is not ``memory.TransposeConvolution2d``), so every reproduce command
    runs one case. None selects every case (of the quick tier, ``quick``)."""
    ordered = [c for c in _cases.ordered_cases() if not quick or c.tier == "quick"]
    if not expression:
        return ordered
    include, exclude = [], []
    for term in (t.strip() for t in expression.split(",")):
        if term.startswith("not "):
            exclude.append(term[4:].strip())
        elif term:
            include.append(term)
    ids = {c.id for c in ordered}

    def matches(case_id, term):
        if any(c in term for c in "*?["):
            return fnmatch.fnmatchcase(case_id, term)
        return case_id == term if term in ids else term in case_id
    return [c for c in ordered
            if (not include or any(matches(c.id, t) for t in include))
            and not any(matches(c.id, t) for t in exclude)]


class Worker:
    """One worker process with the library loaded; restarted by the controller after it dies."""

    def __init__(self, backend_file: str, log, calls_fd: int, call_timeout=None):
        self.log = log
        self.log_start = log.seek(0, os.SEEK_END)
        command_read, self.command_write = os.pipe()
        self.event_read, event_write = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
        host = [] if call_timeout is None else [repr(call_timeout)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "conformance.worker", backend_file, str(command_read),
             str(event_write), str(calls_fd)] + host,
            pass_fds=(command_read, event_write, calls_fd), stdin=subprocess.DEVNULL, stdout=log,
            stderr=log, cwd="/", env=env, start_new_session=True)
        os.close(command_read)
        os.close(event_write)
        self.buffer = b""
        self.loaded: Optional[dict] = None

    def next_event(self, timeout: float) -> Optional[dict]:
        """The next event; None at end of file; raises TimeoutError."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.event_read], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.event_read, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def send(self, **command) -> bool:
        try:
            os.write(self.command_write, (json.dumps(command) + "\n").encode())
            return True
        except OSError:  # the worker is gone
            return False

    def death(self) -> str:
        """How the process ended (it has closed its event pipe)."""
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return "stopped answering"
        if code < 0:
            return f"was killed by {signal_name(-code)}"
        return f"exited with status {code}"

    def kill(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()

    def close(self):
        for fd in (self.command_write, self.event_read):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.kill()


class Controller:
    """Runs cases against one backend file with crash isolation."""

    def __init__(self, backend_file: str, timeout: float = DEFAULT_TIMEOUT, progress=None,
                 in_process: bool = False, seed: Optional[int] = None, quick: bool = False,
                 backend_host: str = "in-process"):
        """``progress``, if given, has ``started(case, index, total)``, called before a case
        runs, and ``finished(result, index, total)`` (report.Progress). ``in_process`` runs
        every case in this process, without isolation or timeout: for gdb, valgrind or ASan.
        ``seed``: of the generated cases' values (layer_runs.DEFAULT_SEED when None). ``quick``:
        the run is of the quick tier, which is whole when every quick case ran.
        ``backend_host``: ``"process"`` runs every backend call of the cases in a backend host
        process (loader.host) that the worker starts: a crash or a hang there ends that case
        alone (a call may take half the case's timeout) and the worker goes on."""
        from conformance.layer_runs import DEFAULT_SEED
        self.seed = DEFAULT_SEED if seed is None else seed
        self.quick = quick
        self.backend_file = os.path.abspath(backend_file)
        self.canonical = os.path.realpath(self.backend_file)
        self.timeout = timeout
        self.progress = progress
        self.in_process = in_process
        self.call_timeout = timeout / 2 if backend_host == "process" else None
        self.worker: Optional[Worker] = None
        self.subject = None                    # in_process: the library, loaded here
        self.identity: Optional[dict] = None   # id and version, as the first worker read them
        self.first_failure = {}                # (status, call, layer case) -> first case id
        self.log = tempfile.TemporaryFile()
        self.calls = tempfile.TemporaryFile()  # shared with each worker: the call in progress
        self.calls.truncate(tracing.SIZE)

    # -- workers ---------------------------------------------------------------------------

    def _worker_output(self) -> str:
        """The tail of what the current worker printed."""
        self.log.seek(self.worker.log_start if self.worker else 0)
        tail = self.log.read()[-600:].decode("utf-8", "replace").strip()
        self.log.seek(0, os.SEEK_END)
        return tail

    def _call_in_progress(self):
        return tracing.read(os.pread(self.calls.fileno(), tracing.SIZE, 0))

    def _clear_call(self):
        os.pwrite(self.calls.fileno(), b"\0", 0)

    def _start_worker(self) -> Optional[Result]:
        """A worker with the library loaded, or the result that explains why there is none."""
        load_case = _cases.CASES["entry.load"]
        self._clear_call()
        self.worker = Worker(self.canonical, self.log, self.calls.fileno(), self.call_timeout)
        try:
            event = self.worker.next_event(STARTUP_TIMEOUT)  # "loading": Python is up
            if event is not None:
                event = self.worker.next_event(self.timeout)
        except TimeoutError:
            self.worker.kill()
            self.worker = None
            call, _ = self._call_in_progress()
            return Result(load_case, "TIMEOUT", f"loading the library did not finish in "
                                                f"{self.timeout:g} s{_in(call)}", call=call)
        if event is None:
            how = self.worker.death()
            output = self._worker_output()
            self.worker = None
            call, _ = self._call_in_progress()
            return Result(load_case, "CRASH", f"the worker {how} while loading the library"
                                              f"{_in(call)}", call=call, output=output)
        self.worker.loaded = event
        self.identity = self.identity or {k: event.get(k) for k in ("id", "version")}
        return None

    def _stop_worker(self):
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    # -- cases -----------------------------------------------------------------------------

    def _run_in_controller(self, case: Case) -> Result:
        try:
            case.function(_FileSubject(self.backend_file, self.canonical))
            return Result(case, "PASS")
        except _cases.Failed as error:
            return Result(case, "FAIL", str(error))
        except _cases.NotSupported as error:
            return Result(case, "NOT_SUPPORTED", str(error))
        except _cases.Warning_ as error:
            return Result(case, "WARNING", str(error))
        except Exception as error:
            return Result(case, "ERROR", f"{type(error).__name__}: {error}")

    def _run_in_worker(self, case: Case) -> Result:
        if self.worker is None:
            failure = self._start_worker()
            if failure is not None:
                if case.id == "entry.load":
                    return failure
                return Result(case, failure.status, f"could not load the library: "
                                                    f"{failure.message}", call=failure.call,
                              output=failure.output)
        worker = self.worker
        self._clear_call()
        if not worker.send(case=case.id, seed=self.seed):
            self._stop_worker()
            return Result(case, "CRASH", "the worker was gone before the case started")
        doing = ""  # the case's last note: what it was about to try (guarded placements, ...)
        try:
            event = worker.next_event(self.timeout)
            while event is not None and event.get("event") in ("start", "note"):
                doing = f", while {event['text']}" if event.get("event") == "note" else doing
                event = worker.next_event(self.timeout)
        except TimeoutError:
            worker.kill()
            self._stop_worker()
            call, layer = self._call_in_progress()
            return Result(case, "TIMEOUT", f"no answer within {self.timeout:g} s{_in(call)}"
                                           f"{doing}; the worker was killed", call=call, layer=layer)
        if event is None:
            how = worker.death()
            output = self._worker_output()
            self._stop_worker()
            call, layer = self._call_in_progress()
            return Result(case, "CRASH", f"the worker {how}{_in(call)}{doing}", call=call,
                          layer=layer, output=output)
        return Result(case, event["status"], event.get("message", ""), call=event.get("call"),
                      layer=event.get("layer"), output=event.get("output") or "")

    def _run_here(self, case: Case) -> Result:
        """The case in this process (``in_process``): a crash ends the kit, as it should under
        a debugger."""
        from conformance import worker
        if self.subject is None:
            self.subject = worker.Subject(self.canonical, call_timeout=self.call_timeout)
            self.subject.seed = self.seed
            self.subject.load()
            self.identity = self.identity or self.subject.identity() or None
        outcome = worker.run_case(self.subject, case)
        return Result(case, outcome["status"], outcome["message"], call=outcome.get("call"),
                      layer=outcome["layer"], output=outcome.get("output") or "")

    def run_one(self, case: Case) -> Result:
        """Run one case (starting a worker if none is running)."""
        started = time.monotonic()
        if case.in_controller:
            result = self._run_in_controller(case)
        elif self.in_process:
            result = self._run_here(case)
        else:
            result = self._run_in_worker(case)
        result.seconds = time.monotonic() - started
        self._mark_consequence(result)
        return result

    def _mark_consequence(self, result: Result):
        """A failure that an earlier case already showed for the same layer case, the same way
        (the same mismatch, or a crash or hang in the same backend call), is a consequence of
        that case: it stays a failure, but points at the case that owns it. Layer cases run
        before the lifecycle and concurrency cases, so a wrong layer is owned by its own case."""
        if result.status not in BREAKING or not result.layer:
            return
        key = (result.status, result.call, result.layer)
        owner = self.first_failure.setdefault(key, result.case.id)
        if owner != result.case.id:
            result.consequence_of = owner
            result.message = (f"consequence of {owner} ({_cases.CASES[owner].requirement}): "
                              f"{result.message}")

    def close(self):
        self._stop_worker()
        self.log.close()
        self.calls.close()

    def run(self, selected: Iterable[Case], selection: Optional[str] = None) -> Run:
        """Run ``selected`` (chosen by the -k expression ``selection``) in order."""
        started = time.monotonic()
        selected = list(selected)
        run = Run(self.backend_file, self.canonical, selection=selection,
                  selected=[c.id for c in selected],
                  total_cases=len(select_cases(None, self.quick)), started=time.time(),
                  seed=self.seed, tier="quick" if self.quick else "full")
        blockers: List[Result] = []
        index = 0
        try:
            for index, case in enumerate(selected):
                if any(b.case.blocks_case(case) for b in blockers):
                    run.blocked.append(case)
                    continue
                if self.progress:
                    self.progress.started(case, index + 1, len(selected))
                result = self.run_one(case)
                run.results.append(result)
                if self.progress:
                    self.progress.finished(result, index + 1, len(selected))
                if case.blocking and result.status in BREAKING:
                    blockers.append(result)
                    run.blocked_by = run.blocked_by or result
        except KeyboardInterrupt:
            # Ctrl-C: keep what ran, so the caller can still write its reports.
            if self.worker is not None:
                self.worker.kill()
            finished = {r.case.id for r in run.results} | {c.id for c in run.blocked}
            run.not_run = [c for c in selected[index:] if c.id not in finished]
            run.interrupted = run.not_run[0] if run.not_run else selected[index]
        finally:
            self.close()
        if self.identity:
            run.backend_id, run.backend_version = self.identity["id"], self.identity["version"]
        run.seconds = time.monotonic() - started
        run.finished = time.time()
        return run


def _in(call: Optional[str]) -> str:
    return f" in {call}" if call else ""


class _FileSubject:
    def __init__(self, path, file):
        self.path = path   # as given: the name the loader would check
        self.file = file   # canonical: what is read


def run_cases(backend_file: str, expression: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT,
              progress=None, in_process: bool = False, quick: bool = False,
              seed: Optional[int] = None, backend_host: str = "in-process") -> Run:
    return Controller(backend_file, timeout, progress, in_process, seed, quick,
                      backend_host).run(select_cases(expression, quick), expression)
