"""The raw-interface tier: the backend's C functions called directly (through ctypes, in the
worker), with the misuse a well-formed runtime never commits: message buffers of 0, 1 and 16
bytes with canaries around them, layer-type values at the boundary, other data types, execute
with wrong buffers, release before acquire, double acquire, a counting custom allocator. The
loader's own calls fill in text when a backend gives none; here the backend's own message is
what is judged.

The ctypes structures mirror abi/backend_api.h member for member.
"""
import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, addressof, byref, c_char, c_float, c_int32,
                    c_int64, c_size_t, c_uint32, c_uint64, c_void_p, sizeof)
from typing import List, Optional, Tuple

import _ctypes

from conformance.cases import Failed, NotSupported, case, layer_cases, _layer_inputs

OK = 0
INVALID_STATE = 4
LAYER_TYPE_COUNT = 9
UINT32_MAX = 2**32 - 1
MAX_DIMENSIONS = 8
STATUS = c_int32


class TensorInfo(Structure):
    _fields_ = [("struct_size", c_uint32), ("data_type", c_uint32), ("num_dimensions", c_uint32),
                ("reserved", c_uint32), ("dimensions", c_int64 * MAX_DIMENSIONS)]


class Buffer(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32), ("data", c_void_p),
                ("size_bytes", c_uint64)]


class LayerDescription(Structure):
    _fields_ = [("struct_size", c_uint32), ("layer_type", c_uint32), ("num_inputs", c_uint32),
                ("num_outputs", c_uint32), ("inputs", POINTER(TensorInfo)),
                ("outputs", POINTER(TensorInfo)), ("descriptor", c_void_p)]


class ActivationDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("function", c_uint32), ("a", c_float), ("b", c_float)]


class FullyConnectedDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("transpose_weights", c_uint32),
                ("bias_enabled", c_uint32)]


class Convolution2dDescriptor(Structure):
    _fields_ = [(name, c_uint32) for name in (
        "struct_size", "stride_y", "stride_x", "pad_top", "pad_bottom", "pad_left", "pad_right",
        "dilation_y", "dilation_x", "bias_enabled")]


class Pooling2dDescriptor(Structure):
    _fields_ = [(name, c_uint32) for name in (
        "struct_size", "pool_type", "kernel_y", "kernel_x", "stride_y", "stride_x", "pad_top",
        "pad_bottom", "pad_left", "pad_right")]


class SoftmaxDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("beta", c_float)]


ALLOCATE = CFUNCTYPE(c_void_p, c_void_p, c_size_t, c_size_t)
DEALLOCATE = CFUNCTYPE(None, c_void_p, c_void_p)


class Allocator(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32), ("user_data", c_void_p),
                ("allocate", ALLOCATE), ("deallocate", DEALLOCATE)]


MESSAGE_CALL = CFUNCTYPE(STATUS, c_void_p, c_void_p, c_size_t)
DESTROY = CFUNCTYPE(None, c_void_p)


class MemoryManager(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32), ("acquire", MESSAGE_CALL),
                ("release", MESSAGE_CALL), ("destroy", DESTROY)]


class Workload(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32),
                ("execute", CFUNCTYPE(STATUS, c_void_p, POINTER(Buffer), c_uint32, POINTER(Buffer),
                                      c_uint32, c_void_p, c_size_t)),
                ("destroy", DESTROY)]


class WorkloadFactory(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32),
                ("create_workload", CFUNCTYPE(STATUS, c_void_p, POINTER(LayerDescription),
                                              POINTER(c_void_p), c_void_p, c_size_t)),
                ("destroy", DESTROY)]


class Instance(Structure):
    _fields_ = [("struct_size", c_uint32), ("api_major", c_uint32), ("api_minor", c_uint32),
                ("get_id", CFUNCTYPE(c_void_p, c_void_p)), ("destroy", DESTROY),
                ("get_capabilities", CFUNCTYPE(STATUS, c_void_p, POINTER(c_void_p), POINTER(c_uint32))),
                ("is_layer_supported", CFUNCTYPE(STATUS, c_void_p, POINTER(LayerDescription),
                                                 c_void_p, c_size_t)),
                ("create_memory_manager", CFUNCTYPE(STATUS, c_void_p, POINTER(c_void_p), c_void_p,
                                                    c_size_t)),
                ("create_workload_factory", CFUNCTYPE(STATUS, c_void_p, c_void_p, POINTER(c_void_p),
                                                      c_void_p, c_size_t)),
                ("create_backend_context", CFUNCTYPE(STATUS, c_void_p, POINTER(c_void_p), c_void_p,
                                                     c_size_t)),
                ("use_custom_allocator", CFUNCTYPE(STATUS, c_void_p, POINTER(Allocator), c_void_p,
                                                   c_size_t))]


