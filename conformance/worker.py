"""A worker process of the conformance kit: loads the backend library and runs the cases it is
sent, announcing each before calling into the backend.

    python -m conformance.worker FILE COMMAND_FD EVENT_FD CALL_FD [CALL_TIMEOUT]

Commands and events are JSON lines on the two inherited pipes (never stdout, which the vendor's
code may write to). Events: ``loading``, then ``loaded``; per case ``start``, then ``done`` with
a status and a message. If the process dies between ``start`` and ``done``, the controller
records a crash of that case, named by the backend call noted in CALL_FD (tracing.py). With
CALL_TIMEOUT, the backend runs in a backend host process (``--backend-host process``): a crash
or a hang there ends the case (CRASH, TIMEOUT, named by the call) and the worker goes on.

``run_case`` is also what ``backend-conformance run --in-process`` calls, in the kit's own
process, for debuggers and sanitizers.
"""
import gc
import json
import os
import sys
import traceback

from conformance import tracing


class HostedSubjectLibrary:
    """The library under test when its backends run in a backend host: the entry points are
    read here (the loading cases), every backend is created by the host."""

    def __init__(self, library, hosted):
        self._library = library
        self.hosted = hosted

    def __getattr__(self, name):
        return getattr(self._library, name)

    def create_backend(self):
        return self.hosted.create_backend()

    def close(self):
        self.hosted.close()
        self._library.close()


class Subject:
    """The library under test, as the cases see it. Every backend object it hands out notes
    its calls in ``record``. With ``call_timeout`` (seconds), its backends run in a backend
    host process (loader.host) whose calls may take that long: a crash or hang there becomes
    the case's CRASH or TIMEOUT, and the worker goes on."""

    def __init__(self, path, record=None, announce=None, call_timeout=None):
        self.path = self.file = path  # the canonical file: nothing here checks the name
        self.record = record if record is not None else tracing.CallRecord()
        self.library = None
        self.load_failure = None
        self.seed = None          # of the generated cases' values, sent with each case
        self._announce = announce
        self.call_timeout = call_timeout

    def note(self, text):
        """Tell the controller what the case is about to try (which buffer sits against a guard
        page, which generated case runs): if the worker dies now, the report says so."""
        if self._announce is not None:
            self._announce(text)

    def load(self):
        from loader import _core
        from loader.loading import check_backend_id
        self.record.note("dlopen")  # the library's constructors run here
        library, reason, detail = _core.Library.open(self.path)
        if library is None:
            self.load_failure = f"{reason}: {detail}"
            return
        self.library, self.load_failure = tracing.Traced(library, self.record), None
        backend_id, _ = check_backend_id(self.library.read_backend_id())
        major, minor = self.library.read_version()
        if backend_id is not None:
            self.library.accept(backend_id, major, minor)
            if self.call_timeout is not None:
                self.library = tracing.Traced(HostedSubjectLibrary(library, self._hosted(
                    library, backend_id, major, minor)), self.record)

    def host(self):
        """The backend host serving the backends (None in process)."""
        target = getattr(self.library, "_target", None)
        return target.hosted.host if isinstance(target, HostedSubjectLibrary) else None

    def _hosted(self, library, backend_id, major, minor):
        from conformance import resource_usage
        from loader.host import HostSettings, HostedLibrary
        status = os.stat(self.path)
        hosted = HostedLibrary(self.path, backend_id, major, minor,
                               (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns),
                               HostSettings(self.call_timeout, 1 << 30, {}))
        resource_usage.watch_host(lambda: hosted.host.pid)
        return hosted

    def unload(self):
        if self.library is not None:
            self.library.close()
            self.library = None

    def mapped(self):
        real = os.path.realpath(self.path)
        with open("/proc/self/maps") as f:
            return any(line.rstrip("\n").endswith(" " + real) for line in f)

    def backend(self):
        return self.library.create_backend()

    def working_on(self, layer_case: dict):
        """The layer case (a layer_cases.yaml entry) the next backend calls are for."""
        self.record.layer = layer_case["id"]

    def identity(self) -> dict:
        if self.library is None:
            return {}
        raw = self.library.read_backend_id()
        return {"id": None if raw is None else raw.decode("ascii", "backslashreplace"),
                "version": "%d.%d" % self.library.read_version()}


def run_case(subject: Subject, case) -> dict:
    """Run one case in this process: ``{"status", "message", "layer"}``, where ``layer`` is the
    layer case a layer mismatch belongs to."""
    from conformance import cases
    import loader
    subject.record.clear()
    layer = None
    host = subject.host()
    crashes = host.crash_count if host is not None else 0
    try:
        if subject.library is None and case.id != "entry.load":
            raise cases.Failed(f"the library is not loaded: {subject.load_failure}")
        status, message = "PASS", case.function(subject) or ""
    except loader.BackendCrashedError as error:    # in a backend host: the worker lives on
        status, message = "CRASH", str(error).split("\n", 1)[0]
    except cases.LayerMismatch as error:
        status, message, layer = "FAIL", str(error), error.layer_case
    except cases.Failed as error:
        status, message = "FAIL", str(error)
    except cases.NotSupported as error:
        status, message = "NOT_SUPPORTED", str(error)
    except cases.Warning_ as error:
        status, message = "WARNING", str(error)
    except loader.FeatureNotAvailableError as error:  # declared absent by version or NULL
        status, message = "NOT_SUPPORTED", str(error)
    except loader.BackendError as error:  # the backend misbehaved where the case did not expect it
        status, message = "FAIL", f"{type(error).__name__}: {error}"
    except Exception as error:  # the case itself broke: not the backend's verdict
        status = "ERROR"
        message = f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"
    subject.record.note("destroy (objects the case left to the garbage collector)")
    gc.collect()
    # What is left lives on (imports, caches of cases): frozen, the collections the next cases
    # make (after each, and in every leak loop) look only at what those cases made.
    gc.freeze()
    subject.record.clear()
    ended = host.crashes_since(crashes) if host is not None else []
    if ended:       # a case may have taken the error for a failure and gone on: it was a crash
        first = ended[0]
        more = f" ({len(ended)} host processes ended during the case)" if len(ended) > 1 else ""
        return {"status": "TIMEOUT" if first.timeout is not None else "CRASH",
                "message": f"backend {host.library.backend_id!r}: its host process "
                           f"{first.describe()}{more}", "layer": layer, "call": first.call,
                "output": first.output}
    return {"status": status, "message": message, "layer": layer}


def main(argv):
    path, command_fd, event_fd, call_fd = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    call_timeout = float(argv[5]) if len(argv) > 5 else None
    commands = os.fdopen(command_fd, "r")
    events = os.fdopen(event_fd, "w", buffering=1)

    def send(**event):
        events.write(json.dumps(event) + "\n")
        events.flush()

    # Import everything the cases need before touching the library.
    from conformance import cases
    import loader  # noqa: F401

    subject = Subject(path, tracing.CallRecord(call_fd),
                      announce=lambda text: send(event="note", text=text),
                      call_timeout=call_timeout)
    send(event="loading")
    subject.load()
    send(event="loaded", failure=subject.load_failure, **subject.identity())

    for line in commands:
        command = json.loads(line)
        case = cases.INFO if command["case"] == "info" else cases.CASES[command["case"]]
        subject.seed = command.get("seed")
        send(event="start", case=case.id)
        send(event="done", case=case.id, **run_case(subject, case))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
