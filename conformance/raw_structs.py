"""The ctypes mirror of abi/backend_api.h, member for member, for the raw-interface cases
(conformance/raw.py and the ``raw_*`` families), which call the backend's C functions directly.
tests/test_raw_structs.py compiles the header and checks every offset and size here against it.
The descriptors hold every member of Backend API 1.3; ``DESCRIPTORS`` maps a layer code to its
descriptor struct, and ``SIZES`` gives each struct's size at each version it changed."""
from ctypes import (CFUNCTYPE, POINTER, Structure, c_float, c_int32, c_int64, c_size_t, c_uint32,
                    c_uint64, c_void_p)

OK = 0
INVALID_STATE = 4
LAYER_TYPE_COUNT = 9              # BACKEND_LAYER_TYPE_COUNT, = _1_2: the layer types until 1.2
LAYER_TYPE_COUNT_1_3 = 26         # BACKEND_LAYER_TYPE_COUNT_1_3
UINT32_MAX = 2**32 - 1
MAX_DIMENSIONS = 8
MAX_LAYER_RANK = 6                # BACKEND_MAX_LAYER_RANK: tensors of the 1.3 layer types
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


def _uint32s(*names):
    return [(name, c_uint32) for name in names]


class Convolution2dDescriptor(Structure):
    _fields_ = _uint32s("struct_size", "stride_y", "stride_x", "pad_top", "pad_bottom", "pad_left",
                        "pad_right", "dilation_y", "dilation_x", "bias_enabled",
                        "groups")  # 1.3


class Pooling2dDescriptor(Structure):
    _fields_ = _uint32s("struct_size", "pool_type", "kernel_y", "kernel_x", "stride_y", "stride_x",
                        "pad_top", "pad_bottom", "pad_left", "pad_right",
                        "ceil_mode", "count_include_pad", "dilation_y", "dilation_x")  # 1.3


class SoftmaxDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("beta", c_float),
                ("axis", c_uint32), ("log", c_uint32)]  # 1.3


# -- the descriptors of the layer types of Backend API 1.3 --

class ElementwiseUnaryDescriptor(Structure):
    _fields_ = _uint32s("struct_size", "function")


class ConcatenationDescriptor(Structure):
    _fields_ = _uint32s("struct_size", "axis")


class SliceDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("reserved", c_uint32),
                ("begin", c_int64 * MAX_DIMENSIONS), ("step", c_int64 * MAX_DIMENSIONS)]


class TransposeDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("perm", c_uint32 * MAX_DIMENSIONS)]


class PadDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("mode", c_uint32), ("value", c_float),
                ("reserved", c_uint32), ("pad_begin", c_int64 * MAX_DIMENSIONS),
                ("pad_end", c_int64 * MAX_DIMENSIONS)]


class ResizeDescriptor(Structure):
    _fields_ = _uint32s("struct_size", "mode", "coordinate_transformation", "nearest_mode") + [
        ("scale_y", c_float), ("scale_x", c_float), ("cubic_coeff_a", c_float),
        ("exclude_outside", c_uint32)]


class ReduceDescriptor(Structure):
    _fields_ = _uint32s("struct_size", "function", "axes", "keep_dims")


class BatchNormalizationDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("epsilon", c_float)]


class LayerNormalizationDescriptor(Structure):
    _fields_ = [("struct_size", c_uint32), ("axis", c_uint32), ("epsilon", c_float),
                ("bias_enabled", c_uint32)]


class TransposeConvolution2dDescriptor(Structure):
    _fields_ = _uint32s("struct_size", "stride_y", "stride_x", "pad_top", "pad_bottom", "pad_left",
                        "pad_right", "output_padding_y", "output_padding_x", "dilation_y",
                        "dilation_x", "groups", "bias_enabled")


#: BACKEND_LAYER_* -> its descriptor struct (the layers without one are absent).
DESCRIPTORS = {
    0: ActivationDescriptor, 3: FullyConnectedDescriptor, 4: Convolution2dDescriptor,
    5: Convolution2dDescriptor, 6: Pooling2dDescriptor, 7: SoftmaxDescriptor,
    14: ElementwiseUnaryDescriptor, 16: ConcatenationDescriptor, 17: SliceDescriptor,
    18: TransposeDescriptor, 19: PadDescriptor, 20: ResizeDescriptor, 21: ReduceDescriptor,
    22: BatchNormalizationDescriptor, 23: LayerNormalizationDescriptor,
    25: TransposeConvolution2dDescriptor,
}


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


#: BACKEND_<STRUCT>_SIZE_<version>: the size of each descriptor at each version that changed it
#: (through the last member it had then).
SIZES = {
    (ActivationDescriptor, "1.1"): size_through(ActivationDescriptor, "b"),
    (FullyConnectedDescriptor, "1.1"): size_through(FullyConnectedDescriptor, "bias_enabled"),
    (Convolution2dDescriptor, "1.1"): size_through(Convolution2dDescriptor, "bias_enabled"),
    (Convolution2dDescriptor, "1.3"): size_through(Convolution2dDescriptor, "groups"),
    (Pooling2dDescriptor, "1.1"): size_through(Pooling2dDescriptor, "pad_right"),
    (Pooling2dDescriptor, "1.3"): size_through(Pooling2dDescriptor, "dilation_x"),
    (SoftmaxDescriptor, "1.1"): size_through(SoftmaxDescriptor, "beta"),
    (SoftmaxDescriptor, "1.3"): size_through(SoftmaxDescriptor, "log"),
    **{(struct, "1.3"): size_through(struct, struct._fields_[-1][0]) for struct in (
        ElementwiseUnaryDescriptor, ConcatenationDescriptor, SliceDescriptor, TransposeDescriptor,
        PadDescriptor, ResizeDescriptor, ReduceDescriptor, BatchNormalizationDescriptor,
        LayerNormalizationDescriptor, TransposeConvolution2dDescriptor)},
}


def descriptor_size(struct, version: str) -> int:
    """The struct's size at ``version`` (the latest version at or before it that changed it)."""
    sizes = [(v, size) for (s, v), size in SIZES.items() if s is struct and v <= version]
    return max(sizes)[1]
