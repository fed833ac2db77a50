"""Leaks (LIFE-1, LIFE-6): every object the Backend API creates, created and destroyed over and over
(instances, workload factories, memory managers, workloads, backend contexts; compiled sub-graphs
are network_cases.py's), and one workload of every supported layer executed over and over (a case
per layer type). Each
loop counts heap, memory mappings, file descriptors and threads alike (resource_usage.leaks)."""
from conformance.layer_runs import (Prepared, first_supported_layer, first_supported_per_layer,
                                    inputs_for)
from conformance.registry import Failed, NotSupported, case
from conformance.resource_usage import leaks

INSTANCE_CYCLES = 1500     # per run; instances are the cheapest objects and the most created
OBJECT_CYCLES = 500        # per run, for every other object
EXECUTES = 2000            # per run, per layer (each layer type its own case)
CYCLE = "create/destroy cycle"


def _fail_on(findings):
    if findings:
        raise Failed("; ".join(findings))


@case("lifecycle.create-destroy", "LIFE-1")
def _life_create_destroy(subject):
    library = subject.library
    _fail_on(leaks(lambda: library.create_backend().close(), INSTANCE_CYCLES, "instances", CYCLE,
                   "cycles", settle=200))


@case("lifecycle.create-destroy-factories", "LIFE-1")
def _life_factories(subject):
    backend = subject.backend()
    _fail_on(leaks(lambda: backend.create_workload_factory().close(), OBJECT_CYCLES,
                   "workload factories", CYCLE, "cycles"))


@case("lifecycle.create-destroy-managers", "LIFE-1")
def _life_memory_managers(subject):
    backend = subject.backend()
    if not backend.features["MemoryManager"]:
        raise NotSupported("the backend provides no memory manager")
    _fail_on(leaks(lambda: backend.create_memory_manager().close(), OBJECT_CYCLES,
                   "memory managers", CYCLE, "cycles"))


@case("lifecycle.create-destroy-workloads", "LIFE-1")
def _life_workloads(subject):
    data, inputs = first_supported_layer(subject)
    if data is None:
        raise NotSupported("the backend supports none of the kit's layer cases")
    factory = subject.backend().create_workload_factory()
    shapes = [x.shape for x in inputs]

    def cycle():
        factory.create_workload(data["layer"], shapes, data.get("descriptor")).close()
    _fail_on(leaks(cycle, OBJECT_CYCLES, f"workloads of {data['id']} ({data['layer']})", CYCLE,
                   "cycles"))


@case("lifecycle.create-destroy-contexts", "LIFE-1")
def _life_contexts(subject):
    backend = subject.backend()
    if not backend.features["BackendContext"]:
        raise NotSupported("the backend provides no backend context")

    def cycle():
        context = backend.create_backend_context()
        if context is not None:
            context.close()
    _fail_on(leaks(cycle, OBJECT_CYCLES, "backend contexts", CYCLE, "cycles"))


def _execute_leaks(layer):
    """One case per layer type (each a few thousand executions, well inside one case's timeout
    even for a slow backend)."""
    def run(subject):
        backend = subject.backend()
        data = next((d for d in first_supported_per_layer(backend) if d["layer"] == layer), None)
        if data is None:
            raise NotSupported(f"the backend supports none of the kit's {layer} cases")
        prepared = Prepared(backend, data, inputs_for(data, subject.seed))
        try:
            with prepared.acquired():
                _fail_on(leaks(prepared.execute, EXECUTES, f"{data['layer']} ({data['id']})",
                               "execute", "executes of one workload", settle=100))
        finally:
            prepared.close()
    return run


def _register():
    from loader.layers import LAYERS
    for name in LAYERS:
        case(f"resources.execute-leaks-{name}", "LIFE-6", tier="full")(_execute_leaks(name))


_register()
