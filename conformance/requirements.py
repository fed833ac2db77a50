"""The requirements a conformant backend meets, by ID. conformance/REQUIREMENTS.md states each in
full; the test suite checks that the two list the same IDs."""
from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class Requirement:
    id: str
    title: str
    optional: bool = False       # a backend may say "not supported" (NOT_SUPPORTED, not FAIL)
    loader_enforced: bool = False
    warning_only: bool = False   # a quality requirement: breaking it is a WARNING, never a FAIL


REQUIREMENTS: Dict[str, Requirement] = {r.id: r for r in [
    Requirement("FILE-1", "the file name follows <vendor>_<name>_backend.so[.version]", loader_enforced=True),
    Requirement("FILE-2", "an ELF shared object of this machine's class and architecture", loader_enforced=True),
    Requirement("FILE-3", "exports GetBackendId, GetVersion and BackendFactory with C linkage", loader_enforced=True),
    Requirement("FILE-4", "exports little beyond the entry points (symbol hygiene)"),
    Requirement("FILE-5", "every needed library can be found", loader_enforced=True),
    Requirement("ENTRY-1", "loads with dlopen(RTLD_NOW | RTLD_LOCAL) without crashing", loader_enforced=True),
    Requirement("ENTRY-2", "GetBackendId returns a valid id", loader_enforced=True),
    Requirement("ENTRY-3", "the id is the same on every call and from every instance"),
    Requirement("ENTRY-4", "GetVersion is compatible with the kit's Backend API", loader_enforced=True),
    Requirement("ENTRY-5", "BackendFactory returns a well-formed instance with the same id", loader_enforced=True),
    Requirement("ABI-1", "every struct is at least as large as its declared version needs"),
    Requirement("ABI-2", "every required function pointer is present", loader_enforced=True),
    Requirement("ABI-3", "optional functions are reported consistently and work when present"),
    Requirement("ABI-4", "capabilities are answered, well-formed and stable"),
    Requirement("ABI-6", "a descriptor member is read only when struct_size covers it; older sizes run with the defaults"),
    Requirement("ABI-5", "an accepted custom allocator is really used, and every allocation returned", optional=True),
    Requirement("LIFE-1", "repeated create/destroy does not leak"),
    Requirement("LIFE-2", "objects stay valid after the instance that created them is destroyed"),
    Requirement("LIFE-3", "a backend context accepts load/unload notifications in order", optional=True),
    Requirement("LIFE-4", "a memory manager's acquire and release balance", optional=True),
    Requirement("LIFE-5", "the library unloads, is unmapped, and loads again"),
    Requirement("LIFE-6", "executing workloads does not leak"),
    Requirement("SUP-1", "a supported layer can be created"),
    Requirement("SUP-2", "a malformed or unsupported layer gets a clean refusal with a reason"),
    Requirement("SUP-3", "support answers are deterministic"),
    Requirement("SUP-4", "a 1.3 description whose values contradict its tensors is refused with a reason, never a crash"),
    Requirement("MSG-1", "messages stay inside the caller's buffer, NUL-terminated, whatever its size"),
    Requirement("EXEC-1", "execute refuses buffers that are missing, too small or malformed"),
    Requirement("LAYER-1", "every layer it claims matches the NumPy reference within tolerance", optional=True),
    Requirement("LAYER-3", "every layer and member of Backend API 1.3 it claims matches the reference over the generated sweeps", optional=True),
    Requirement("LAYER-2", "one workload executed again gives the results of its new inputs and weights", optional=True),
    Requirement("MEM-1", "execute touches no memory outside its buffers and never writes an input"),
    Requirement("CONC-1", "instances and workloads work from several threads at once"),
    Requirement("NET-1", "optimization views cover the offered sub-graph exactly", optional=True,
                loader_enforced=True),
    Requirement("NET-2", "each substitution computes what the layers it replaces compute", optional=True),
    Requirement("NET-3", "failed layers come with a reason, the same every time", optional=True),
    Requirement("NET-4", "compiled sub-graphs stay valid after the instance is destroyed", optional=True),
    Requirement("NET-5", "a serialized compiled sub-graph loads again with identical results",
                optional=True),
    Requirement("NET-6", "profiling events are well-formed and inside the execution", optional=True),
    Requirement("NET-7", "the availability answer is the same on every call", optional=True),
    Requirement("NET-8", "whole networks compute what their layers compute: long runs, side "
                "outputs, broadcasts, real blocks", optional=True),
    Requirement("NET-9", "a network executed again uses the weights given to that execute",
                optional=True),
    Requirement("NET-10", "loaded networks executed from several threads at once compute what "
                "they compute serially", optional=True),
    Requirement("NET-11", "damaged compiled sub-graph bytes are refused with a reason, never a "
                "crash", optional=True),
    Requirement("PERF-1", "no layer runs 5x or more slower than the reference backend", warning_only=True),
]}
