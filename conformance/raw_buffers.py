"""Raw-interface cases about buffers and memory: execute given buffers shorter than their
tensors (placed against guard pages), a NULL output, too few inputs or no output (EXEC-1), and
the kit's counting allocator offered through use_custom_allocator (ABI-5)."""
import ctypes
from ctypes import POINTER, byref, c_size_t, c_void_p, sizeof
from typing import List

from conformance.guard_pages import Arena
from conformance.layer_runs import layer_inputs
from conformance.raw import Raw, buffers, first_of_each_layer, full_message, refusal_problem
from conformance.raw_structs import ALLOCATE, DEALLOCATE, OK, Allocator
from conformance.registry import Failed, NotSupported, case


@case("raw.execute-misuse", "EXEC-1", tier="full")
def _raw_execute_misuse(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        cases = first_of_each_layer(raw, instance)
        if not cases:
            raise NotSupported("the backend supports none of the kit's layer cases")
        manager = raw.memory_manager(instance)
        factory = raw.factory(instance, manager)
        problems = []
        if manager:
            raw.manager_call(manager, "acquire")
        try:
            for data, layer in cases:
                status, workload = raw.create_workload(factory, layer, full_message())
                if status != OK or not workload:
                    continue
                try:
                    problems += _misuse_execute(subject, raw, data, workload)
                finally:
                    raw.destroy_workload(workload)
                if problems:
                    break
        finally:
            if manager:
                raw.manager_call(manager, "release")
            raw.destroy_factory(factory)
            if manager:
                raw.manager_call(manager, "destroy")
        if problems:
            raise Failed("; ".join(problems[:4]))


def _misuse_execute(subject, raw, data, workload) -> List[str]:
    import numpy as np
    inputs = layer_inputs(data)
    from conformance import reference
    expected = reference.evaluate(data["layer"], inputs, data.get("descriptor"))
    output = np.zeros(expected.shape, np.float32)
    problems = []

    def execute(*args):
        return raw.execute(*args)

    def attempt(what, ins, outs, num_inputs=None, num_outputs=None):
        message = full_message()
        subject.note(f"{data['id']}: execute given {what}; a crash here means the backend did "
                     f"not check it and ran past the buffer")
        status = execute(workload, ins, len(inputs) if num_inputs is None else num_inputs, outs,
                         1 if num_outputs is None else num_outputs, message.pointer, message.size)
        problem = refusal_problem(f"{data['id']}: execute given {what}", status, message)
        if problem:
            problems.append(problem)

    with Arena() as arena:
        # buffers that really are as short as they claim: a write or read past them faults
        outs = buffers([output])
        ins = buffers(inputs)
        if output.nbytes > 4:
            short_out = arena.after(output.nbytes - 4)
            bad = buffers([output])
            bad[0].data, bad[0].size_bytes = short_out.ctypes.data, short_out.nbytes
            attempt(f"an output buffer 4 bytes shorter than the tensor ({short_out.nbytes} bytes "
                    f"for {output.nbytes})", ins, bad)
        if inputs[0].nbytes > 4:
            short_in = arena.after(inputs[0].nbytes - 4)
            short_in[...] = inputs[0].reshape(-1)[:short_in.size]
            bad_ins = buffers(inputs)
            bad_ins[0].data, bad_ins[0].size_bytes = short_in.ctypes.data, short_in.nbytes
            attempt("input 0 4 bytes shorter than the tensor", bad_ins, outs)
        null_out = buffers([output])
        null_out[0].data = None
        attempt("a NULL output buffer", ins, null_out)
        attempt("one input fewer than the layer has", ins, outs, num_inputs=len(inputs) - 1)
        attempt("no output", ins, outs, num_outputs=0)
    message = full_message()
    subject.note(f"{data['id']}: a well-formed execute after the refused ones")
    status = execute(workload, buffers(inputs), len(inputs), buffers([output]), 1, message.pointer,
                     message.size)
    if status != OK:
        problems.append(f"{data['id']}: a well-formed execute after refused ones failed with "
                        f"status {status}: {message.text!r}")
    return problems


# -- the kit's counting allocator --------------------------------------------------------------

class CountingAllocator:
    """A BackendAllocator over the C library's allocator that counts and checks every call."""

    def __init__(self):
        libc = ctypes.CDLL(None)
        self._memalign = libc.posix_memalign
        self._memalign.argtypes = [POINTER(c_void_p), c_size_t, c_size_t]
        self._free = libc.free
        self._free.argtypes = [c_void_p]
        self.live = {}
        self.allocations = 0
        self.deallocations = 0
        self.unknown = 0
        self._allocate = ALLOCATE(self.allocate)
        self._deallocate = DEALLOCATE(self.deallocate)
        self.struct = Allocator(sizeof(Allocator), 0, None, self._allocate, self._deallocate)

    def allocate(self, user_data, size, alignment):
        pointer = c_void_p()
        if self._memalign(byref(pointer), max(alignment, sizeof(c_void_p)), max(size, 1)) != 0:
            return None
        self.allocations += 1
        self.live[pointer.value] = size
        return pointer.value

    def deallocate(self, user_data, pointer):
        if not pointer:
            return
        if self.live.pop(pointer, None) is None:
            self.unknown += 1
            return  # not ours: never hand it to free
        self.deallocations += 1
        self._free(pointer)


_ALLOCATORS = []  # offered allocators stay valid for the life of the process


@case("abi.custom-allocator", "ABI-5", tier="full")
def _abi_custom_allocator(subject):
    import numpy as np
    allocator = CountingAllocator()
    _ALLOCATORS.append(allocator)
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        use = raw.instance(instance).use_custom_allocator
        if not use:
            raise NotSupported("the backend does not implement use_custom_allocator")
        message = full_message()
        raw.note("use_custom_allocator")
        status = use(instance, byref(allocator.struct), message.pointer, message.size)
        if status != OK:
            raise NotSupported(f"the backend declines the custom allocator: {message.text!r}")
        created = 0
        manager = raw.memory_manager(instance)
        factory = raw.factory(instance, manager)
        if manager:
            raw.manager_call(manager, "acquire")
        try:
            for data, layer in first_of_each_layer(raw, instance):
                status, workload = raw.create_workload(factory, layer, full_message())
                if status != OK or not workload:
                    continue
                created += 1
                inputs = layer_inputs(data)
                output = np.empty(layer.prepared.output_shape, np.float32)
                raw.execute(workload, buffers(inputs), len(inputs), buffers([output]), 1)
                raw.destroy_workload(workload)
        finally:
            if manager:
                raw.manager_call(manager, "release")
            raw.destroy_factory(factory)
            if manager:
                raw.manager_call(manager, "destroy")
        raw.close()
    objects = f"a workload factory{', a memory manager' if manager else ''} and {created} workloads"
    if allocator.allocations == 0:
        raise Failed(f"use_custom_allocator answered OK, but the allocator was never called while "
                     f"{objects} were created, run and destroyed")
    if allocator.live or allocator.unknown:
        raise Failed(f"{allocator.allocations} allocations through the custom allocator, "
                     f"{allocator.deallocations} returned through its deallocate; "
                     f"{len(allocator.live)} ({sum(allocator.live.values())} bytes) still held "
                     f"after {objects} were destroyed, {allocator.unknown} pointers it never "
                     f"gave were handed back")
