"""One backend host process and its life: started at first use, reaped when it dies, killed
when a call outlives ``call_timeout``, started again at the next use, given up after
``max_restarts`` crashes in a row, stopped when the runtime closes.

Every call goes through ``HostProcess.call`` (or ``execute``, the same with tensors copied
through the host's I/O segment, or read in place when they are loader.shared_array arrays), under one lock per host: the host serves one request at a
time. A call either returns the host's reply or raises: ``BackendCrashedError`` when the
host died during it (named by the call the host noted in its status page, with the signal or
exit status and its last output), ``BackendTimeoutError`` when it was killed for taking too
long. Objects a host created belong to its generation; once that host is gone, using them
raises ``BackendCrashedError`` saying they were lost.
"""
import fcntl
import logging
import os
import queue
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Dict, Optional

from loader import _core
from loader.errors import (BackendCreationError, BackendCrashedError, BackendError,
                           BackendTimeoutError, FeatureNotAvailableError, BackendInternalError,
                           BackendOutOfMemoryError)
from loader.host import channel as wire, shared
from loader.isolation import signal_name

log = logging.getLogger("loader")

HOST_PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "dynamic-backend-host")
SHUTDOWN_SECONDS = 2.0          # what a host gets to destroy its objects when the runtime closes
IO_MINIMUM = 1 << 20            # bytes of the first I/O segment; it grows by doubling

LIMITS = {"address_space": "bytes", "cpu_time": "seconds"}


def check_limits(limits) -> Dict[str, int]:
    """``host_limits``: None or a dict of ``address_space`` (bytes) and ``cpu_time`` (seconds
    of CPU), each a positive int; a copy, or TypeError / ValueError naming the problem."""
    if limits is None:
        return {}
    if not isinstance(limits, dict):
        raise TypeError(f"host_limits must be a dict, not {type(limits).__name__}")
    for key, value in limits.items():
        if key not in LIMITS:
            raise ValueError(f"host_limits: unknown limit {key!r} (known: {', '.join(LIMITS)})")
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"host_limits[{key!r}] must be an int ({LIMITS[key]}), "
                            f"not {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"host_limits[{key!r}] must be positive, not {value}")
    return dict(limits)


@dataclass(frozen=True)
class HostSettings:
    call_timeout: Optional[float]
    max_restarts: int
    limits: Dict[str, int]


@dataclass(frozen=True)
class Crash:
    """How one host ended."""

    call: str
    signal: Optional[str] = None
    exit_status: Optional[int] = None
    output: str = ""
    timeout: Optional[float] = None         # killed for outliving call_timeout
    protocol: Optional[str] = None          # killed for breaking the protocol

    def describe(self) -> str:
        if self.timeout is not None:
            return f"did not return from {self.call} within {self.timeout:g} s and was killed"
        if self.protocol is not None:
            return f"broke the channel's protocol in {self.call} ({self.protocol}) and was killed"
        how = (f"was killed by {self.signal}" if self.signal is not None
               else f"exited with status {self.exit_status}" if self.exit_status is not None
               else "ended (how is unknown: its status was collected elsewhere)")
        return f"{how} in {self.call}"


class _Launcher:
    """Starts every host from one thread that lives as long as the process: a host asks for
    SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG follows the thread, not the
    process), so a host started from a short-lived thread would die with that thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: "queue.SimpleQueue" = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._pid = None

    def spawn(self, argv, actions) -> int:
        with self._lock:
            if self._thread is None or self._pid != os.getpid():   # none yet, or forked since
                self._jobs = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._run, name="backend-host-launcher",
                                                daemon=True)
                self._thread.start()
                self._pid = os.getpid()
            jobs = self._jobs
        done = threading.Event()
        job = {"argv": argv, "actions": actions, "done": done}
        jobs.put(job)
        done.wait()
        if "error" in job:
            raise job["error"]
        return job["pid"]

    def _run(self):
        while True:
            job = self._jobs.get()
            try:
                job["pid"] = os.posix_spawn(job["argv"][0], job["argv"], os.environ,
                                            file_actions=job["actions"], setsid=True)
            except BaseException as error:     # handed to the caller
                job["error"] = error
            job["done"].set()


_launcher = _Launcher()


def _high(fd: int) -> int:
    """A close-on-exec copy of ``fd`` above the numbers the host's descriptors take, so that
    no dup2 of the spawn maps a descriptor onto another still to be moved."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)


