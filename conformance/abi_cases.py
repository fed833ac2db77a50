"""ABI cases (ABI-1 to ABI-4): struct sizes, required and optional functions, capabilities. The
workload's struct is looked at through the raw interface (ctypes), before the loader's wrapper
would refuse it."""
from conformance.raw import Raw, abi_problem, first_of_each_layer, full_message
from conformance.raw_structs import OK, WORKLOAD_SIZE_1_1, Workload
from conformance.registry import Failed, NotSupported, case


@case("abi.struct-sizes", "ABI-1")
def _abi_struct_sizes(subject):
    import loader
    from loader import _core
    backend = subject.backend()
    needed = _core.instance_size(backend.version.minor)
    if needed is not None and backend.struct_size < needed:
        raise Failed(f"the instance's struct_size is {backend.struct_size}; Backend API "
                     f"{backend.version} needs at least {needed}")
    try:
        factory = backend.create_workload_factory()
        factory.close()
        if backend.features["MemoryManager"]:
            backend.create_memory_manager().close()
        if backend.features["BackendContext"]:
            context = backend.create_backend_context()
            if context is not None:
                context.close()
    except loader.FeatureNotAvailableError as error:
        raise NotSupported(str(error))
    except loader.BackendInternalError as error:
        raise Failed(str(error))


@case("abi.required-functions", "ABI-2")
def _abi_required(subject):
    from loader._core import FEATURES
    backend = subject.backend()
    features = backend.features
    missing = [f.member for f in FEATURES if f.required and not features[f.name]
               and f.since_minor <= backend.version.minor]
    if missing:
        raise Failed(f"Backend API {backend.version} requires {', '.join(missing)}; the "
                     f"instance leaves {'it' if len(missing) == 1 else 'them'} NULL or out")


@case("abi.optional-consistent", "ABI-3")
def _abi_optional(subject):
    import loader
    answers = [subject.backend().features for _ in range(3)]
    if any(a != answers[0] for a in answers):
        raise Failed(f"instances disagree about which functions they provide: {answers}")
    backend = subject.backend()
    try:
        if answers[0]["MemoryManager"]:
            backend.create_memory_manager().close()
        if answers[0]["BackendContext"]:
            backend.create_backend_context()
        if answers[0]["CustomMemoryAllocator"]:
            first, second = backend.supports_custom_allocator(), backend.supports_custom_allocator()
            if first != second:
                raise Failed(f"use_custom_allocator answered {first}, then {second}")
    except loader.BackendStatusError as error:
        raise Failed(f"an optional function is present but fails: {error}")


@case("abi.capabilities", "ABI-4")
def _abi_capabilities(subject):
    import loader
    try:
        first = subject.backend().capabilities
        again = [subject.backend().capabilities for _ in range(3)]
    except loader.BackendError as error:
        raise Failed(str(error))
    if any(dict(a) != dict(first) for a in again):
        raise Failed(f"capabilities change between calls: {dict(first)} vs {[dict(a) for a in again]}")
    bad = [name for name in first if not name or not all(0x21 <= ord(c) <= 0x7E for c in name)]
    if bad:
        raise Failed(f"capability names must be printable ASCII without spaces: {bad!r}")


@case("abi.workload-struct", "ABI-1", blocking=True,
      blocks=("lifecycle.outlive-instance", "lifecycle.create-destroy-workloads",
              "support.creatable", "raw.execute-misuse",
              "abi.custom-allocator", "layers.*", "memory.*", "resources.*", "concurrency.*",
              "speed.*"))
def _abi_workload_struct(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        cases = first_of_each_layer(raw, instance)
        if not cases:
            raise NotSupported("the backend supports none of the kit's layer cases: no workload "
                               "to look at")
        manager = raw.memory_manager(instance)
        factory = raw.factory(instance, manager)
        try:
            for data, layer in cases:
                message = full_message()
                status, workload = raw.create_workload(factory, layer, message)
                if status != OK or not workload:
                    continue  # SUP-1's question
                w = Workload.from_address(workload)
                if w.struct_size < WORKLOAD_SIZE_1_1:
                    raise Failed(f"{data['id']} ({data['layer']}): "
                                 + abi_problem("BackendWorkload", w.struct_size, WORKLOAD_SIZE_1_1,
                                               "destroy"))
                missing = [m for m in ("execute", "destroy") if not getattr(w, m)]
                if missing:
                    raise Failed(f"{data['id']} ({data['layer']}): BackendWorkload."
                                 f"{' and '.join(missing)} is NULL")
                raw.destroy_workload(workload)
        finally:
            raw.destroy_factory(factory)
            if manager:
                raw.manager_call(manager, "destroy")
