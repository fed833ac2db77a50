"""The conformance cases. Each names its requirement and stage; its function raises ``Failed``,
``NotSupported`` or ``Warning_`` for a non-pass and returns for a pass.

File cases read the file and never load it; they run in the controlling process. Their subject
has ``path``, the backend as the user named it (the file-name rule applies to that name, as the
loader applies it to the directory entry), and ``file``, the regular file it resolves to (what is
read and loaded). Every other
case runs in a worker process that has loaded the library (see worker.py), so the vendor's code
never runs in the process that keeps the results.
"""
import gc
import hashlib
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import yaml

from loader import elf
from conformance.requirements import REQUIREMENTS

# The order cases run and report in. Layers come before the lifecycle and concurrency cases,
# which run a layer too: a wrong layer is reported first by its own case, and the later cases it
# breaks are marked as its consequences (runner.Controller).
STAGES = ("file", "entry", "abi", "support", "raw", "layers", "memory", "lifecycle", "resources",
          "concurrency", "net", "speed")
TIERS = ("quick", "full")  # a quick case runs in both tiers, a full one only in the full tier


class Failed(Exception):
    """The backend does not meet the requirement."""


class NotSupported(Exception):
    """The backend said, before the case ran, that it does not do this (optional requirement)."""


class Warning_(Exception):
    """A quality finding that does not break conformance."""


class LayerMismatch(Failed):
    """A layer's output differs from the reference; ``layer_case`` is its layer_cases.yaml id,
    so a failure seen by another case can be traced to the layer case that owns it."""

    def __init__(self, layer_case: str, message: str):
        super().__init__(message)
        self.layer_case = layer_case


@dataclass(frozen=True)
class Case:
    id: str
    requirement: str
    stage: str
    function: Callable
    blocking: bool = False      # a non-pass stops every later case (the library is unusable)
    data: Optional[dict] = None  # layer cases: their YAML entry
    tier: str = "quick"
    blocks: Optional[Tuple[str, ...]] = None  # blocking: only the later cases matching these globs

    def blocks_case(self, other: "Case") -> bool:
        """Whether a failure of this (blocking) case stops ``other``."""
        import fnmatch
        return self.blocking and (self.blocks is None or any(
            fnmatch.fnmatchcase(other.id, pattern) for pattern in self.blocks))

    @property
    def in_controller(self) -> bool:
        return self.stage == "file"


CASES: Dict[str, Case] = {}


def case(case_id, requirement, blocking=False, tier="quick", blocks=None):
    assert requirement in REQUIREMENTS, requirement
    assert tier in TIERS, tier

    def register(function):
        CASES[case_id] = Case(case_id, requirement, case_id.split(".")[0], function, blocking,
                              tier=tier, blocks=blocks)
        return function
    return register


# ---------------------------------------------------------------------------------------------
# file: the controlling process reads the file, nothing is loaded
# ---------------------------------------------------------------------------------------------

ENTRY_POINTS = ("GetBackendId", "GetVersion", "BackendFactory")
MANGLED = {"GetBackendId": "_Z12GetBackendIdv", "GetVersion": "_Z10GetVersionPjS_",
           "BackendFactory": "_Z14BackendFactoryv"}
HYGIENE_LIMIT = 16  # exported symbols beyond the entry points before it is worth a warning


def _elf(path):
    try:
        return elf.read(path)
    except (OSError, elf.ElfError) as error:
        raise Failed(f"cannot read it as ELF: {error}")


@case("file.name", "FILE-1")
def _file_name(subject):
    import loader
    name = os.path.basename(subject.path)
    if not loader.is_valid_backend_filename(name):
        raise Failed(f"{name!r} does not match <vendor>_<name>_backend.so[.version]; "
                     f"the loader will not pick it up")


@case("file.elf", "FILE-2", blocking=True)
def _file_elf(subject):
    import loader
    reason, detail = loader._core.check_elf_file(subject.file)
    if reason is not None:
        raise Failed(f"{reason}: {detail}")


@case("file.entry-points", "FILE-3", blocking=True)
def _file_entry_points(subject):
    info = _elf(subject.file)
    missing = [name for name in ENTRY_POINTS if info.find(name) is None]
    if missing:
        mangled = [name for name in missing if info.find(MANGLED[name])]
        hint = f" ({', '.join(mangled)} exported with C++ mangling: declare them extern \"C\")" \
            if mangled else ""
        raise Failed(f"does not export {', '.join(missing)}{hint}")
    not_functions = [n for n in ENTRY_POINTS if info.find(n).kind != elf.STT_FUNC]
    if not_functions:
        raise Failed(f"{', '.join(not_functions)} exported, but not as functions")