def _kind(op: str) -> str:
    """Requests that count as one kind for "crashes in a row": a network's run is execute."""
    return "execute" if op == "run_sequence" else op


def outcome_error(outcome: int, detail: str):
    """The exception for a reply whose outcome is not OK."""
    if outcome == wire.OUTCOME_ABSENT:
        return FeatureNotAvailableError(detail)
    if outcome == wire.OUTCOME_NO_MEMORY:
        return BackendOutOfMemoryError(f"the backend host: {detail}")
    if outcome == wire.OUTCOME_MALFORMED:
        return BackendInternalError(detail)
    return BackendError(f"the backend host refused the request: {detail}")


class HostProcess:
    """The host of one backend (``library``, a HostedLibrary) for one runtime."""

    def __init__(self, library, settings: HostSettings, on_unavailable=None):
        self.library = library
        self.settings = settings
        self._on_unavailable = on_unavailable
        self._lock = threading.Lock()
        self._channel = None
        self._status = None              # the status page of the host in service
        self._pid = None
        self.generation = 0              # of the host in service, or of the last one
        self._crashes: Dict[int, Crash] = {}   # generation -> how its host ended
        self.crash_count = 0             # hosts that crashed, exited or were killed so far
        self._consecutive = 0
        self._last_crash_kind = None
        self.unavailable: Optional[str] = None
        self._closed = False
        self._pending = []               # (generation, handle) destroyed by the garbage collector
        self._io = None                  # (segment, handle) of the I/O segment of this generation
        self._shared = shared.SharedSegments(self)   # loader.shared_array segments it maps
        self._output = ""                # what the last host printed before it ended
        self.restarts = 0

    # -- life ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._channel is not None

    @property
    def pid(self) -> Optional[int]:
        return self._pid if self._channel is not None else None

    def _start(self):
        library = self.library
        if self.unavailable is not None:
            raise BackendCrashedError(
                f"backend {library.backend_id!r} is unavailable: {self.unavailable}",
                backend=library.backend_id)
        if not os.path.isfile(HOST_PROGRAM):
            raise BackendCreationError(f"backend {library.backend_id!r}: the backend host "
                                       f"program {HOST_PROGRAM} is not installed")
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        status = _core.Segment(_core.HOST_STATUS_BYTES)
        output_read, output_write = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        moved = []
        try:
            moved = [_high(fd) for fd in (devnull, output_write, child_end.fileno(), status.fd)]
            actions = [(os.POSIX_SPAWN_DUP2, moved[0], 0), (os.POSIX_SPAWN_DUP2, moved[1], 1),
                       (os.POSIX_SPAWN_DUP2, moved[1], 2), (os.POSIX_SPAWN_DUP2, moved[2], 3),
                       (os.POSIX_SPAWN_DUP2, moved[3], 4)]
            dev, ino, size, mtime_ns = library.identity
            argv = [HOST_PROGRAM, str(os.getpid()), library.path, library.backend_id,
                    str(library.major), str(library.minor), str(dev), str(ino), str(size),
                    str(mtime_ns)]
            for key in sorted(self.settings.limits):
                argv += ["--" + key.replace("_", "-"), str(self.settings.limits[key])]
            pid = _launcher.spawn(argv, actions)
        except BaseException:
            parent_end.close()
            os.close(output_read)
            status.close()
            raise
        finally:
            for fd in moved + [devnull, output_write]:
                os.close(fd)
            child_end.close()
        self._channel = _core.HostChannel(parent_end.detach(), output_read, pid)
        self._status, self._pid = status, pid
        self.generation += 1
        self._io = None
        self._shared.clear()
        try:
            _, outcome, payload = self._channel.first_frame(self.settings.call_timeout)
            if outcome != wire.OUTCOME_OK:
                reason = wire.text(wire.message(payload))
                self._stop(kill=False)
                self._give_up(f"the backend host will not serve {library.path}: {reason}")
                raise BackendCreationError(f"backend {library.backend_id!r} ({library.path}): "
                                           f"the backend host will not serve the file: {reason}")
        except wire.HostChannelTimeout:
            raise self._ended("ready", timed_out=True) from None
        except wire.HostChannelClosed:
            raise self._ended("ready") from None
        except wire.HostProtocolError as error:
            raise self._ended("ready", protocol=str(error)) from None
        if self.generation > 1:
            self.restarts += 1
        self._succeeded("ready")
        log.info("backend %r: host process %d started", library.backend_id, pid)

    def _note(self) -> str:
        """The call the host noted last in its status page."""
        try:
            raw = self._status.read_bytes(0, _core.HOST_NOTE_BYTES)
        except (ValueError, AttributeError):
            return ""
        return raw.split(b"\0", 1)[0].decode("ascii", "replace").strip()

    def _stop(self, kill: bool):
        """Reap the host in service (killing its process group first when ``kill``, or when it
        does not exit by itself); the (signal, exit status) it ended with."""
        channel, self._channel = self._channel, None
        pid = self._pid
        if kill:
            self._kill_group(pid)
        deadline = time.monotonic() + SHUTDOWN_SECONDS
        status = None
        try:
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    self._kill_group(pid)
                    done, status = os.waitpid(pid, 0)
                    break
                time.sleep(0.0005)
        except ChildProcessError:     # reaped elsewhere (SIGCHLD ignored, a blanket wait())
            status = None
        # Anything the backend started in the host's group goes with it (the group's id stays
        # reserved until the last member is reaped, so this reaches no other process).
        self._kill_group(pid)
        channel.close()
        self._output = channel.output_tail()
        if self._io is not None:
            self._io[0].close()
            self._io = None
        self._shared.clear()
        if self._status is not None:
            self._status.close()
            self._status = None
        if status is None:
            return None, None
        if os.WIFSIGNALED(status):
            return signal_name(os.WTERMSIG(status)), None
        return None, os.WEXITSTATUS(status)

    @staticmethod
    def _kill_group(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _ended(self, op: str, timed_out: bool = False, protocol: Optional[str] = None):
        """The host in service died or is being killed during ``op``: reap it, record how, and
        return the error to raise."""
        note = self._note()
        signal_, exit_status = self._stop(kill=True)
        tail = self._output.strip()[-600:]
        crash = Crash(note or wire.CALLS.get(op, op), signal_, exit_status, tail,
                      self.settings.call_timeout if timed_out else None, protocol)
        self._crashes[self.generation] = crash
        self.crash_count += 1
        if len(self._crashes) > 64:
            del self._crashes[min(self._crashes)]
        self._consecutive += 1
        self._last_crash_kind = _kind(op)
        library = self.library
        message = f"backend {library.backend_id!r}: its host process {crash.describe()}"
        if self._consecutive >= self.settings.max_restarts:
            self._give_up(f"its host crashed {self._consecutive} time"
                          f"{'s' * (self._consecutive != 1)} in a row (the last one "
                          f"{crash.describe()})")
            message += f"; the backend is now unavailable ({self._consecutive} crashes in a row)"
        else:
            message += "; the next use starts a new one"
        if tail:
            message += f"\nthe host's last output:\n{tail}"
        cls = BackendTimeoutError if timed_out else BackendCrashedError
        log.info("%s", message.split("\n", 1)[0])
        return cls(message, backend=library.backend_id, call=crash.call, signal=signal_,
                   exit_status=exit_status, output=tail)

    def _give_up(self, reason: str):
        self.unavailable = reason
        if self._on_unavailable is not None:
            self._on_unavailable(self.library.backend_id, reason)

    def close(self):
        """Stop the host: ask it to destroy everything, reap it (killing it if it does not end
        in time, or if a call in another thread does not let go of it). Idempotent; later calls
        raise."""
        self._closed = True
        if not self._lock.acquire(timeout=SHUTDOWN_SECONDS):
            pid = self._pid                 # a call hangs: ending its host ends the call
            if pid is not None and self._channel is not None:
                self._kill_group(pid)
            self._lock.acquire()
        try:
            if self._channel is None:
                return
            try:
                self._channel.request(wire.OP["shutdown"], timeout=SHUTDOWN_SECONDS)
                kill = False
            except (wire.HostChannelClosed, wire.HostChannelTimeout, wire.HostProtocolError):
                kill = True
            self._stop(kill=kill)
        finally:
            self._lock.release()

    # -- calls ---------------------------------------------------------------------------

    def crashes_since(self, count: int):
        """How the hosts ended that ended after ``crash_count`` was ``count`` (the last 64)."""
        return [self._crashes[g] for g in sorted(self._crashes)][-(self.crash_count - count):] \
            if self.crash_count > count else []

    def check(self, owner):
        """Raise what using ``owner`` (a proxy) raises now, without calling the host."""
        with self._lock:
            self._channel_for(owner)

    def _channel_for(self, owner):
        if self._closed:
            raise BackendError(f"backend {self.library.backend_id!r}: the runtime that hosted "
                               f"it was closed, and its backend host with it")
        if owner is None:
            if self._channel is None:
                self._start()
            return self._channel
        if owner._closed:        # closed by another thread while this call waited
            raise owner._closed_error()
        if owner._generation != self.generation or self._channel is None:
            crash = self._crashes.get(owner._generation)
            detail = (f"when its host process {crash.describe()}" if crash is not None
                      else "with its host process")
            raise BackendCrashedError(
                f"{owner._what} of backend {self.library.backend_id!r} was lost {detail}; "
                f"create it again", backend=self.library.backend_id,
                call=crash.call if crash else None, signal=crash.signal if crash else None,
                exit_status=crash.exit_status if crash else None,
                output=crash.output if crash else "")
        return self._channel

    def _flush(self, channel):
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        handles = [h for g, h in pending if g == self.generation]
        if handles:
            channel.send(wire.OP["destroy"], payload=wire.destroy(handles),
                         timeout=self.settings.call_timeout)

    def _run(self, op: str, action):
        """``action()`` against the host in service, turning its death into the error."""
        try:
            self._flush(self._channel)
            result = action()
        except wire.HostChannelTimeout:
            raise self._ended(op, timed_out=True) from None
        except wire.HostChannelClosed:
            raise self._ended(op) from None
        except wire.HostProtocolError as error:
            raise self._ended(op, protocol=str(error)) from None
        self._succeeded(op)
        return result

    def _succeeded(self, op: str):
        """A call of the kind that crashed last went through: the crashes are no longer in a
        row."""
        if self._consecutive and _kind(op) == self._last_crash_kind:
            self._consecutive = 0

    def call(self, owner, op: str, handle: int = 0, value: int = 0, payload: bytes = b"",
             fd: int = -1):
        """Request ``op`` of the host (starting one when ``owner`` is None and none runs):
        (handle, value, outcome, payload)."""
        code = wire.OP[op]
        with self._lock:
            channel = self._channel_for(owner)
            return self._run(op, lambda: channel.request(code, handle, value, payload, fd,
                                                         self.settings.call_timeout))

    def execute(self, owner, arrays, output, flags: bool, nbytes: int):
        """A workload's execute through the I/O segment: (status, message bytes). The hot path:
        ``_run`` and ``_io_segment`` spelled out."""
        with self._lock:
            channel = self._channel
            if channel is None or owner._generation != self.generation or self._closed \
                    or owner._closed:
                self._channel_for(owner)                     # raises: lost or closed
            try:
                if self._pending:
                    self._flush(channel)
                places = self._shared.places(channel, arrays + [output]) if shared.in_use \
                    else None
                io = self._io
                if places is not None and None not in places:
                    io = (None, 0)                           # nothing to copy
                elif io is None or io[0].size < nbytes:
                    io = self._io_segment(channel, nbytes)
                answer = channel.execute(owner._handle, arrays, output, io[0], io[1], flags,
                                         self.settings.call_timeout, places)
            except wire.HostChannelTimeout:
                raise self._ended("execute", timed_out=True) from None
            except wire.HostChannelClosed:
                raise self._ended("execute") from None
            except wire.HostProtocolError as error:
                raise self._ended("execute", protocol=str(error)) from None
            if self._consecutive:
                self._succeeded("execute")
        if len(answer) == 4:      # the host refused the request
            raise outcome_error(answer[2], wire.text(wire.message(answer[3])))
        return answer

    def _io_segment(self, channel, nbytes: int):
        """The I/O segment of the host in service, at least ``nbytes`` long (lock held)."""
        if self._io is not None and self._io[0].size >= nbytes:
            return self._io
        size = max(IO_MINIMUM, self._io[0].size if self._io else 0)
        while size < nbytes:
            size *= 2
        segment = _core.Segment(size)
        try:
            handle = self.hand_over(channel, segment)
        except BaseException:
            segment.close()
            raise
        if self._io is not None:
            channel.send(wire.OP["destroy"], payload=wire.destroy([self._io[1]]))
            self._io[0].close()
        self._io = (segment, handle)
        return self._io

    def hand_over(self, channel, segment) -> int:
        """Map ``segment`` writable in the host in service (lock held): its handle there."""
        handle, _, outcome, payload = channel.request(
            wire.OP["add_segment"], 0, wire.SEGMENT_WRITABLE, wire.u64(segment.size), segment.fd,
            self.settings.call_timeout)
        if outcome != wire.OUTCOME_OK:
            raise outcome_error(outcome, wire.text(wire.message(payload)))
        return handle

    def add_segment(self, owner, segment, writable: bool) -> int:
        """Hand ``segment`` to the host ``owner`` (a proxy or executor) belongs to: its handle
        there."""
        handle, _, outcome, payload = self.call(
            owner, "add_segment", 0, wire.SEGMENT_WRITABLE if writable else 0,
            wire.u64(segment.size), segment.fd)
        if outcome != wire.OUTCOME_OK:
            raise outcome_error(outcome, wire.text(wire.message(payload)))
        return handle

    def release(self, generation: int, handle: int):
        """The runtime gave up an object of ``generation``: destroyed with the next request
        (safe from a finalizer: it only appends)."""
        if handle and generation == self.generation and not self._closed:
            self._pending.append((generation, handle))

    def destroy_now(self, generation: int, handle: int):
        """``release`` and tell the host at once, when it is in service."""
        self.release(generation, handle)
        with self._lock:
            if self._channel is not None and not self._closed:
                try:
                    self._flush(self._channel)
                except wire.HostChannelTimeout:
                    self._ended("destroy", timed_out=True)
                except (wire.HostChannelClosed, wire.HostProtocolError):
                    self._ended("destroy")

    def ping(self):
        """One round trip to the host (started if needed), for benchmarks."""
        self.call(None, "ping")

    def __repr__(self):
        state = ("unavailable" if self.unavailable else "closed" if self._closed
                 else f"pid {self._pid}" if self._channel else "not running")
        return f"<HostProcess of {self.library.backend_id!r} {state}>"
