"""The runtime: scans its search paths once, registers the backends that pass every check and
creates backend instances on request.

Runtimes are independent of each other: each dlopens its own reference to every library it
registers, and closing one never touches another. A library stays mapped while its runtime is
open or any backend created from it is alive.
"""
import logging
import threading
from typing import Dict, List, Optional, Tuple

from loader import _core, cache as _cache, environment, isolation, timeouts
from loader import paths as _paths
from loader.errors import BackendNotFoundError, MissingBackendsError, RuntimeClosedError
from loader.filters import backend_filter
from loader.loading import Entry, announcer, discover, load_candidate
from loader.reasons import Reason
from loader.versions import BACKEND_API_VERSION

log = logging.getLogger("loader")

ARGUMENT = "argument"
DEFAULT = "default"


class _FromEnvironment:
    """The default of an argument whose None means something (call_timeout: no limit)."""

    def __repr__(self):
        return "<from the environment>"


FROM_ENVIRONMENT = _FromEnvironment()


class Runtime:
    """Loads the dynamic backends found on the search paths.

    ``dynamic_backends_path``: one directory that replaces every other search path (never split
    on ``:``); None to use ``DYNAMIC_BACKEND_ADD_PATHS`` and ``DYNAMIC_BACKEND_PATHS`` or the
    compiled-in list.

    ``probe``: ``"in-process"`` loads candidates directly; ``"isolated"`` first loads each in a
    short-lived child process and skips those that crash, exit or take longer than
    ``probe_timeout`` seconds there (used only when isolated). None (the default) takes
    ``DYNAMIC_BACKEND_PROBE`` / ``DYNAMIC_BACKEND_PROBE_TIMEOUT``, else in-process and 5 s.

    ``strict_permissions``: refuse search directories and files that others than their owner may
    write to, or that belong to neither root nor the current user. None (the default) takes
    ``DYNAMIC_BACKEND_STRICT_PERMISSIONS``, else False.

    ``select`` / ``disable``: globs (a list, or a comma-separated string) replacing
    ``DYNAMIC_BACKEND_SELECT`` / ``DYNAMIC_BACKEND_DISABLE``; see loader.filters for what they
    match.

    ``load``: ``"eager"`` loads and checks every candidate now; ``"deferred"`` registers a
    candidate the backend cache (loader.cache) knows, unchanged, under its cached id without
    loading it, and loads and checks it (every check eager loading makes, in the same order) on
    the first ``create_backend`` or ``load_network`` that needs it; a candidate the cache does not
    know is loaded now and recorded. A deferred backend that fails its checks then is skipped
    with the reason eager loading would have given, and ``BackendNotFoundError`` says so. Report
    entries say ``"deferred": true`` for registrations made from the cache. None (the default)
    takes ``DYNAMIC_BACKEND_LOAD``, else eager. The cache is not used in secure execution or
    strict-permissions mode (everything is then loaded eagerly).

    ``backends``: ids to register (one id as a string, or several); every other candidate is
    skipped as ``filtered-out``. With deferred loading and a cached record, an unnamed file is
    never loaded; otherwise a file must be loaded to learn its id, and one providing an unnamed id
    is closed again at once. None (the default) registers every backend.

    ``required_backends``: ids that must register (one id as a string, or several); if any does
    not, the runtime closes again and raises ``MissingBackendsError`` saying why for each.

    ``backend_host``: ``"in-process"`` runs backends in this process; ``"process"`` runs each
    registered backend in a backend host process of its own (loader.host, docs/backend-host.md),
    so that a crash, an exit or a hang in a backend raises ``BackendCrashedError`` or
    ``BackendTimeoutError`` instead of taking this process down. None (the default) takes
    ``DYNAMIC_BACKEND_HOST``, else in-process. With hosts: ``call_timeout``, seconds a call may
    take before its host is killed (None: no limit; the default takes
    ``DYNAMIC_BACKEND_CALL_TIMEOUT``, else no limit); ``max_restarts``, crashes in a row after
    which a backend is unavailable (3); ``host_limits``, a dict of ``address_space`` (bytes)
    and ``cpu_time`` (seconds) each host process gets as resource limits.

    Once closed, a runtime holds no backends: ``backend_ids`` is empty, ``in`` is False and
    ``create_backend`` raises ``RuntimeClosedError``; the record of the scan (``report``,
    ``search_paths``, ``why_not_registered``) stays readable. Its backend hosts are stopped and
    reaped: what they served is gone.
    """

    def __init__(self, dynamic_backends_path=None, *, probe: Optional[str] = None,
                 probe_timeout: Optional[float] = None, strict_permissions: Optional[bool] = None,
                 select=None, disable=None, required_backends=(), load: Optional[str] = None,
                 backends=None, backend_host: Optional[str] = None, call_timeout=FROM_ENVIRONMENT,
                 max_restarts: int = 3, host_limits: Optional[dict] = None):
        self._notes: List[str] = []             # the report's notes: ignored settings, ...
        environment.apply_debug(notes=self._notes)
        required = _required_ids(required_backends)
        wanted = None if backends is None else set(_required_ids(backends, "backends"))
        self._settings = _settings(probe, probe_timeout, strict_permissions, load, self._notes)
        self._settings.update(_host_settings(backend_host, call_timeout, max_restarts,
                                             host_limits, self._settings["sources"],
                                             self._notes))
        self._settings["sources"] = self._settings.pop("sources")     # last, as before
        self._hosted = self._settings["backend_host"] == "process"
        strict = self._settings["strict_permissions"]
        self._lock = threading.RLock()
        self._closed = False
        self._libraries: Dict[str, object] = {}  # backend id -> Library, in registration order
        self._failed_deferred: Dict[str, Entry] = {}  # deferred id -> its entry, skipped at first use
        self._networks = None                   # loader.networks.execution.RuntimeNetworks, on first use
        self._search_paths = _paths.resolve_search_paths(dynamic_backends_path, strict)
        if any(p.source == _paths.COMPILED_IN for p in self._search_paths):
            note = _paths.compiled_in_note()
            if note:
                log.info("%s", note)
                self._notes.append(note)
        self._filter = backend_filter(select, disable)
        self._cache = (_cache.open_cache(strict) if self._settings["load"] == "deferred"
                       else _cache.BackendCache(None))
        self._entries: List[Entry] = discover(
            self._search_paths, name_filter=self._filter or None, strict_permissions=strict,
            cache=self._cache.records if self._cache.usable else None)
        self._filter.warn_unmatched()
        timeout = self._settings["probe_timeout"] if self._settings["probe"] == "isolated" else None
        self._timeout = timeout
        self._secure = _paths.is_secure_execution()
        with _core.CrashNotes():  # a crash while loading names its file (see _crash_note.pxi)
            _core.register_candidates(  # logs each entry as soon as it is decided
                self._entries, self._libraries, wanted,
                self._cache.records if self._cache.usable else None,
                timeout, self._secure, log, announcer)
        self._cache.write()
        if self._hosted:
            for backend_id, library in list(self._libraries.items()):
                if isinstance(library, _core.Library):
                    self._libraries[backend_id] = self._hosted_library(library)
        self._registered = list(self._libraries)  # what the scan registered, for the report
        self._report: Optional[dict] = None      # built on first use: most runtimes never ask
        missing = [backend_id for backend_id in required if backend_id not in self._libraries]
        if missing:
            self.close()
            raise MissingBackendsError(missing, {i: self._why_missing(i) for i in missing})

    def _hosted_library(self, library):
        """A registered library's stand-in served by a backend host (the library is closed)."""
        from loader.host import HostSettings, HostedLibrary
        settings = HostSettings(self._settings["call_timeout"], self._settings["max_restarts"],
                                dict(self._settings["host_limits"]))
        return HostedLibrary.adopt(library, settings, self._backend_unavailable)

    def _backend_unavailable(self, backend_id: str, reason: str) -> None:
        note = f"backend {backend_id!r} is unavailable: {reason}"
        log.warning("%s", note)
        self._notes.append(note)
        self._report = None

    def _why_missing(self, backend_id: str) -> str:
        why = self.why_not_registered(backend_id)
        if why:
            return f"skipped: {why}"
        searched = ", ".join(p.path for p in self._search_paths if p.valid) or "no valid path"
        return f"no file on the search paths provides it (searched: {searched})"

    def _build_report(self) -> dict:
        return {
            "api_version": str(BACKEND_API_VERSION),
            "search_paths": [p.to_json() for p in self._search_paths],
            "entries": [e.to_json() for e in self._entries],
            "registered": list(self._registered),
            "filters": self._filter.to_json(),
            "settings": dict(self._settings),
            "notes": list(self._notes),
        }

    # -- queries -----------------------------------------------------------------------------

    @property
    def backend_ids(self) -> List[str]:
        """Ids of the registered backends, in registration order (empty once closed)."""
        with self._lock:
            return list(self._libraries)

    @property
    def report(self) -> dict:
        """What the scan found: the same object ``backend-loader scan --json`` prints."""
        if self._report is None:
            self._report = self._build_report()
        return self._report

    @property
    def search_paths(self) -> List[str]:
        """The valid search paths this runtime scanned, in order."""
        return [p.path for p in self._search_paths if p.valid]

    @property
    def closed(self) -> bool:
        return self._closed

    def __contains__(self, backend_id) -> bool:
        with self._lock:
            return backend_id in self._libraries

    def why_not_registered(self, backend_id: str) -> Optional[str]:
        """Why a backend id that was seen during the scan is not registered, or None."""
        entry = self._failed_deferred.get(backend_id)  # registered from the cache, then failed
        if entry is not None:
            return f"{entry.file}: {entry.reason.value} ({entry.detail})"
        for entry in self._entries:
            if entry.backend_id == backend_id and not entry.registered:
                return f"{entry.file}: {entry.reason.value} ({entry.detail})"
        return None

    # -- backends ----------------------------------------------------------------------------

    def create_backend(self, backend_id: str):
        """A new instance of a registered backend. It stays usable after the runtime closes."""
        if not isinstance(backend_id, str):
            raise TypeError(f"create_backend takes a backend id (str), not "
                            f"{type(backend_id).__name__}")
        with self._lock:
            if self._closed:
                raise RuntimeClosedError(
                    f"the runtime is closed and holds no backends; create {backend_id!r} before "
                    f"closing it (a backend outlives its runtime)")
            library = self._libraries.get(backend_id)
            if isinstance(library, _core.DeferredBackend):
                library = self._load_deferred(backend_id, library)
        if library is None:
            message = f"no backend {backend_id!r} is registered"
            why = self.why_not_registered(backend_id)
            if why:
                message += f"; it was skipped: {why}"
            else:
                message += f" (registered: {', '.join(self.backend_ids) or 'none'})"
            raise BackendNotFoundError(message)
        return library.create_backend()

    def _load_deferred(self, backend_id: str, pending: "_core.DeferredBackend"):
        """Load and check a deferred backend (lock held): the library, or None with its entry
        skipped (and its cache record dropped) exactly as eager loading would have skipped it."""
        entry = pending.entry
        entry.reason, entry.detail = None, ""
        with _core.CrashNotes():
            library = load_candidate(entry, self._timeout, self._secure)
        if library is not None and entry.backend_id != backend_id:
            library.close()
            library = None
            entry.skip(Reason.INVALID_BACKEND_ID,
                       f"the file changed since it was registered as {backend_id!r}: "
                       f"it now reports {entry.backend_id!r}")
        if library is not None and self._hosted:
            library = self._hosted_library(library)
        if library is None:
            entry.registered = False
            self._failed_deferred[backend_id] = entry
            del self._libraries[backend_id]
            self._cache.forget(entry.canonical)
            self._cache.write()
        else:
            self._libraries[backend_id] = library
        if library is None and backend_id in self._registered:
            self._registered.remove(backend_id)
        entry.log()
        self._report = None
        return library

    # -- networks (docs/networks.md) ----------------------------------------------

    def load_network(self, network, backends=None):
        """Plan ``network`` onto ``backends`` (ids in preference order; default every registered
        backend, in registration order) and return a ``LoadedNetwork`` ready to execute."""
        from loader.networks.execution import LoadedNetwork
        return LoadedNetwork._create(self, network, backends)

    def load_compiled_network(self, path):
        """The network ``LoadedNetwork.export`` wrote, loaded onto the backends named in it
        with their compiled sub-graphs created again from their bytes (no optimizer call).
        Raises ``loader.CompiledNetworkError`` saying what is wrong with the file or why a
        backend cannot take it."""
        from loader.errors import CompiledNetworkError
        from loader.networks import compiled
        from loader.networks.execution import LoadedNetwork
        content = compiled.read(path)
        backends = list(dict.fromkeys(step["backend"] for step in content["steps"]))
        missing = [b for b in backends if b not in self.backend_ids]
        if missing:
            raise CompiledNetworkError(
                f"{path}: compiled for backend{'s' if len(missing) > 1 else ''} "
                f"{', '.join(map(repr, missing))}, not registered in this runtime")
        return LoadedNetwork._create(self, content["network"], backends,
                                     compiled.plan_from_file(content["steps"]))

    def _network_host(self):
        from loader.networks.execution import RuntimeNetworks
        with self._lock:
            if self._closed:
                raise RuntimeClosedError("the runtime is closed")
            if self._networks is None:
                self._networks = RuntimeNetworks(self)
            return self._networks

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Unload every network loaded through the runtime, then drop the runtime's references
        to its libraries, newest first. A library is unmapped with its last reference, so
        backends created from it keep it alive. Idempotent."""
        networks, self._networks = self._networks, None
        if networks is not None:
            networks.close()
        with self._lock:
            self._closed = True
            while self._libraries:
                _, library = self._libraries.popitem()
                if self._hosted and not isinstance(library, _core.DeferredBackend):
                    library.close()                 # stops and reaps its host

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"backends={self.backend_ids}"
        return f"<Runtime {state}>"


def _host_settings(backend_host, call_timeout, max_restarts, host_limits, sources,
                   notes) -> dict:
    """Where backends run and, with hosts, the call timeout, the restart rule and the limits:
    arguments, else the environment, else defaults; sources recorded in ``sources``."""
    from loader.host import MODES, check_limits
    if backend_host is None:
        backend_host = environment.backend_host(notes=notes)
        sources["backend_host"] = environment.HOST if backend_host is not None else DEFAULT
        backend_host = backend_host or "in-process"
    elif backend_host in MODES:
        sources["backend_host"] = ARGUMENT
    else:
        raise ValueError(f"backend_host must be 'in-process' or 'process', not {backend_host!r}")
    if call_timeout is FROM_ENVIRONMENT:
        given, call_timeout = environment.call_timeout(notes=notes)
        sources["call_timeout"] = environment.CALL_TIMEOUT if given else DEFAULT
    else:
        call_timeout = timeouts.check(call_timeout, "call_timeout", allow_none=True)
        sources["call_timeout"] = ARGUMENT
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int):
        raise TypeError(f"max_restarts must be an int, not {type(max_restarts).__name__}")
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be 0 or more, not {max_restarts}")
    limits = check_limits(host_limits)
    hosted = backend_host == "process"
    return {"backend_host": backend_host, "call_timeout": call_timeout if hosted else None,
            "max_restarts": max_restarts if hosted else None,
            "host_limits": limits if hosted else None}


def _required_ids(required, name: str = "required_backends") -> Tuple[str, ...]:
    """``required_backends`` (or ``backends``) as a tuple of ids: one string is one id."""
    if isinstance(required, str):
        return (required,)
    try:
        ids = tuple(required)
    except TypeError:
        raise TypeError(f"{name} must be a backend id or a list of ids, "
                        f"not {type(required).__name__}") from None
    for backend_id in ids:
        if not isinstance(backend_id, str):
            raise TypeError(f"{name} must hold backend ids (str), "
                            f"not {type(backend_id).__name__}: {backend_id!r}")
    return ids


def _settings(probe, probe_timeout, strict_permissions, load=None, notes=None) -> dict:
    """The probing and trust settings: explicit arguments, else the environment, else defaults;
    with where each came from. Environment values that are ignored are added to ``notes``."""
    sources = {}
    if probe is None:
        probe = environment.probe_mode(notes=notes)
        sources["probe"] = environment.PROBE if probe is not None else DEFAULT
        probe = probe or "in-process"
    elif probe in environment.PROBE_MODES:
        sources["probe"] = ARGUMENT
    else:
        raise ValueError(f"probe must be 'in-process' or 'isolated', not {probe!r}")
    if probe_timeout is None:
        probe_timeout = environment.probe_timeout(notes=notes)
        sources["probe_timeout"] = environment.PROBE_TIMEOUT if probe_timeout else DEFAULT
        probe_timeout = probe_timeout or isolation.DEFAULT_TIMEOUT
    else:
        probe_timeout = timeouts.check(probe_timeout, "probe_timeout")
        sources["probe_timeout"] = ARGUMENT
    if strict_permissions is None:
        strict_permissions = environment.strict_permissions(notes=notes)
        sources["strict_permissions"] = (environment.STRICT_PERMISSIONS
                                         if strict_permissions is not None else DEFAULT)
        strict_permissions = bool(strict_permissions)
    elif isinstance(strict_permissions, (bool, int)):
        strict_permissions = bool(strict_permissions)
        sources["strict_permissions"] = ARGUMENT
    else:
        raise TypeError(f"strict_permissions must be True or False, "
                        f"not {type(strict_permissions).__name__}")
    if load is None:
        load = environment.load_mode(notes=notes)
        sources["load"] = environment.LOAD if load is not None else DEFAULT
        load = load or "eager"
    elif load in environment.LOAD_MODES:
        sources["load"] = ARGUMENT
    else:
        raise ValueError(f"load must be 'eager' or 'deferred', not {load!r}")
    return {"probe": probe,
            "probe_timeout": float(probe_timeout) if probe == "isolated" else None,
            "strict_permissions": strict_permissions, "load": load, "sources": sources}
