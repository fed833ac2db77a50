# A layer call on the C side, included into _core.pyx by _backend.pxi: the description of a
# loader.layers.PreparedLayer a backend reads, and NumPy arrays lent to it as buffers.

# ---------------------------------------------------------------------------------------------
# Layer descriptions: the C side of loader.layers.PreparedLayer
# ---------------------------------------------------------------------------------------------

cdef union _Descriptor:
    abi.BackendActivationDescriptor activation
    abi.BackendFullyConnectedDescriptor fully_connected
    abi.BackendConvolution2dDescriptor convolution
    abi.BackendPooling2dDescriptor pooling
    abi.BackendSoftmaxDescriptor softmax
    abi.BackendElementwiseUnaryDescriptor unary
    abi.BackendConcatenationDescriptor concatenation
    abi.BackendSliceDescriptor slice
    abi.BackendTransposeDescriptor transpose
    abi.BackendPadDescriptor pad
    abi.BackendResizeDescriptor resize
    abi.BackendReduceDescriptor reduce
    abi.BackendBatchNormalizationDescriptor batch_normalization
    abi.BackendLayerNormalizationDescriptor layer_normalization
    abi.BackendTransposeConvolution2dDescriptor transpose_convolution


cdef class _LayerCall:
    """The C description of one layer (BackendLayerDescription, its tensor infos and its
    descriptor), alive as long as this object."""
    cdef abi.BackendLayerDescription description
    cdef abi.BackendTensorInfo *infos            # the inputs, then the output
    cdef _Descriptor d

    def __dealloc__(self):
        free(self.infos)


cdef void _fill_info(abi.BackendTensorInfo *info, tuple shape) except *:
    cdef int d
    memset(info, 0, sizeof(abi.BackendTensorInfo))
    info.struct_size = sizeof(abi.BackendTensorInfo)
    info.data_type = abi.BACKEND_DATA_TYPE_FLOAT32
    info.num_dimensions = len(shape)
    for d in range(len(shape)):
        info.dimensions[d] = shape[d]


cdef _LayerCall _pack_layer(object prepared):
    """The C description of a loader.layers.PreparedLayer. What the C structs cannot hold (more
    dimensions than they have room for, values out of their members' range) is refused;
    everything else is passed on unchecked."""
    cdef _LayerCall call = _LayerCall.__new__(_LayerCall)
    cdef Py_ssize_t n = len(prepared.input_shapes), i
    for shape in list(prepared.input_shapes) + [prepared.output_shape]:
        if len(shape) > abi.BACKEND_MAX_DIMENSIONS:
            raise _errors.InvalidLayerError(
                f"{prepared.name}: a tensor has at most {abi.BACKEND_MAX_DIMENSIONS} dimensions, "
                f"got shape {list(shape)}")
    if n > 0xFFFF:
        raise _errors.InvalidLayerError(f"{prepared.name}: {n} inputs are too many")
    call.infos = <abi.BackendTensorInfo *>calloc(n + 1, sizeof(abi.BackendTensorInfo))
    if call.infos == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            _fill_info(&call.infos[i], prepared.input_shapes[i])
        _fill_info(&call.infos[n], prepared.output_shape)
        memset(&call.description, 0, sizeof(call.description))
        call.description.struct_size = sizeof(abi.BackendLayerDescription)
        call.description.layer_type = prepared.code
        call.description.num_inputs = <uint32_t>n
        call.description.num_outputs = 1
        call.description.inputs = &call.infos[0]
        call.description.outputs = &call.infos[n]
        call.description.descriptor = NULL
        _fill_descriptor(call, prepared.code, prepared.fields)
    except (OverflowError, KeyError, TypeError) as error:
        raise _errors.InvalidLayerError(f"{prepared.name}: a value does not fit the C layer "
                                        f"description: {error}") from None
    return call