def size_through(structure, member) -> int:
    """BACKEND_STRUCT_SIZE_THROUGH: offset of ``member`` plus its size."""
    field = getattr(structure, member)
    return field.offset + field.size


INSTANCE_SIZE_1_1 = size_through(Instance, "use_custom_allocator")
WORKLOAD_SIZE_1_1 = size_through(Workload, "destroy")
FACTORY_SIZE_1_1 = size_through(WorkloadFactory, "destroy")
MEMORY_MANAGER_SIZE_1_1 = size_through(MemoryManager, "destroy")


# -- message buffers with canaries ------------------------------------------------------------

CANARY = 0xA5
SLACK = 64


class Message:
    """A message buffer of ``size`` bytes with SLACK canary bytes on either side."""

    def __init__(self, size: int):
        self.size = size
        self.raw = (ctypes.c_ubyte * (size + 2 * SLACK))(*([CANARY] * (size + 2 * SLACK)))
        self.pointer = addressof(self.raw) + SLACK

    def problem(self) -> Optional[str]:
        """What the backend did wrong with this buffer, or None."""
        data = bytes(self.raw)
        before = sum(b != CANARY for b in data[:SLACK])
        after = sum(b != CANARY for b in data[SLACK + self.size:])
        if before or after:
            return (f"wrote outside a message buffer of {self.size} bytes ({before} bytes changed "
                    f"before it, {after} after it)")
        inside = data[SLACK:SLACK + self.size]
        if self.size and inside != bytes([CANARY]) * self.size and b"\0" not in inside:
            return f"left a message buffer of {self.size} bytes without a terminating NUL"
        return None

    @property
    def text(self) -> str:
        inside = bytes(self.raw)[SLACK:SLACK + self.size]
        if inside == bytes([CANARY]) * self.size:
            return ""
        return inside.split(b"\0", 1)[0].decode("ascii", "backslashreplace")


def full_message() -> Message:
    return Message(1024)


# -- layer descriptions -----------------------------------------------------------------------

class Layer:
    """A BackendLayerDescription (and everything it points to) built from a PreparedLayer."""

    def __init__(self, prepared):
        n = len(prepared.input_shapes)
        self.infos = (TensorInfo * 4)()
        for i, shape in enumerate(list(prepared.input_shapes) + [prepared.output_shape]):
            info = self.infos[i if i < n else 3]
            info.struct_size = sizeof(TensorInfo)
            info.num_dimensions = len(shape)
            for d, v in enumerate(shape):
                info.dimensions[d] = v
        self.descriptor = _descriptor(prepared.code, prepared.fields)
        self.description = LayerDescription(
            sizeof(LayerDescription), prepared.code, n, 1,
            ctypes.cast(self.infos, POINTER(TensorInfo)),
            ctypes.cast(byref(self.infos, 3 * sizeof(TensorInfo)), POINTER(TensorInfo)),
            addressof(self.descriptor) if self.descriptor is not None else None)
        self.prepared = prepared

    @property
    def output(self) -> TensorInfo:
        return self.infos[3]


def _descriptor(code, f):
    if code == 0:
        return ActivationDescriptor(sizeof(ActivationDescriptor), f["function"], f["a"], f["b"])
    if code == 3:
        return FullyConnectedDescriptor(sizeof(FullyConnectedDescriptor), f["transpose_weights"],
                                        f["bias_enabled"])
    if code in (4, 5):
        return Convolution2dDescriptor(sizeof(Convolution2dDescriptor), *(f[k] for k in (
            "stride_y", "stride_x", "pad_top", "pad_bottom", "pad_left", "pad_right", "dilation_y",
            "dilation_x", "bias_enabled")))
    if code == 6:
        return Pooling2dDescriptor(sizeof(Pooling2dDescriptor), *(f[k] for k in (
            "pool_type", "kernel_y", "kernel_x", "stride_y", "stride_x", "pad_top", "pad_bottom",
            "pad_left", "pad_right")))
    if code == 7:
        return SoftmaxDescriptor(sizeof(SoftmaxDescriptor), f["beta"])
    return None