@case("file.symbol-hygiene", "FILE-4")
def _file_symbol_hygiene(subject):
    info = _elf(subject.file)
    extra = sorted(s.name for s in info.exported() if s.name not in ENTRY_POINTS)
    if len(extra) > HYGIENE_LIMIT:
        raise Warning_(f"exports {len(extra)} symbols beyond the entry points (e.g. "
                       f"{', '.join(extra[:5])}); build with -fvisibility=hidden and mark only "
                       f"the entry points BACKEND_EXPORT")


@case("file.dependencies", "FILE-5", blocking=True)
def _file_dependencies(subject):
    from loader.dependencies import missing_dependencies
    missing = missing_dependencies(subject.file)
    if missing:
        raise Failed(f"needs {', '.join(missing)}, which the dynamic linker cannot find")


# ---------------------------------------------------------------------------------------------
# entry: the worker has loaded the library (a crash while loading is ENTRY-1's CRASH)
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# abi
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# lifecycle
# ---------------------------------------------------------------------------------------------

def _heap_in_use():
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost")]
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd


@case("lifecycle.create-destroy", "LIFE-1")
def _life_create_destroy(subject):
    cycles = 3000
    for _ in range(200):  # let the allocator settle
        subject.library.create_backend().close()
    gc.collect()
    before = _heap_in_use()
    for _ in range(cycles):
        subject.library.create_backend().close()
    gc.collect()
    after = _heap_in_use()
    if before is None:
        raise NotSupported("this C library cannot report heap use (mallinfo2)")
    growth = (after - before) / cycles
    if growth > 16:
        raise Failed(f"the heap grew by {growth:.0f} bytes per create/destroy cycle "
                     f"({after - before} bytes over {cycles} cycles)")


def _first_supported_layer(subject):
    backend = subject.backend()
    for data in layer_cases():
        subject.working_on(data)
        inputs = _layer_inputs(data)
        try:
            if backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")):
                return data, inputs
        except Exception:
            continue
    return None, None


@case("lifecycle.outlive-instance", "LIFE-2")
def _life_outlive(subject):
    import loader
    data, inputs = _first_supported_layer(subject)
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
    _compare(data, inputs, out)


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


# ---------------------------------------------------------------------------------------------
# support
# ---------------------------------------------------------------------------------------------

@case("support.creatable", "SUP-1")
def _support_creatable(subject):
    import loader
    backend = subject.backend()
    factory = backend.create_workload_factory()
    for data in layer_cases():
        subject.working_on(data)
        inputs = _layer_inputs(data)
        if not backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")):
            continue
        try:
            factory.create_workload(data["layer"], inputs, data.get("descriptor")).close()
        except loader.BackendError as error:
            raise Failed(f"{data['id']}: supported, but create_workload failed: {error}")


def _malformed_layers():
    from loader.layers import PreparedLayer
    relu = {"function": 0, "a": 0.0, "b": 0.0}
    return [
        ("an unknown layer type", PreparedLayer("Unknown", 9999, ((4,),), (4,), {})),
        ("an output shape that does not follow", PreparedLayer("Activation", 0, ((4,),), (5,), relu)),
        ("shapes that do not broadcast", PreparedLayer("Addition", 1, ((2, 3), (4,)), (2, 3), {})),
        ("a zero stride", PreparedLayer("Convolution2d", 4, ((1, 5, 5, 1), (1, 3, 3, 1)), (1, 3, 3, 1), {
            "stride_y": 0, "stride_x": 0, "pad_top": 0, "pad_bottom": 0, "pad_left": 0,
            "pad_right": 0, "dilation_y": 1, "dilation_x": 1, "bias_enabled": 0})),
        ("a reshape that changes the element count", PreparedLayer("Reshape", 8, ((2, 3),), (7,), {})),
    ]


@case("support.clean-refusal", "SUP-2")
def _support_clean_refusal(subject):
    import loader
    backend = subject.backend()
    factory = backend.create_workload_factory()
    for what, layer in _malformed_layers():
        answer = backend.query_layer_support(layer)
        if answer:
            raise Failed(f"{what} was declared supported")
        if not answer.reason:
            raise Failed(f"{what} was refused without a reason")
        try:
            factory.create_workload_prepared(layer).close()
        except loader.BackendStatusError:
            continue
        raise Failed(f"{what} was refused by is_layer_supported but created")