cdef void _fill_descriptor(_LayerCall call, uint32_t code, dict f) except *:
    cdef _Descriptor *d = &call.d
    cdef const void *chosen = NULL
    cdef int k
    memset(d, 0, sizeof(_Descriptor))
    if code == abi.BACKEND_LAYER_ACTIVATION:
        d.activation.struct_size = sizeof(d.activation)
        d.activation.function = f["function"]
        d.activation.a = f["a"]
        d.activation.b = f["b"]
        chosen = &d.activation
    elif code == abi.BACKEND_LAYER_FULLY_CONNECTED:
        d.fully_connected.struct_size = sizeof(d.fully_connected)
        d.fully_connected.transpose_weights = f["transpose_weights"]
        d.fully_connected.bias_enabled = f["bias_enabled"]
        chosen = &d.fully_connected
    elif code == abi.BACKEND_LAYER_CONVOLUTION2D or code == abi.BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D:
        d.convolution.struct_size = sizeof(d.convolution)
        d.convolution.stride_y, d.convolution.stride_x = f["stride_y"], f["stride_x"]
        d.convolution.pad_top, d.convolution.pad_bottom = f["pad_top"], f["pad_bottom"]
        d.convolution.pad_left, d.convolution.pad_right = f["pad_left"], f["pad_right"]
        d.convolution.dilation_y, d.convolution.dilation_x = f["dilation_y"], f["dilation_x"]
        d.convolution.bias_enabled = f["bias_enabled"]
        d.convolution.groups = f.get("groups", 1)
        chosen = &d.convolution
    elif code == abi.BACKEND_LAYER_POOLING2D:
        d.pooling.struct_size = sizeof(d.pooling)
        d.pooling.pool_type = f["pool_type"]
        d.pooling.kernel_y, d.pooling.kernel_x = f["kernel_y"], f["kernel_x"]
        d.pooling.stride_y, d.pooling.stride_x = f["stride_y"], f["stride_x"]
        d.pooling.pad_top, d.pooling.pad_bottom = f["pad_top"], f["pad_bottom"]
        d.pooling.pad_left, d.pooling.pad_right = f["pad_left"], f["pad_right"]
        d.pooling.ceil_mode = f.get("ceil_mode", 0)
        d.pooling.count_include_pad = f.get("count_include_pad", 0)
        d.pooling.dilation_y = f.get("dilation_y", 1)
        d.pooling.dilation_x = f.get("dilation_x", 1)
        chosen = &d.pooling
    elif code == abi.BACKEND_LAYER_SOFTMAX:
        d.softmax.struct_size = sizeof(d.softmax)
        d.softmax.beta = f["beta"]
        d.softmax.axis = f.get("axis", call.infos[0].num_dimensions - 1
                               if call.infos[0].num_dimensions else 0)
        d.softmax.log = f.get("log", 0)
        chosen = &d.softmax
    elif code == abi.BACKEND_LAYER_ELEMENTWISE_UNARY:
        d.unary.struct_size = sizeof(d.unary)
        d.unary.function = f["function"]
        chosen = &d.unary
    elif code == abi.BACKEND_LAYER_CONCATENATION:
        d.concatenation.struct_size = sizeof(d.concatenation)
        d.concatenation.axis = f["axis"]
        chosen = &d.concatenation
    elif code == abi.BACKEND_LAYER_SLICE:
        d.slice.struct_size = sizeof(d.slice)
        for k in range(len(f["begin"])):
            d.slice.begin[k] = f["begin"][k]
            d.slice.step[k] = f["step"][k]
        chosen = &d.slice
    elif code == abi.BACKEND_LAYER_TRANSPOSE:
        d.transpose.struct_size = sizeof(d.transpose)
        for k in range(len(f["perm"])):
            d.transpose.perm[k] = f["perm"][k]
        chosen = &d.transpose
    elif code == abi.BACKEND_LAYER_PAD:
        d.pad.struct_size = sizeof(d.pad)
        d.pad.mode = f["mode"]
        d.pad.value = f["value"]
        for k in range(len(f["pad_begin"])):
            d.pad.pad_begin[k] = f["pad_begin"][k]
            d.pad.pad_end[k] = f["pad_end"][k]
        chosen = &d.pad
    elif code == abi.BACKEND_LAYER_RESIZE:
        d.resize.struct_size = sizeof(d.resize)
        d.resize.mode = f["mode"]
        d.resize.coordinate_transformation = f["coordinate_transformation"]
        d.resize.nearest_mode = f["nearest_mode"]
        d.resize.scale_y, d.resize.scale_x = f["scale_y"], f["scale_x"]
        d.resize.cubic_coeff_a = f["cubic_coeff_a"]
        d.resize.exclude_outside = f["exclude_outside"]
        chosen = &d.resize
    elif code == abi.BACKEND_LAYER_REDUCE:
        d.reduce.struct_size = sizeof(d.reduce)
        d.reduce.function = f["function"]
        d.reduce.axes = f["axes"]
        d.reduce.keep_dims = f["keep_dims"]
        chosen = &d.reduce
    elif code == abi.BACKEND_LAYER_BATCH_NORMALIZATION:
        d.batch_normalization.struct_size = sizeof(d.batch_normalization)
        d.batch_normalization.epsilon = f["epsilon"]
        chosen = &d.batch_normalization
    elif code == abi.BACKEND_LAYER_LAYER_NORMALIZATION:
        d.layer_normalization.struct_size = sizeof(d.layer_normalization)
        d.layer_normalization.axis = f["axis"]
        d.layer_normalization.epsilon = f["epsilon"]
        d.layer_normalization.bias_enabled = f["bias_enabled"]
        chosen = &d.layer_normalization
    elif code == abi.BACKEND_LAYER_TRANSPOSE_CONVOLUTION2D:
        d.transpose_convolution.struct_size = sizeof(d.transpose_convolution)
        d.transpose_convolution.stride_y = f["stride_y"]
        d.transpose_convolution.stride_x = f["stride_x"]
        d.transpose_convolution.pad_top = f["pad_top"]
        d.transpose_convolution.pad_bottom = f["pad_bottom"]
        d.transpose_convolution.pad_left = f["pad_left"]
        d.transpose_convolution.pad_right = f["pad_right"]
        d.transpose_convolution.output_padding_y = f["output_padding_y"]
        d.transpose_convolution.output_padding_x = f["output_padding_x"]
        d.transpose_convolution.dilation_y = f["dilation_y"]
        d.transpose_convolution.dilation_x = f["dilation_x"]
        d.transpose_convolution.groups = f["groups"]
        d.transpose_convolution.bias_enabled = f["bias_enabled"]
        chosen = &d.transpose_convolution
    call.description.descriptor = chosen


