"""Leaks: repeated create/destroy of instances (LIFE-1) and repeated execution of one workload of
every supported layer (heap and address space, LIFE-6)."""
import ctypes
import gc
import os
from typing import Tuple

from conformance.layer_runs import Prepared, first_supported_per_layer, inputs_for
from conformance.registry import Failed, NotSupported, case

LEAK_EXECUTES = 2000       # per layer
LEAK_HEAP_BYTES = 16       # heap growth per execute before it is a leak
LEAK_ADDRESS_SPACE = 1 << 20  # address-space growth over LEAK_EXECUTES before it is a leak


def _heap_in_use():
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


def _address_space() -> Tuple[int, int]:
    """(virtual size, resident size) of this process in bytes."""
    with open("/proc/self/statm") as f:
        size, resident = f.read().split()[:2]
    page = os.sysconf("SC_PAGE_SIZE")
    return int(size) * page, int(resident) * page


@case("resources.execute-leaks", "LIFE-6", tier="full")
def _execute_leaks(subject):
    backend = subject.backend()
    chosen = first_supported_per_layer(backend)
    if not chosen:
        raise NotSupported("the backend supports none of the kit's layer cases")
    if _heap_in_use() is None:
        raise NotSupported("this C library cannot report heap use (mallinfo2)")
    problems = []
    for data in chosen:
        prepared = Prepared(backend, data, inputs_for(data, subject.seed))
        try:
            prepared.run(100)  # let the allocator and any caches settle
            gc.collect()
            heap, (virtual, resident) = _heap_in_use(), _address_space()
            prepared.run(LEAK_EXECUTES)
            gc.collect()
            middle = _heap_in_use()
            virtual_after, resident_after = _address_space()
            # A leak grows the heap in every window; a one-off allocation meanwhile (an arena
            # or a container of the host growing once) does not grow it again in the next.
            prepared.run(LEAK_EXECUTES)
            gc.collect()
            heap_growth = min(middle - heap, _heap_in_use() - middle)
        finally:
            prepared.close()
        if heap_growth > LEAK_HEAP_BYTES * LEAK_EXECUTES:
            problems.append(f"{data['layer']} ({data['id']}): the heap grew by "
                            f"{heap_growth / LEAK_EXECUTES:.0f} bytes per execute (at least "
                            f"{heap_growth} bytes in each of two runs of {LEAK_EXECUTES} "
                            f"executes of one workload)")
        if virtual_after - virtual > LEAK_ADDRESS_SPACE:
            problems.append(f"{data['layer']} ({data['id']}): the address space grew by "
                            f"{(virtual_after - virtual) / LEAK_EXECUTES:.0f} bytes per execute "
                            f"({(virtual_after - virtual) >> 10} KiB mapped, resident "
                            f"{(resident_after - resident) >> 10:+} KiB, over {LEAK_EXECUTES} "
                            f"executes): memory mapped and never unmapped")
    if problems:
        raise Failed("; ".join(problems))
