"""The ctypes mirror of abi/backend_api.h, member for member, for the raw-interface cases
(conformance/raw.py and the ``raw_*`` families), which call the backend's C functions directly."""
from ctypes import (CFUNCTYPE, POINTER, Structure, c_float, c_int32, c_int64, c_size_t, c_uint32,
                    c_uint64, c_void_p)

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
