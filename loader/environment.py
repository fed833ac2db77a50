"""Every environment variable the loader reads, in one place, and how each value is parsed.

Explicit arguments (``Runtime(...)``, command-line options) always win over these. A bad value
is never fatal: it is ignored with a WARNING on the ``loader`` logger naming the variable, the
value and what was expected.

| variable | meaning |
|---|---|
| ``DYNAMIC_BACKEND_PATHS`` | colon-separated search paths replacing the compiled-in list |
| ``DYNAMIC_BACKEND_ADD_PATHS`` | colon-separated search paths scanned before that list |
| ``DYNAMIC_BACKEND_SELECT`` | comma-separated globs: only matching backend files are loaded |
| ``DYNAMIC_BACKEND_DISABLE`` | comma-separated globs: matching backend files are never loaded |
| ``DYNAMIC_BACKEND_PROBE`` | ``isolated`` or ``in-process``: how candidates are first loaded |
| ``DYNAMIC_BACKEND_PROBE_TIMEOUT`` | seconds an isolated probe may take |
| ``DYNAMIC_BACKEND_STRICT_PERMISSIONS`` | ``1`` refuses files and directories others can write |
| ``DYNAMIC_BACKEND_LOAD`` | ``eager`` or ``deferred``: when registered backends are loaded |
| ``DYNAMIC_BACKEND_DEBUG`` | ``1``/``debug``, ``info``, ``warning``: the ``loader`` log on stderr |
| ``DYNAMIC_BACKEND_HOST`` | ``process`` or ``in-process``: where backends run |
| ``DYNAMIC_BACKEND_CALL_TIMEOUT`` | seconds a call into a backend host may take, or ``none`` |

The two path variables choose code to load, so a secure-execution (setuid/setgid) process
ignores them, as the dynamic linker ignores ``LD_LIBRARY_PATH``; the others can only narrow or
explain what is loaded and are honoured everywhere.

The backend cache of deferred loading lives in ``$XDG_CACHE_HOME/dynamic-backends`` (an absolute
``XDG_CACHE_HOME`` only), else ``$HOME/.cache/dynamic-backends``.
"""
import logging
import os
import sys
from typing import Mapping, Optional, Tuple

from loader import timeouts

PATHS = "DYNAMIC_BACKEND_PATHS"
ADD_PATHS = "DYNAMIC_BACKEND_ADD_PATHS"
SELECT = "DYNAMIC_BACKEND_SELECT"
DISABLE = "DYNAMIC_BACKEND_DISABLE"
PROBE = "DYNAMIC_BACKEND_PROBE"
PROBE_TIMEOUT = "DYNAMIC_BACKEND_PROBE_TIMEOUT"
STRICT_PERMISSIONS = "DYNAMIC_BACKEND_STRICT_PERMISSIONS"
LOAD = "DYNAMIC_BACKEND_LOAD"
DEBUG = "DYNAMIC_BACKEND_DEBUG"
HOST = "DYNAMIC_BACKEND_HOST"
CALL_TIMEOUT = "DYNAMIC_BACKEND_CALL_TIMEOUT"

ALL = (PATHS, ADD_PATHS, SELECT, DISABLE, PROBE, PROBE_TIMEOUT, STRICT_PERMISSIONS, LOAD, DEBUG,
       HOST, CALL_TIMEOUT)

PROBE_MODES = ("in-process", "isolated")
LOAD_MODES = ("eager", "deferred")
HOST_MODES = ("in-process", "process")

log = logging.getLogger("loader")

_TRUE = ("1", "yes", "true", "on")
_FALSE = ("0", "no", "false", "off", "")
_DEBUG_LEVELS = {"1": logging.DEBUG, "all": logging.DEBUG, "debug": logging.DEBUG,
                 "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING,
                 "error": logging.ERROR}


