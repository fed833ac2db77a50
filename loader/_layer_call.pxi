# A layer call on the C side, included into _core.pyx by _backend.pxi: the description of a
# loader.layers.PreparedLayer a backend reads, and NumPy arrays lent to it as buffers.

# ---------------------------------------------------------------------------------------------
# Layer descriptions: the C side of loader.layers.PreparedLayer
# ---------------------------------------------------------------------------------------------

cdef struct _LayerStorage:
    abi.BackendLayerDescription description
    abi.BackendTensorInfo infos[4]               # up to 3 inputs, then the output
    abi.BackendActivationDescriptor activation
    abi.BackendFullyConnectedDescriptor fully_connected
    abi.BackendConvolution2dDescriptor convolution
    abi.BackendPooling2dDescriptor pooling
    abi.BackendSoftmaxDescriptor softmax


cdef void _fill_info(abi.BackendTensorInfo *info, tuple shape) except *:
    cdef int d
    memset(info, 0, sizeof(abi.BackendTensorInfo))
    info.struct_size = sizeof(abi.BackendTensorInfo)
    info.data_type = abi.BACKEND_DATA_TYPE_FLOAT32
    info.num_dimensions = len(shape)
    for d in range(len(shape)):
        info.dimensions[d] = shape[d]


cdef void _pack_layer(_LayerStorage *s, object prepared) except *:
    """Fill ``s`` from a loader.layers.PreparedLayer; ``s.description`` points into ``s``. What
    the C structs cannot hold (more inputs or dimensions than they have room for, values out of
    their members' range) is refused; everything else is passed on unchecked."""
    cdef int n = len(prepared.input_shapes)
    cdef dict f = prepared.fields
    cdef uint32_t code
    if n > 3:
        raise _errors.InvalidLayerError(f"{prepared.name}: a layer description holds at most 3 "
                                        f"inputs, got {n}")
    for shape in list(prepared.input_shapes) + [prepared.output_shape]:
        if len(shape) > abi.BACKEND_MAX_DIMENSIONS:
            raise _errors.InvalidLayerError(
                f"{prepared.name}: a tensor has at most {abi.BACKEND_MAX_DIMENSIONS} dimensions, "
                f"got shape {list(shape)}")
    try:
        code = prepared.code
        _fill(s, prepared, n, f, code)
    except OverflowError as error:
        raise _errors.InvalidLayerError(f"{prepared.name}: a value does not fit the C layer "
                                        f"description: {error}") from None


cdef void _fill(_LayerStorage *s, object prepared, int n, dict f, uint32_t code) except *:
    cdef int i
    memset(s, 0, sizeof(_LayerStorage))
    for i in range(n):
        _fill_info(&s.infos[i], prepared.input_shapes[i])
    _fill_info(&s.infos[3], prepared.output_shape)
    s.description.struct_size = sizeof(abi.BackendLayerDescription)
    s.description.layer_type = code
    s.description.num_inputs = n
    s.description.num_outputs = 1
    s.description.inputs = &s.infos[0]
    s.description.outputs = &s.infos[3]
    s.description.descriptor = NULL
    if code == abi.BACKEND_LAYER_ACTIVATION:
        s.activation.struct_size = sizeof(s.activation)
        s.activation.function = f["function"]
        s.activation.a = f["a"]
        s.activation.b = f["b"]
        s.description.descriptor = &s.activation
    elif code == abi.BACKEND_LAYER_FULLY_CONNECTED:
        s.fully_connected.struct_size = sizeof(s.fully_connected)
        s.fully_connected.transpose_weights = f["transpose_weights"]
        s.fully_connected.bias_enabled = f["bias_enabled"]
        s.description.descriptor = &s.fully_connected
    elif code == abi.BACKEND_LAYER_CONVOLUTION2D or code == abi.BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D:
        s.convolution.struct_size = sizeof(s.convolution)
        s.convolution.stride_y, s.convolution.stride_x = f["stride_y"], f["stride_x"]
        s.convolution.pad_top, s.convolution.pad_bottom = f["pad_top"], f["pad_bottom"]
        s.convolution.pad_left, s.convolution.pad_right = f["pad_left"], f["pad_right"]
        s.convolution.dilation_y, s.convolution.dilation_x = f["dilation_y"], f["dilation_x"]
        s.convolution.bias_enabled = f["bias_enabled"]
        s.description.descriptor = &s.convolution
    elif code == abi.BACKEND_LAYER_POOLING2D:
        s.pooling.struct_size = sizeof(s.pooling)
        s.pooling.pool_type = f["pool_type"]
        s.pooling.kernel_y, s.pooling.kernel_x = f["kernel_y"], f["kernel_x"]
        s.pooling.stride_y, s.pooling.stride_x = f["stride_y"], f["stride_x"]
        s.pooling.pad_top, s.pooling.pad_bottom = f["pad_top"], f["pad_bottom"]
        s.pooling.pad_left, s.pooling.pad_right = f["pad_left"], f["pad_right"]
        s.description.descriptor = &s.pooling
    elif code == abi.BACKEND_LAYER_SOFTMAX:
        s.softmax.struct_size = sizeof(s.softmax)
        s.softmax.beta = f["beta"]
        s.description.descriptor = &s.softmax


cdef object _prepare(object layer, object inputs, object descriptor):
    """Arrays (or shapes) -> PreparedLayer."""
    return _layers().prepare(layer, inputs, descriptor)


# ---------------------------------------------------------------------------------------------
# Buffers: NumPy arrays lent to a workload for one execution
# ---------------------------------------------------------------------------------------------

cdef bint _is_float32_array(object value):
    import numpy as np
    return isinstance(value, np.ndarray) and value.dtype == np.float32


cdef class _Buffers:
    """Holds Py_buffer views of arrays (C-contiguous or refused) for the duration of a call."""
    cdef Py_buffer views[4]
    cdef abi.BackendBuffer buffers[4]
    cdef int count

    def __dealloc__(self):
        cdef int i
        for i in range(self.count):
            PyBuffer_Release(&self.views[i])

    cdef int add(self, object array, bint writable) except -1:
        cdef int flags = PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0)
        if self.count >= 4:
            raise ValueError("too many buffers")
        PyObject_GetBuffer(array, &self.views[self.count], flags)
        self.buffers[self.count].struct_size = sizeof(abi.BackendBuffer)
        self.buffers[self.count].reserved = 0
        self.buffers[self.count].data = self.views[self.count].buf
        self.buffers[self.count].size_bytes = self.views[self.count].len
        self.count += 1
        return 0