def prepare(data) -> "Layer":
    from loader.layers import prepare as prepare_layer
    return Layer(prepare_layer(data["layer"], [tuple(s) for s in data["inputs"]],
                               data.get("descriptor")))


# -- the library, opened a second time through ctypes ------------------------------------------

class Raw:
    """The library under test seen through ctypes: one more reference to the handle the worker's
    loader already holds, released by close()."""

    def __init__(self, path: str, record=None):
        """``record``: the worker's tracing.CallRecord, told of each call before it is made, so
        that a crash is named by the call it happened in."""
        self.note = record.note if record is not None else (lambda call: None)
        self.library = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        self.library.BackendFactory.restype = c_void_p
        self.library.GetBackendId.restype = ctypes.c_char_p
        self.instances: List[int] = []

    def close(self):
        for pointer in self.instances:
            self.note("destroy (instance)")
            self.instance(pointer).destroy(pointer)
        self.instances = []
        if self.library is not None:
            _ctypes.dlclose(self.library._handle)
            self.library = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def new_instance(self) -> int:
        self.note("BackendFactory")
        pointer = self.library.BackendFactory()
        if not pointer:
            raise Failed("BackendFactory returned NULL")
        self.instances.append(pointer)
        if Instance.from_address(pointer).struct_size < INSTANCE_SIZE_1_1:
            raise NotSupported("the instance predates Backend API 1.1")
        return pointer

    @staticmethod
    def instance(pointer) -> Instance:
        return Instance.from_address(pointer)

    def is_layer_supported(self, instance, layer: Layer, message: Message) -> int:
        self.note("is_layer_supported")
        return self.instance(instance).is_layer_supported(instance, byref(layer.description),
                                                          message.pointer, message.size)

    def factory(self, instance, manager=None) -> int:
        created = c_void_p()
        message = full_message()
        self.note("create_workload_factory")
        status = self.instance(instance).create_workload_factory(instance, manager, byref(created),
                                                                 message.pointer, message.size)
        if status != OK or not created.value:
            raise Failed(f"create_workload_factory failed with status {status}: {message.text!r}")
        factory = WorkloadFactory.from_address(created.value)
        if factory.struct_size < FACTORY_SIZE_1_1 or not factory.create_workload or not factory.destroy:
            raise Failed(abi_problem("BackendWorkloadFactory", factory.struct_size, FACTORY_SIZE_1_1,
                                     "destroy"))
        return created.value

    def create_workload(self, factory, layer: Layer, message: Message) -> Tuple[int, Optional[int]]:
        created = c_void_p()
        self.note("create_workload")
        status = WorkloadFactory.from_address(factory).create_workload(
            factory, byref(layer.description), byref(created), message.pointer, message.size)
        return status, created.value

    def destroy_workload(self, pointer):
        workload = Workload.from_address(pointer)
        if workload.struct_size >= WORKLOAD_SIZE_1_1 and workload.destroy:
            self.note("destroy (workload)")
            workload.destroy(pointer)

    def destroy_factory(self, pointer):
        self.note("destroy (workload factory)")
        WorkloadFactory.from_address(pointer).destroy(pointer)

    def execute(self, workload, inputs, num_inputs, outputs, num_outputs, message=None, size=0):
        self.note("execute")
        return Workload.from_address(workload).execute(workload, inputs, num_inputs, outputs,
                                                       num_outputs, message, size)

    def manager_call(self, pointer, call, message=None, size=0):
        """``call`` ("acquire", "release" or "destroy") on a memory manager."""
        self.note(call if call != "destroy" else "destroy (memory manager)")
        function = getattr(MemoryManager.from_address(pointer), call)
        return function(pointer) if call == "destroy" else function(pointer, message, size)

    def memory_manager(self, instance) -> Optional[int]:
        function = self.instance(instance).create_memory_manager
        if not function:
            return None
        created = c_void_p()
        message = full_message()
        self.note("create_memory_manager")
        status = function(instance, byref(created), message.pointer, message.size)
        if status != OK or not created.value:
            raise Failed(f"create_memory_manager failed with status {status}: {message.text!r}")
        manager = MemoryManager.from_address(created.value)
        if manager.struct_size < MEMORY_MANAGER_SIZE_1_1 or not manager.destroy:
            raise Failed(abi_problem("BackendMemoryManager", manager.struct_size,
                                     MEMORY_MANAGER_SIZE_1_1, "destroy"))
        return created.value


