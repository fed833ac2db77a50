# Members of BackendInstance beyond the 1.0 header, and minor-version skew; included into
# _core.pyx before the instance checks that use it.

# ---------------------------------------------------------------------------------------------
# Optional members of BackendInstance, and minor-version skew
# ---------------------------------------------------------------------------------------------

cdef extern from "struct_members.h":
    bint dbk_covers_get_capabilities(const abi.BackendInstance *p)
    bint dbk_has_get_capabilities(const abi.BackendInstance *p)
    bint dbk_covers_is_layer_supported(const abi.BackendInstance *p)
    bint dbk_has_is_layer_supported(const abi.BackendInstance *p)
    bint dbk_covers_create_memory_manager(const abi.BackendInstance *p)
    bint dbk_has_create_memory_manager(const abi.BackendInstance *p)
    bint dbk_covers_create_workload_factory(const abi.BackendInstance *p)
    bint dbk_has_create_workload_factory(const abi.BackendInstance *p)
    bint dbk_covers_create_backend_context(const abi.BackendInstance *p)
    bint dbk_has_create_backend_context(const abi.BackendInstance *p)
    bint dbk_covers_use_custom_allocator(const abi.BackendInstance *p)
    bint dbk_has_use_custom_allocator(const abi.BackendInstance *p)
    bint dbk_covers_optimize_subgraph(const abi.BackendInstance *p)
    bint dbk_has_optimize_subgraph(const abi.BackendInstance *p)
    bint dbk_covers_is_available(const abi.BackendInstance *p)
    bint dbk_has_is_available(const abi.BackendInstance *p)
    bint dbk_covers_create_profiling_context(const abi.BackendInstance *p)
    bint dbk_has_create_profiling_context(const abi.BackendInstance *p)
    bint dbk_covers_load_compiled_subgraph(const abi.BackendInstance *p)
    bint dbk_has_load_compiled_subgraph(const abi.BackendInstance *p)


cdef class Feature:
    """A member of BackendInstance beyond the 1.0 header: its name to users, whether every
    backend of its version must provide it, and the minor version that added it."""
    cdef readonly str member
    cdef readonly str name
    cdef readonly bint required
    cdef readonly int since_minor
    cdef int index

    def __init__(self, int index, str member, str name, bint required, int since_minor):
        self.index, self.member, self.name = index, member, name
        self.required, self.since_minor = required, since_minor

    cdef bint covered(self, const abi.BackendInstance *p):
        if self.index == 0: return dbk_covers_get_capabilities(p)
        if self.index == 1: return dbk_covers_is_layer_supported(p)
        if self.index == 2: return dbk_covers_create_memory_manager(p)
        if self.index == 3: return dbk_covers_create_workload_factory(p)
        if self.index == 4: return dbk_covers_create_backend_context(p)
        if self.index == 5: return dbk_covers_use_custom_allocator(p)
        if self.index == 7: return dbk_covers_is_available(p)
        if self.index == 8: return dbk_covers_create_profiling_context(p)
        if self.index == 9: return dbk_covers_load_compiled_subgraph(p)
        return dbk_covers_optimize_subgraph(p)

    cdef bint present(self, const abi.BackendInstance *p):
        if self.index == 0: return dbk_has_get_capabilities(p)
        if self.index == 1: return dbk_has_is_layer_supported(p)
        if self.index == 2: return dbk_has_create_memory_manager(p)
        if self.index == 3: return dbk_has_create_workload_factory(p)
        if self.index == 4: return dbk_has_create_backend_context(p)
        if self.index == 5: return dbk_has_use_custom_allocator(p)
        if self.index == 7: return dbk_has_is_available(p)
        if self.index == 8: return dbk_has_create_profiling_context(p)
        if self.index == 9: return dbk_has_load_compiled_subgraph(p)
        return dbk_has_optimize_subgraph(p)

    def __repr__(self):
        return f"<Feature {self.name} ({self.member}, 1.{self.since_minor})>"


FEATURES = (
    Feature(0, "get_capabilities", "Capabilities", True, 1),
    Feature(1, "is_layer_supported", "LayerSupport", True, 1),
    Feature(2, "create_memory_manager", "MemoryManager", False, 1),
    Feature(3, "create_workload_factory", "WorkloadFactory", True, 1),
    Feature(4, "create_backend_context", "BackendContext", False, 1),
    Feature(5, "use_custom_allocator", "CustomMemoryAllocator", False, 1),
    Feature(6, "optimize_subgraph", "SubgraphOptimization", False, 2),
    Feature(7, "is_available", "Availability", False, 2),
    Feature(8, "create_profiling_context", "Profiling", False, 2),
    Feature(9, "load_compiled_subgraph", "SerializedSubgraphs", False, 2),
)
cdef Feature _GET_CAPABILITIES = FEATURES[0]
cdef Feature _LAYER_SUPPORT = FEATURES[1]
cdef Feature _MEMORY_MANAGER = FEATURES[2]
cdef Feature _WORKLOAD_FACTORY = FEATURES[3]
cdef Feature _BACKEND_CONTEXT = FEATURES[4]
cdef Feature _CUSTOM_ALLOCATOR = FEATURES[5]
cdef Feature _SUBGRAPH_OPTIMIZATION = FEATURES[6]
cdef Feature _AVAILABILITY = FEATURES[7]
cdef Feature _PROFILING = FEATURES[8]
cdef Feature _SERIALIZED_SUBGRAPHS = FEATURES[9]


cdef dict _skew_details = {}     # minor -> skew_detail(minor), for the minors seen so far


cpdef str skew_detail(uint32_t minor):
    """What a backend built against 1.<minor> lacks compared with this runtime, or ""."""
    detail = _skew_details.get(minor)
    if detail is not None:
        return detail
    missing = [f.name for f in FEATURES if f.since_minor > minor]
    detail = "" if not missing else (
        f"built against Backend API {API_VERSION_MAJOR}.{minor}: lacks "
        f"{', '.join(missing)} (added in later minor versions)")
    if minor <= API_VERSION_MINOR:          # a compatible minor: few of them, worth keeping
        _skew_details[minor] = detail
    return detail