@case("support.deterministic", "SUP-3")
def _support_deterministic(subject):
    backend = subject.backend()
    for data in layer_cases():
        subject.working_on(data)
        inputs = [np.empty(s, dtype=np.float32) for s in data["inputs"]]
        answers = {tuple(backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")))
                   for _ in range(3)}
        answers.add(tuple(subject.backend().is_layer_supported(data["layer"], inputs,
                                                               data.get("descriptor"))))
        if len(answers) > 1:
            raise Failed(f"{data['id']}: different answers to the same question: {sorted(answers)}")
    _, problem = _malformed_layers()[0]
    if len({tuple(backend.query_layer_support(problem)) for _ in range(3)}) > 1:
        raise Failed("different answers to the same malformed layer")


# ---------------------------------------------------------------------------------------------
# layers: one case per entry of layer_cases.yaml
# ---------------------------------------------------------------------------------------------

_LAYER_CASES: List[dict] = []


def layer_cases() -> List[dict]:
    if not _LAYER_CASES:
        with open(os.path.join(os.path.dirname(__file__), "layer_cases.yaml")) as f:
            _LAYER_CASES.extend(yaml.safe_load(f))
    return _LAYER_CASES


def _layer_inputs(data):
    seed = int.from_bytes(hashlib.sha256(data["id"].encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    scale = data.get("scale", 1.0)
    return [(rng.uniform(-1, 1, size=shape) * scale).astype(np.float32) for shape in data["inputs"]]


def _compare(data, inputs, out):
    """LayerMismatch unless ``out`` matches the float64 reference within the case's tolerance
    (generated.compare: tolerances scaled to the reduction length, NaN and infinity counted)."""
    from conformance import generated
    generated.compare(data, inputs, out)


def _inputs_at(inputs, shape, index) -> str:
    """The input values that produced output ``index``, for inputs that map onto the output
    element by element (activations, broadcasting arithmetic, softmax)."""
    values = []
    for x in inputs:
        try:
            if np.broadcast_shapes(x.shape, shape) != tuple(shape):
                continue
        except ValueError:
            continue
        values.append(f"{float(np.broadcast_to(x, shape)[index]):.6g}")
    if not values:
        return ""
    return f" (input {values[0]})" if len(values) == 1 else f" (inputs {', '.join(values)})"


def execute(backend, data, inputs):
    """Run a layer case step by step, as ``Backend.execute`` would, so that each backend call is
    seen (and named) on its own: memory manager, factory, create_workload, execute."""
    manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
    factory = backend.create_workload_factory(manager)
    workload = factory.create_workload(data["layer"], inputs, data.get("descriptor"))
    factory.close()
    try:
        if manager is None:
            return workload.execute(inputs)
        with manager:
            return workload.execute(inputs)
    finally:
        workload.close()
        if manager is not None:
            manager.close()


def _run_layer(data):
    def run(subject):
        import loader
        subject.working_on(data)
        backend = subject.backend()
        inputs = _layer_inputs(data)
        support = backend.is_layer_supported(data["layer"], inputs, data.get("descriptor"))
        if not support:
            raise NotSupported(support.reason)
        try:
            [out] = execute(backend, data, inputs)
        except loader.BackendError as error:
            raise Failed(f"{data['id']}: {error}")
        _compare(data, inputs, out)
    return run


for _data in layer_cases():
    CASES[f"layers.{_data['id']}"] = Case(f"layers.{_data['id']}", "LAYER-1", "layers",
                                          _run_layer(_data), data=_data)


# ---------------------------------------------------------------------------------------------
# concurrency
# ---------------------------------------------------------------------------------------------

@case("concurrency.threads", "CONC-1")
def _concurrency(subject):
    from conformance import resources
    resources.concurrency(subject)


def ordered_cases() -> List[Case]:
    """Every case, in the order the kit runs them."""
    return sorted(CASES.values(), key=lambda c: STAGES.index(c.stage))


def _info(subject):
    """Id, version, features, capabilities and the kit's layer cases the backend claims."""
    import json
    backend = subject.backend()
    claimed = []
    for data in layer_cases():
        try:
            if backend.is_layer_supported(data["layer"], _layer_inputs(data), data.get("descriptor")):
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


from conformance import network_cases  # noqa: E402,F401  (registers the NET cases)
# The generated, raw-interface, guarded-memory and resource tiers register their cases here.
from conformance import raw, guarded, generated, resources  # noqa: E402,F401
