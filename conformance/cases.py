"""Every conformance case, registered: this module imports each family of cases, in the order
that gives each stage its order of cases (``ordered_cases`` sorts by stage and keeps the order of
registration within one). The registry and its vocabulary are conformance/registry.py, re-exported
here for the runner, the worker and the command line.

    file_cases         FILE-*: the file, read without loading it
    entry_cases        ENTRY-*: the entry points and the factory (and INFO, for ``info``)
    abi_cases          ABI-1 to ABI-4: structs, required and optional functions, capabilities
    leak_cases         LIFE-1, LIFE-6: leaks over repeated create/destroy and execution
    lifecycle_cases    LIFE-2 to LIFE-5: lifetimes, contexts, memory managers, reloading
    support_cases      SUP-*: claims, refusals, determinism
    fixed_layer_cases  LAYER-1: one case per entry of layer_cases.yaml
    concurrency_cases  CONC-1: threads at once
    network_cases      NET-1 to NET-7: sub-graphs offered to the optimizer
    network_generated  NET-8 to NET-10: generated whole networks, weights as inputs, threads
    network_blocks     NET-8: real blocks (MobileNetV2, ResNet, ShuffleNet, transformer)
    network_hostile    NET-11, NET-6: damaged compiled sub-graph bytes; fused events
    raw_types          SUP-2 through ctypes: layer and data types at and past the boundary
    raw_messages       MSG-1: message buffers of 0, 1 and 16 bytes with canaries
    raw_buffers        EXEC-1, ABI-5: execute given wrong buffers; the kit's counting allocator
    raw_lifecycle      LIFE-4 through ctypes: a memory manager's calls out of order
    raw_descriptors    SUP-4, ABI-6 through ctypes: misused and older descriptors of 1.3
    guarded            MEM-1: buffers against guard pages
    generated          LAYER-1, LAYER-2: seeded sweeps, repeated execution of one workload
    generated_*        LAYER-3: the sweeps of the layers and members of Backend API 1.3
    speed_cases        PERF-1: speed against the reference backend
"""
from conformance import (file_cases, entry_cases, abi_cases, leak_cases,  # noqa: F401
                         lifecycle_cases, support_cases, fixed_layer_cases, concurrency_cases,
                         network_cases, network_generated, network_blocks, network_hostile,
                         raw_types, raw_messages, raw_buffers, raw_lifecycle,
                         raw_descriptors,
                         guarded, generated, generated_elementwise, generated_tensor,
                         generated_spatial, generated_normalization, speed_cases)
from conformance.entry_cases import INFO  # noqa: F401
from conformance.registry import (CASES, STAGES, TIERS, Case, Failed, LayerMismatch,  # noqa: F401
                                  NotSupported, Warning_, case, ordered_cases)
