"""Isolated probing: load a candidate first in a short-lived child process, so that a library
that crashes, hangs or exits while loading is skipped (``probe-crashed``, ``probe-timeout``)
instead of taking the host process down. The child runs ``dynamic-backend-probe`` (probe.c),
a small C program: no Python in it, so it starts in about a millisecond.

Only a file the probe loaded and unloaded cleanly reaches the host. When the dynamic linker
refused it in the probe, the host reports the linker's message (classified as the host's own
dlopen failure would be) and never loads it: the probe is not the host process (it lacks the
host's exported symbols and preloads), so what failed there could succeed, or crash, here.
"""
import os
import signal
import subprocess
from typing import Optional, Tuple

from loader import _core
from loader.reasons import Reason

PROBE_PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamic-backend-probe")
DEFAULT_TIMEOUT = 5.0


def signal_name(number: int) -> str:
    """SIGSEGV for 11, and so on."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def probe(path: str, timeout: float = DEFAULT_TIMEOUT) -> Optional[Tuple[Reason, str]]:
    """None when loading ``path`` in a child process ended normally, else (reason, detail)."""
    try:
        child = subprocess.Popen([PROBE_PROGRAM, path], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/",
                                 start_new_session=True)
    except OSError as error:
        return Reason.PROBE_CRASHED, f"the probe could not be started: {error.strerror}"
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        output, _ = child.communicate()
        return Reason.PROBE_TIMEOUT, (f"loading did not finish within {timeout:g} s "
                                      f"(stage {_last_stage(output)})")
    lines = output.decode("utf-8", "replace").splitlines()
    if child.returncode < 0:
        return Reason.PROBE_CRASHED, (f"the probe was killed by {signal_name(-child.returncode)} "
                                      f"(stage {_last_stage(output)})")
    if child.returncode != 0 or "done" not in lines:
        return Reason.PROBE_CRASHED, (f"the probe exited with status {child.returncode} "
                                      f"(stage {_last_stage(output)})")
    refused = [line[len("refused "):] for line in lines if line.startswith("refused ")]
    if refused:
        return _core.classify_dlopen_error(path, refused[0])
    return None


def _last_stage(output: bytes) -> str:
    stages = [line[6:] for line in output.decode("utf-8", "replace").splitlines()
              if line.startswith("stage ")]
    return stages[-1] if stages else "start"
