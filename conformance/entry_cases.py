"""Entry cases (ENTRY-*): the worker has loaded the library (a crash while loading is ENTRY-1's
CRASH); the entry points answer, consistently, and the factory gives a well-formed instance.
Also ``INFO``, what ``backend-conformance info`` asks a worker."""
from conformance.layer_runs import layer_cases, layer_inputs
from conformance.registry import Case, Failed, case


@case("entry.load", "ENTRY-1", blocking=True)
def _entry_load(subject):
    if subject.load_failure:
        raise Failed(subject.load_failure)


@case("entry.id", "ENTRY-2", blocking=True)
def _entry_id(subject):
    from loader.loading import check_backend_id
    backend_id, problem = check_backend_id(subject.library.read_backend_id())
    if backend_id is None:
        raise Failed(problem)


@case("entry.version", "ENTRY-4", blocking=True)
def _entry_version(subject):
    import loader
    version = loader.BackendVersion(*subject.library.read_version())
    if not loader.is_backend_compatible(version):
        raise Failed(f"built against Backend API {version}, the kit implements "
                     f"{loader.BACKEND_API_VERSION}")


@case("entry.factory", "ENTRY-5", blocking=True)
def _entry_factory(subject):
    problem = subject.library.probe_factory()
    if problem is not None:
        if "different id" in problem:
            from conformance import raw
            problem += f"; the instance's get_id returned {raw.instance_id(subject.path)!r}"
        raise Failed(problem)


@case("entry.id-stable", "ENTRY-3")
def _entry_id_stable(subject):
    first = subject.library.read_backend_id()
    for call in range(1, 200):
        again = subject.library.read_backend_id()
        if again != first:
            raise Failed(f"GetBackendId returned {first!r}, then {again!r} on call {call + 1}")
    backends = [subject.backend() for _ in range(3)]
    ids = {b.get_id() for b in backends}
    if ids != {first.decode("ascii", "replace")}:
        raise Failed(f"instances report ids {sorted(ids)}, GetBackendId reports {first!r}")


def _info(subject):
    """Id, version, features, capabilities and the kit's layer cases the backend claims."""
    import json
    backend = subject.backend()
    claimed = []
    for data in layer_cases():
        try:
            if backend.is_layer_supported(data["layer"], layer_inputs(data), data.get("descriptor")):
                if data["layer"] not in claimed:
                    claimed.append(data["layer"])
        except Exception:
            continue
    raw = subject.library.read_backend_id()
    return json.dumps({"id": raw.decode("ascii", "backslashreplace") if raw else None,
                       "version": "%d.%d" % subject.library.read_version(),
                       "features": backend.features, "capabilities": dict(backend.capabilities),
                       "layers": claimed})


#: Not a conformance case: what ``backend-conformance info`` asks a worker.
INFO = Case("info", "ENTRY-1", "entry", _info)