def abi_problem(struct: str, size: int, needed: int, last_member: str) -> str:
    return (f"{struct}.struct_size is {size}; Backend API 1.1 needs at least {needed} (through "
            f"its member {last_member}), so a runtime may not call what lies beyond")


def buffers(arrays) -> "ctypes.Array":
    result = (Buffer * max(len(arrays), 1))()
    for i, array in enumerate(arrays):
        result[i] = Buffer(sizeof(Buffer), 0, array.ctypes.data, array.nbytes)
    return result


def supported_cases(raw: Raw, instance) -> List[Tuple[dict, Layer]]:
    """The kit's fixed layer cases this instance accepts, first of each layer type first."""
    accepted, seen, rest = [], set(), []
    for data in layer_cases():
        layer = prepare(data)
        if raw.is_layer_supported(instance, layer, full_message()) == OK:
            (rest if data["layer"] in seen else accepted).append((data, layer))
            seen.add(data["layer"])
    return accepted + rest


def first_of_each_layer(raw: Raw, instance) -> List[Tuple[dict, Layer]]:
    result, seen = [], set()
    for data, layer in supported_cases(raw, instance):
        if data["layer"] not in seen:
            seen.add(data["layer"])
            result.append((data, layer))
    return result


def _relu_layer() -> Layer:
    from loader.layers import PreparedLayer
    return Layer(PreparedLayer("Activation", 0, ((4,),), (4,), {"function": 0, "a": 0.0, "b": 0.0}))


# -- cases ------------------------------------------------------------------------------------

MESSAGE_SIZES = (0, 1, 16)


