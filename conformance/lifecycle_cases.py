"""Lifecycle cases: objects outlive the instance that created them (LIFE-2), a backend context
takes its notifications in order (LIFE-3), a memory manager's acquire and release balance
(LIFE-4), and the library unloads and loads again (LIFE-5). Leaks over repeated create/destroy
are leak_cases.py."""
import gc

from conformance.layer_runs import compare, first_supported_layer
from conformance.registry import Failed, NotSupported, Warning_, case


@case("lifecycle.outlive-instance", "LIFE-2")
def _life_outlive(subject):
    import loader
    data, inputs = first_supported_layer(subject)
    backend = subject.backend()
    manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
    factory = backend.create_workload_factory(manager)
    backend.close()
    if data is None:
        return  # nothing to run: the factory alone survived
    subject.working_on(data)
    workload = factory.create_workload(data["layer"], inputs, data.get("descriptor"))
    factory.close()
    try:
        if manager is not None:
            with manager:
                [out] = workload.execute(inputs)
        else:
            [out] = workload.execute(inputs)
    except loader.BackendError as error:
        raise Failed(f"a workload created after its instance was destroyed failed: {error}")
    compare(data, inputs, out)


@case("lifecycle.context", "LIFE-3")
def _life_context(subject):
    import loader
    backend = subject.backend()
    if not backend.features["BackendContext"]:
        raise NotSupported("the backend provides no backend context")
    context = backend.create_backend_context()
    backend.close()
    if context is None:
        return
    try:
        for network in (1, 2):
            context.before_load_network(network)
            context.after_load_network(network)
        for network in (2, 1):
            context.before_unload_network(network)
            context.after_unload_network(network)
    except loader.BackendStatusError as error:
        raise Failed(f"a notification in order was refused: {error}")


@case("lifecycle.memory-manager", "LIFE-4")
def _life_memory_manager(subject):
    import loader
    backend = subject.backend()
    if not backend.features["MemoryManager"]:
        raise NotSupported("the backend provides no memory manager")
    manager = backend.create_memory_manager()
    try:
        for _ in range(100):
            manager.acquire()
            manager.release()
    except loader.BackendStatusError as error:
        raise Failed(f"balanced acquire/release failed: {error}")


@case("lifecycle.reload", "LIFE-5")
def _life_reload(subject):
    first_id = subject.library.read_backend_id()
    subject.unload()
    gc.collect()
    if subject.mapped():
        raise Warning_("the library stays mapped after every handle was closed (linked with "
                       "-z nodelete, or holds unique symbols); it cannot be updated in place")
    subject.load()
    if subject.load_failure:
        raise Failed(f"reloading failed: {subject.load_failure}")
    if subject.library.read_backend_id() != first_id:
        raise Failed("the id changed across a reload")
    subject.backend().close()