def _environ(environ: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    return os.environ if environ is None else environ


#: Set on the log record of every ignored value: stderr shows these at any verbosity.
IGNORED_SETTING = "ignored_setting"


def _ignored(variable: str, value: str, expected: str, notes: Optional[list]) -> None:
    """A value that is not used: a WARNING on the ``loader`` log (shown on stderr even when the
    log is otherwise quiet, see log_to_stderr) and a line in ``notes`` (the report's)."""
    text = f"{variable}={value!r} ignored: expected {expected}"
    log.warning("%s", text, extra={IGNORED_SETTING: True})
    if notes is not None:
        notes.append(text)


def probe_mode(environ=None, notes: Optional[list] = None) -> Optional[str]:
    """``DYNAMIC_BACKEND_PROBE``: "isolated", "in-process", or None when unset or invalid."""
    value = _environ(environ).get(PROBE)
    if value is None:
        return None
    mode = value.strip().lower()
    if mode in PROBE_MODES:
        return mode
    _ignored(PROBE, value, "'isolated' or 'in-process'", notes)
    return None


def probe_timeout(environ=None, notes: Optional[list] = None) -> Optional[float]:
    """``DYNAMIC_BACKEND_PROBE_TIMEOUT``: seconds as loader.timeouts allows them, or None when
    unset or invalid."""
    value = _environ(environ).get(PROBE_TIMEOUT)
    if value is None:
        return None
    try:
        return timeouts.parse(value, PROBE_TIMEOUT)
    except ValueError:
        _ignored(PROBE_TIMEOUT, value, timeouts.describe(), notes)
        return None


def load_mode(environ=None, notes: Optional[list] = None) -> Optional[str]:
    """``DYNAMIC_BACKEND_LOAD``: "eager", "deferred", or None when unset or invalid."""
    value = _environ(environ).get(LOAD)
    if value is None:
        return None
    mode = value.strip().lower()
    if mode in LOAD_MODES:
        return mode
    _ignored(LOAD, value, "'eager' or 'deferred'", notes)
    return None


def backend_host(environ=None, notes: Optional[list] = None) -> Optional[str]:
    """``DYNAMIC_BACKEND_HOST``: "process", "in-process", or None when unset or invalid."""
    value = _environ(environ).get(HOST)
    if value is None:
        return None
    mode = value.strip().lower()
    if mode in HOST_MODES:
        return mode
    _ignored(HOST, value, "'process' or 'in-process'", notes)
    return None


def call_timeout(environ=None, notes: Optional[list] = None) -> Tuple[bool, Optional[float]]:
    """``DYNAMIC_BACKEND_CALL_TIMEOUT``: (True, seconds as loader.timeouts allows them, or None
    for ``none``: no limit), or (False, None) when unset or invalid."""
    value = _environ(environ).get(CALL_TIMEOUT)
    if value is None:
        return False, None
    try:
        return True, timeouts.parse(value, CALL_TIMEOUT, allow_none=True)
    except ValueError:
        _ignored(CALL_TIMEOUT, value, timeouts.describe() + " or none", notes)
        return False, None


def cache_directory(environ=None) -> Optional[str]:
    """Where the backend cache lives: ``$XDG_CACHE_HOME/dynamic-backends`` when that variable is
    an absolute path, else ``$HOME/.cache/dynamic-backends``; None without either."""
    env = _environ(environ)
    base = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = env.get("HOME", "")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "dynamic-backends")


def strict_permissions(environ=None, notes: Optional[list] = None) -> Optional[bool]:
    """``DYNAMIC_BACKEND_STRICT_PERMISSIONS``: True, False, or None when unset or invalid."""
    value = _environ(environ).get(STRICT_PERMISSIONS)
    if value is None:
        return None
    flag = value.strip().lower()
    if flag in _TRUE:
        return True
    if flag in _FALSE:
        return False
    _ignored(STRICT_PERMISSIONS, value, "1 or 0", notes)
    return None


# The handler DYNAMIC_BACKEND_DEBUG (or the command line) put on the "loader" logger, if any.
_stderr_handler: Optional[logging.Handler] = None


class _Threshold(logging.Filter):
    """Passes records from ``level`` up, and every ignored setting whatever its level."""

    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level or getattr(record, IGNORED_SETTING, False)


def log_to_stderr(level: int) -> None:
    """Send the ``loader`` log from ``level`` up, and every ignored setting, to stderr, one line
    per record, flushed as it is written. There is never more than one such handler; calling
    again can only lower its level (``-vvv`` on the command line and DYNAMIC_BACKEND_DEBUG=warning:
    the more verbose wins)."""
    global _stderr_handler
    if _stderr_handler is None:
        _stderr_handler = logging.StreamHandler(sys.stderr)
        _stderr_handler.setFormatter(logging.Formatter("loader %(levelname)s: %(message)s"))
        _stderr_handler.addFilter(_Threshold(level))
        log.addHandler(_stderr_handler)
    threshold = _stderr_handler.filters[0]
    threshold.level = min(level, threshold.level)
    wanted = min(threshold.level, logging.WARNING)      # ignored settings are warnings
    if log.level == logging.NOTSET or log.level > wanted:
        log.setLevel(wanted)


_debug_warned: Optional[str] = None     # the bad DYNAMIC_BACKEND_DEBUG value already warned about


def apply_debug(environ=None, notes: Optional[list] = None) -> Optional[int]:
    """Honour ``DYNAMIC_BACKEND_DEBUG`` (as the Vulkan loader honours ``VK_LOADER_DEBUG``): turn
    on the ``loader`` log on stderr without any code in the host. Returns the level, or None.
    A bad value is warned about once per process, and noted in ``notes`` each time."""
    global _debug_warned
    value = _environ(environ).get(DEBUG)
    if value is None or value.strip() == "" or value.strip() == "0":
        return None
    level = _DEBUG_LEVELS.get(value.strip().lower())
    if level is None:
        expected = "1, debug, info, warning or error"
        if _debug_warned == value:
            if notes is not None:
                notes.append(f"{DEBUG}={value!r} ignored: expected {expected}")
        else:
            _debug_warned = value
            log_to_stderr(logging.WARNING)
            _ignored(DEBUG, value, expected, notes)
        return None
    log_to_stderr(level)
    return level