@case("abi.workload-struct", "ABI-1", blocking=True,
      blocks=("lifecycle.outlive-instance", "support.creatable", "raw.execute-misuse",
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


def _refusal_problem(what, status, message: Message) -> Optional[str]:
    if status == OK:
        return f"{what}: answered OK"
    problem = message.problem()
    if problem:
        return f"{what}: {problem}"
    if not message.text:
        return f"{what}: refused (status {status}) with an empty message"
    return None


def _refuse_everywhere(raw: Raw, instance, factory, layer: Layer, what: str) -> List[str]:
    """Ask is_layer_supported and create_workload about ``layer``; both must say no, with a
    reason."""
    problems = []
    message = full_message()
    problem = _refusal_problem(f"{what}: is_layer_supported", raw.is_layer_supported(
        instance, layer, message), message)
    if problem:
        problems.append(problem)
    message = full_message()
    status, workload = raw.create_workload(factory, layer, message)
    if workload and status == OK:
        raw.destroy_workload(workload)
    problem = _refusal_problem(f"{what}: create_workload", status, message)
    if problem:
        problems.append(problem)
    return problems


@case("raw.layer-type-boundaries", "SUP-2", tier="full")
def _raw_layer_types(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        factory = raw.factory(instance)
        problems = []
        try:
            for value in (LAYER_TYPE_COUNT, LAYER_TYPE_COUNT + 1, UINT32_MAX):
                layer = _relu_layer()
                layer.description.layer_type = value
                problems += _refuse_everywhere(raw, instance, factory, layer,
                                               f"layer type {value} (there are {LAYER_TYPE_COUNT})")
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("; ".join(problems))


@case("raw.data-types", "SUP-2", tier="full")
def _raw_data_types(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        cases = first_of_each_layer(raw, instance)
        if not cases:
            raise NotSupported("the backend supports none of the kit's layer cases")
        factory = raw.factory(instance)
        problems = []
        try:
            for data, _ in cases:
                for tensor in ("input 0", "output"):
                    for value in (1, 2, UINT32_MAX):
                        layer = prepare(data)
                        info = layer.infos[0] if tensor == "input 0" else layer.output
                        info.data_type = value
                        problems += _refuse_everywhere(raw, instance, factory, layer,
                                                       f"{data['id']} with data type {value} "
                                                       f"(not float32) for {tensor}")
                if problems:
                    break
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("; ".join(problems[:4]))


@case("raw.refusal-reasons", "SUP-2", tier="full")
def _raw_refusal_reasons(subject):
    from conformance.cases import _malformed_layers
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        factory = raw.factory(instance)
        problems = []
        try:
            for what, prepared in _malformed_layers():
                problems += _refuse_everywhere(raw, instance, factory, Layer(prepared), what)
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("the backend's own messages (not the loader's): " + "; ".join(problems))


def _check_sizes(subject, call, what) -> List[str]:
    """Call ``call(message)`` with message buffers of each size; every call must be refused with
    nothing written outside the buffer."""
    problems = []
    for size in MESSAGE_SIZES:
        message = Message(size)
        status = call(message)
        if status == OK:
            problems.append(f"{what}: answered OK with a {size}-byte message buffer")
        problem = message.problem()
        if problem:
            problems.append(f"{what}: {problem}")
    if not problems:
        # message_size 0 with a NULL buffer, as the ABI allows: a write through it crashes here
        empty = Message(0)
        empty.pointer = None
        subject.note(f"{what}, with message_size 0 and a NULL message buffer (allowed by the "
                     f"ABI); a crash here is a write through it")
        call(empty)
    return problems


@case("raw.message-buffers", "MSG-1", tier="full")
def _raw_message_buffers(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        factory = raw.factory(instance)
        layer = _relu_layer()
        layer.description.layer_type = 9999
        problems = []
        try:
            problems += _check_sizes(subject, lambda m: raw.is_layer_supported(instance, layer, m),
                                     "is_layer_supported of an unknown layer type")
            problems += _check_sizes(subject, lambda m: raw.create_workload(factory, layer, m)[0],
                                     "create_workload of an unknown layer type")
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("; ".join(problems[:4]))


@case("raw.execute-misuse", "EXEC-1", tier="full")
def _raw_execute_misuse(subject):
    from conformance import guarded
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
                    problems += _misuse_execute(subject, raw, data, workload, guarded)
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


def _misuse_execute(subject, raw, data, workload, guarded) -> List[str]:
    import numpy as np
    inputs = _layer_inputs(data)
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
        problem = _refusal_problem(f"{data['id']}: execute given {what}", status, message)
        if problem:
            problems.append(problem)

    with guarded.Arena() as arena:
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


@case("lifecycle.memory-manager-misuse", "LIFE-4", tier="full")
def _memory_manager_misuse(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        pointer = raw.memory_manager(instance)
        if pointer is None:
            raise NotSupported("the backend provides no memory manager")
        problems = []

        def call(name):
            message = full_message()
            return raw.manager_call(pointer, name, message.pointer, message.size), message
        try:
            problem = _refusal_problem("release before any acquire", *call("release"))
            if problem:
                problems.append(problem)
            status, message = call("acquire")
            if status != OK:
                raise Failed(f"the first acquire failed with status {status}: {message.text!r}")
            problem = _refusal_problem("a second acquire without a release", *call("acquire"))
            if problem:
                problems.append(problem)
            status, message = call("release")
            if status != OK:
                problems.append(f"release after a refused second acquire failed with status "
                                f"{status}: {message.text!r}")
        finally:
            raw.manager_call(pointer, "destroy")
        if problems:
            raise Failed("; ".join(problems) + " (expected INVALID_STATE with a reason)")


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
                inputs = _layer_inputs(data)
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


def instance_id(path: str) -> Optional[str]:
    """What a new instance's get_id() returns (for messages)."""
    with Raw(path) as raw:
        pointer = raw.library.BackendFactory()
        if not pointer:
            return None
        instance = Instance.from_address(pointer)
        try:
            raw_id = instance.get_id(pointer) if instance.get_id else None
            if not raw_id:
                return None
            strnlen = ctypes.CDLL(None).strnlen
            strnlen.argtypes, strnlen.restype = [c_void_p, c_size_t], c_size_t
            length = strnlen(raw_id, 257)  # never read past the id's NUL
            return ctypes.string_at(raw_id, length).decode("ascii", "replace")
        finally:
            if instance.destroy:
                instance.destroy(pointer)
