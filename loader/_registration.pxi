# Registration (docs/loading.md, Asking for backends by id): the scan's candidates, in scan
# order, become the runtime's backends; included into _core.pyx. loader.runtime.Runtime calls
# register_candidates once, while nobody else can see the runtime.

@cython.no_gc                   # refers only to its entry, which refers to no container
cdef class DeferredBackend:
    """A backend registered from the backend cache, not loaded yet: what the runtime holds in
    its place until the first use loads it (loader.runtime)."""
    cdef readonly Entry entry

    @property
    def path(self):
        return self.entry.canonical


def register_candidates(list entries, dict libraries, wanted=None, CacheRecords cache=None,
                        probe_timeout=None, bint secure=False, logger=None, announcer=None):
    """Register the candidates among ``entries`` (scan order) into ``libraries`` (backend id ->
    Library or DeferredBackend, in registration order), and log every entry once decided.

    A candidate the backend cache knows (``entry.known``: its id and version are the cache's) is
    registered as a DeferredBackend
    without loading it; any other is loaded and checked (``load_entry``) and, when it registers
    and ``cache`` is given, recorded in the cache under the identity the scan found. Then, for
    both, in this order:

        an id not among ``wanted`` (a set, or None for every id)  -> filtered-out
        an id already registered                                  -> duplicate-backend-id

    A library skipped by those is closed again at once. ``logger`` (logging.Logger) receives
    each entry's line (``entry.log()``) unless its level would drop it; ``announcer(entry)``,
    when given and DEBUG is on, makes the "loading ..." callable passed to ``load_entry``."""
    cdef Entry entry
    cdef DeferredBackend pending
    # the lowest level the logger passes (its levels are thresholds), or none of the entries'
    cdef int lowest = (_LOG_DEBUG if logger.isEnabledFor(_LOG_DEBUG) else
                       _LOG_INFO if logger.isEnabledFor(_LOG_INFO) else
                       _LOG_WARNING if logger.isEnabledFor(_LOG_WARNING) else
                       _LOG_WARNING + 1) if logger is not None else _LOG_WARNING + 1
    cdef bint deferred
    for entry in entries:
        if entry.reason is None:
            deferred = entry.known
            if deferred:
                backend_id = entry.backend_id
                pending = DeferredBackend.__new__(DeferredBackend)
                pending.entry = entry
                library = pending
            else:
                library = load_entry(entry, probe_timeout, secure,
                                     announcer(entry) if lowest <= _LOG_DEBUG and announcer is not None else None)
                backend_id = entry.backend_id
            if library is not None:
                if wanted is not None and backend_id not in wanted:
                    _unregistered(library)
                    entry.reason = Reason.FILTERED_OUT
                    entry.detail = f"backend id {backend_id!r} is not among the requested backends"
                elif backend_id in libraries:
                    _unregistered(library)
                    entry.reason = Reason.DUPLICATE_BACKEND_ID
                    entry.detail = (f"backend id {backend_id!r} already registered from "
                                    f"{libraries[backend_id].path}")
                else:
                    libraries[backend_id] = library
                    entry.registered = True
                    if deferred:
                        entry.deferred = True
                        entry.detail = skew_detail(entry.version.minor)
                    elif cache is not None and entry.identity is not None:
                        cache.store(entry.canonical, entry.identity, backend_id,
                                    entry.version.major, entry.version.minor)
        if entry.level() >= lowest:
            entry.log()


cdef inline void _unregistered(library):
    if isinstance(library, Library):
        (<Library>library)._close()