cdef str _version_refusal(object prepared, Library library):
    return version_refusal(prepared, library.backend_id, library.major, library.minor)


def version_refusal(object prepared, str backend_id, uint32_t major, uint32_t minor):
    """Why a backend cannot be handed ``prepared`` because of its Backend API version, or None
    (CHANGELOG 1.3: a backend is never offered what its version cannot express)."""
    if prepared.minor <= minor or prepared.minor <= 1:   # 1.0 lacks layers altogether
        return None
    what = (f"the layer type {prepared.name}" if prepared.code >= abi.BACKEND_LAYER_TYPE_COUNT_1_2
            else f"{prepared.name} with these descriptor values")
    return (f"not supported by this backend's API version: {what} needs Backend API "
            f"1.{prepared.minor}, {backend_id!r} is built against {major}.{minor}")


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
    cdef Py_buffer *views
    cdef abi.BackendBuffer *buffers
    cdef Py_ssize_t count, capacity
    cdef bint flags                 # the backend reads BackendBuffer.flags (1.3 and later)

    def __cinit__(self, Py_ssize_t capacity, bint flags):
        self.views = <Py_buffer *>calloc(capacity if capacity else 1, sizeof(Py_buffer))
        self.buffers = <abi.BackendBuffer *>calloc(capacity if capacity else 1,
                                                   sizeof(abi.BackendBuffer))
        if self.views == NULL or self.buffers == NULL:
            raise MemoryError()
        self.capacity = capacity
        self.flags = flags

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.count):
            PyBuffer_Release(&self.views[i])
        free(self.views)
        free(self.buffers)

    cdef int add(self, object array, bint writable) except -1:
        """Lend ``array``; an input whose memory is read-only is marked so (1.3)."""
        cdef int flags = PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0)
        if self.count >= self.capacity:
            raise ValueError("too many buffers")
        PyObject_GetBuffer(array, &self.views[self.count], flags)
        self.buffers[self.count].struct_size = sizeof(abi.BackendBuffer)
        self.buffers[self.count].flags = abi.BACKEND_BUFFER_READ_ONLY \
            if self.flags and self.views[self.count].readonly else 0
        self.buffers[self.count].data = self.views[self.count].buf
        self.buffers[self.count].size_bytes = self.views[self.count].len
        self.count += 1
        return 0
