"""The raw interface: the backend's C functions called directly (through ctypes, in the worker),
so that the ``raw_*`` families can commit the misuse a well-formed runtime never does. The
loader's own calls fill in text when a backend gives none; here the backend's own message is
what is judged. The structures are conformance/raw_structs.py.
"""
import ctypes
from ctypes import POINTER, addressof, byref, c_size_t, c_void_p, sizeof
from typing import List, Optional, Tuple

import _ctypes

from conformance.layer_runs import layer_cases
from conformance.raw_structs import (DESCRIPTORS, FACTORY_SIZE_1_1, INSTANCE_SIZE_1_1,
                                     MEMORY_MANAGER_SIZE_1_1, OK, WORKLOAD_SIZE_1_1, Buffer,
                                     Instance, LayerDescription, MemoryManager, TensorInfo,
                                     Workload, WorkloadFactory)
from conformance.registry import Failed, NotSupported


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
    """A BackendLayerDescription (and everything it points to) built from a PreparedLayer: every
    input's info, then the output's, and the descriptor struct of the layer's type filled from
    the prepared fields (a struct of the size Backend API 1.3 gives it)."""

    def __init__(self, prepared):
        shapes = list(prepared.input_shapes) + [prepared.output_shape]
        n = len(prepared.input_shapes)
        self.infos = (TensorInfo * len(shapes))()
        for info, shape in zip(self.infos, shapes):
            info.struct_size = sizeof(TensorInfo)
            info.num_dimensions = len(shape)
            for d, v in enumerate(shape):
                info.dimensions[d] = v
        self.descriptor = descriptor(prepared.code, prepared.fields)
        self.description = LayerDescription(
            sizeof(LayerDescription), prepared.code, n, 1,
            ctypes.cast(self.infos, POINTER(TensorInfo)),
            ctypes.cast(byref(self.infos, n * sizeof(TensorInfo)), POINTER(TensorInfo)),
            addressof(self.descriptor) if self.descriptor is not None else None)
        self.prepared = prepared

    @property
    def output(self) -> TensorInfo:
        return self.infos[len(self.infos) - 1]


def descriptor(code, fields):
    """The descriptor struct of layer type ``code`` filled from ``fields`` (PreparedLayer.fields,
    named as the C members), or None for a layer type without one."""
    struct = DESCRIPTORS.get(code)
    if struct is None:
        return None
    result = struct()
    result.struct_size = sizeof(struct)
    for name, value in fields.items():
        if isinstance(value, (tuple, list)):
            array = getattr(result, name)
            for k, v in enumerate(value):
                array[k] = v
        else:
            setattr(result, name, value)
    return result


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


def relu_layer() -> Layer:
    from loader.layers import PreparedLayer
    return Layer(PreparedLayer("Activation", 0, ((4,),), (4,), {"function": 0, "a": 0.0, "b": 0.0}))


def refusal_problem(what, status, message: Message) -> Optional[str]:
    if status == OK:
        return f"{what}: answered OK"
    problem = message.problem()
    if problem:
        return f"{what}: {problem}"
    if not message.text:
        return f"{what}: refused (status {status}) with an empty message"
    return None


def refuse_everywhere(raw: Raw, instance, factory, layer: Layer, what: str) -> List[str]:
    """Ask is_layer_supported and create_workload about ``layer``; both must say no, with a
    reason."""
    problems = []
    message = full_message()
    problem = refusal_problem(f"{what}: is_layer_supported", raw.is_layer_supported(
        instance, layer, message), message)
    if problem:
        problems.append(problem)
    message = full_message()
    status, workload = raw.create_workload(factory, layer, message)
    if workload and status == OK:
        raw.destroy_workload(workload)
    problem = refusal_problem(f"{what}: create_workload", status, message)
    if problem:
        problems.append(problem)
    return problems


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
