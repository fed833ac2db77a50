# Cython mirror of abi/backend_api.h: declarations only, named exactly as in
# the header. Logic lives in loader/_core.pyx.
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


cdef extern from "backend_api.h" nogil:
    enum:
        BACKEND_API_VERSION_MAJOR
        BACKEND_API_VERSION_MINOR
        BACKEND_ID_MAX_LENGTH
        BACKEND_MAX_DIMENSIONS
        BACKEND_MAX_LAYER_RANK

    ctypedef int32_t BackendStatus
    enum:
        BACKEND_STATUS_OK
        BACKEND_STATUS_INVALID_ARGUMENT
        BACKEND_STATUS_UNSUPPORTED
        BACKEND_STATUS_OUT_OF_MEMORY
        BACKEND_STATUS_INVALID_STATE
        BACKEND_STATUS_INTERNAL_ERROR

    ctypedef uint32_t BackendDataType
    enum:
        BACKEND_DATA_TYPE_FLOAT32

    ctypedef struct BackendTensorInfo:
        uint32_t struct_size
        BackendDataType data_type
        uint32_t num_dimensions
        uint32_t reserved
        int64_t dimensions[8]

    ctypedef struct BackendBuffer:
        uint32_t struct_size
        uint32_t reserved
        uint32_t flags              # the same member as reserved (an anonymous union)
        void *data
        uint64_t size_bytes

    enum:
        BACKEND_BUFFER_READ_ONLY

    ctypedef uint32_t BackendLayerType
    enum:
        BACKEND_LAYER_ACTIVATION
        BACKEND_LAYER_ADDITION
        BACKEND_LAYER_MULTIPLICATION
        BACKEND_LAYER_FULLY_CONNECTED
        BACKEND_LAYER_CONVOLUTION2D
        BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D
        BACKEND_LAYER_POOLING2D
        BACKEND_LAYER_SOFTMAX
        BACKEND_LAYER_RESHAPE
        BACKEND_LAYER_SUBTRACTION
        BACKEND_LAYER_DIVISION
        BACKEND_LAYER_MAXIMUM
        BACKEND_LAYER_MINIMUM
        BACKEND_LAYER_POWER
        BACKEND_LAYER_ELEMENTWISE_UNARY
        BACKEND_LAYER_PRELU
        BACKEND_LAYER_CONCATENATION
        BACKEND_LAYER_SLICE
        BACKEND_LAYER_TRANSPOSE
        BACKEND_LAYER_PAD
        BACKEND_LAYER_RESIZE
        BACKEND_LAYER_REDUCE
        BACKEND_LAYER_BATCH_NORMALIZATION
        BACKEND_LAYER_LAYER_NORMALIZATION
        BACKEND_LAYER_MAT_MUL
        BACKEND_LAYER_TRANSPOSE_CONVOLUTION2D
        BACKEND_LAYER_TYPE_COUNT
        BACKEND_LAYER_TYPE_COUNT_1_2
        BACKEND_LAYER_TYPE_COUNT_1_3

    enum:
        BACKEND_ACTIVATION_RELU
        BACKEND_ACTIVATION_BOUNDED_RELU
        BACKEND_ACTIVATION_SIGMOID
        BACKEND_ACTIVATION_TANH
        BACKEND_ACTIVATION_LEAKY_RELU
        BACKEND_POOLING_MAX
        BACKEND_POOLING_AVERAGE
        BACKEND_POOLING_L2

    ctypedef struct BackendActivationDescriptor:
        uint32_t struct_size
        uint32_t function
        float a
        float b

    ctypedef struct BackendFullyConnectedDescriptor:
        uint32_t struct_size
        uint32_t transpose_weights
        uint32_t bias_enabled

    ctypedef struct BackendConvolution2dDescriptor:
        uint32_t struct_size
        uint32_t stride_y, stride_x
        uint32_t pad_top, pad_bottom, pad_left, pad_right
        uint32_t dilation_y, dilation_x
        uint32_t bias_enabled
        uint32_t groups

    ctypedef struct BackendPooling2dDescriptor:
        uint32_t struct_size
        uint32_t pool_type
        uint32_t kernel_y, kernel_x
        uint32_t stride_y, stride_x
        uint32_t pad_top, pad_bottom, pad_left, pad_right
        uint32_t ceil_mode
        uint32_t count_include_pad
        uint32_t dilation_y, dilation_x

    ctypedef struct BackendSoftmaxDescriptor:
        uint32_t struct_size
        float beta
        uint32_t axis
        uint32_t log

    ctypedef struct BackendElementwiseUnaryDescriptor:
        uint32_t struct_size
        uint32_t function

    ctypedef struct BackendConcatenationDescriptor:
        uint32_t struct_size
        uint32_t axis

    ctypedef struct BackendSliceDescriptor:
        uint32_t struct_size
        uint32_t reserved
        int64_t begin[8]
        int64_t step[8]

    ctypedef struct BackendTransposeDescriptor:
        uint32_t struct_size
        uint32_t perm[8]

    ctypedef struct BackendPadDescriptor:
        uint32_t struct_size
        uint32_t mode
        float value
        uint32_t reserved
        int64_t pad_begin[8]
        int64_t pad_end[8]

    ctypedef struct BackendResizeDescriptor:
        uint32_t struct_size
        uint32_t mode
        uint32_t coordinate_transformation
        uint32_t nearest_mode
        float scale_y, scale_x
        float cubic_coeff_a
        uint32_t exclude_outside

    ctypedef struct BackendReduceDescriptor:
        uint32_t struct_size
        uint32_t function
        uint32_t axes
        uint32_t keep_dims

    ctypedef struct BackendBatchNormalizationDescriptor:
        uint32_t struct_size
        float epsilon

    ctypedef struct BackendLayerNormalizationDescriptor:
        uint32_t struct_size
        uint32_t axis
        float epsilon
        uint32_t bias_enabled

    ctypedef struct BackendTransposeConvolution2dDescriptor:
        uint32_t struct_size
        uint32_t stride_y, stride_x
        uint32_t pad_top, pad_bottom, pad_left, pad_right
        uint32_t output_padding_y, output_padding_x
        uint32_t dilation_y, dilation_x
        uint32_t groups
        uint32_t bias_enabled

    ctypedef struct BackendLayerDescription:
        uint32_t struct_size
        BackendLayerType layer_type
        uint32_t num_inputs
        uint32_t num_outputs
        const BackendTensorInfo *inputs
        const BackendTensorInfo *outputs
        const void *descriptor

    ctypedef struct BackendCapability:
        uint32_t struct_size
        uint32_t value
        const char *name

    ctypedef struct BackendAllocator:
        uint32_t struct_size
        uint32_t reserved
        void *user_data
        void *(*allocate)(void *user_data, size_t size, size_t alignment) noexcept nogil
        void (*deallocate)(void *user_data, void *pointer) noexcept nogil

    cdef struct BackendMemoryManager:
        uint32_t struct_size
        uint32_t reserved
        BackendStatus (*acquire)(BackendMemoryManager *self, char *message, size_t message_size) noexcept nogil
        BackendStatus (*release)(BackendMemoryManager *self, char *message, size_t message_size) noexcept nogil
        void (*destroy)(BackendMemoryManager *self) noexcept nogil

    cdef struct BackendWorkload:
        uint32_t struct_size
        uint32_t reserved
        BackendStatus (*execute)(BackendWorkload *self,
                                 const BackendBuffer *inputs, uint32_t num_inputs,
                                 const BackendBuffer *outputs, uint32_t num_outputs,
                                 char *message, size_t message_size) noexcept nogil
        void (*destroy)(BackendWorkload *self) noexcept nogil

    cdef struct BackendWorkloadFactory:
        uint32_t struct_size
        uint32_t reserved
        BackendStatus (*create_workload)(BackendWorkloadFactory *self,
                                         const BackendLayerDescription *layer,
                                         BackendWorkload **workload,
                                         char *message, size_t message_size) noexcept nogil
        void (*destroy)(BackendWorkloadFactory *self) noexcept nogil

    cdef struct BackendContext:
        uint32_t struct_size
        uint32_t reserved
        BackendStatus (*before_load_network)(BackendContext *self, uint64_t network_id,
                                             char *message, size_t message_size) noexcept nogil
        BackendStatus (*after_load_network)(BackendContext *self, uint64_t network_id,
                                            char *message, size_t message_size) noexcept nogil
        BackendStatus (*before_unload_network)(BackendContext *self, uint64_t network_id,
                                               char *message, size_t message_size) noexcept nogil
        BackendStatus (*after_unload_network)(BackendContext *self, uint64_t network_id,
                                              char *message, size_t message_size) noexcept nogil
        void (*destroy)(BackendContext *self) noexcept nogil

    enum:
        BACKEND_SUBGRAPH_TENSOR_BOUNDARY_INPUT
        BACKEND_SUBGRAPH_TENSOR_CONSTANT
        BACKEND_SUBGRAPH_TENSOR_INTERNAL

    ctypedef struct BackendSubgraphTensor:
        uint32_t struct_size
        uint32_t kind
        BackendTensorInfo info
        const void *data
        uint64_t size_bytes

    ctypedef struct BackendSubgraphLayer:
        uint32_t struct_size
        uint32_t reserved
        uint64_t id
        const BackendLayerDescription *description
        const uint32_t *input_tensors
        const uint32_t *output_tensors

    ctypedef struct BackendSubgraph:
        uint32_t struct_size
        uint32_t num_tensors
        const BackendSubgraphTensor *const *tensors
        uint32_t num_layers
        uint32_t num_inputs
        const BackendSubgraphLayer *const *layers
        const uint32_t *inputs
        uint32_t num_outputs
        uint32_t reserved
        const uint32_t *outputs

    cdef struct BackendProfilingSink:
        uint32_t struct_size
        uint32_t reserved
        void (*event)(BackendProfilingSink *self, const char *name, const uint64_t *layer_ids,
                      uint32_t num_layer_ids, int64_t start_ns, int64_t end_ns) noexcept
        void (*counter)(BackendProfilingSink *self, const char *name, double value) noexcept

    cdef struct BackendProfilingContext:
        uint32_t struct_size
        uint32_t reserved
        void (*enable)(BackendProfilingContext *self, int enabled) noexcept nogil
        void (*collect)(BackendProfilingContext *self, BackendProfilingSink *sink) noexcept
        void (*destroy)(BackendProfilingContext *self) noexcept nogil

    cdef struct BackendCompiledSubgraph:
        uint32_t struct_size
        uint32_t reserved
        BackendStatus (*execute)(BackendCompiledSubgraph *self,
                                 const BackendBuffer *inputs, uint32_t num_inputs,
                                 const BackendBuffer *outputs, uint32_t num_outputs,
                                 char *message, size_t message_size) noexcept nogil
        void (*destroy)(BackendCompiledSubgraph *self) noexcept nogil
        void (*set_profiling_context)(BackendCompiledSubgraph *self,
                                      BackendProfilingContext *context) noexcept nogil
        BackendStatus (*serialize)(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                   uint64_t *size, char *message, size_t message_size) noexcept nogil

    cdef struct BackendOptimizationViews:
        uint32_t struct_size
        uint32_t reserved
        BackendStatus (*add_substitution)(BackendOptimizationViews *self,
                                          const uint64_t *layer_ids, uint32_t num_layer_ids,
                                          const uint32_t *inputs, uint32_t num_inputs,
                                          const uint32_t *outputs, uint32_t num_outputs,
                                          BackendCompiledSubgraph *compiled) noexcept nogil
        BackendStatus (*add_failed)(BackendOptimizationViews *self, uint64_t layer_id,
                                    const char *reason) noexcept nogil
        BackendStatus (*add_untouched)(BackendOptimizationViews *self, uint64_t layer_id) noexcept nogil

    cdef struct BackendInstance:
        uint32_t struct_size
        uint32_t api_major
        uint32_t api_minor
        const char *(*get_id)(const BackendInstance *self) noexcept nogil
        void (*destroy)(BackendInstance *self) noexcept nogil
        BackendStatus (*get_capabilities)(const BackendInstance *self,
                                          const BackendCapability **capabilities,
                                          uint32_t *count) noexcept nogil
        BackendStatus (*is_layer_supported)(const BackendInstance *self,
                                            const BackendLayerDescription *layer,
                                            char *message, size_t message_size) noexcept nogil
        BackendStatus (*create_memory_manager)(const BackendInstance *self,
                                               BackendMemoryManager **manager,
                                               char *message, size_t message_size) noexcept nogil
        BackendStatus (*create_workload_factory)(const BackendInstance *self,
                                                 BackendMemoryManager *memory_manager,
                                                 BackendWorkloadFactory **factory,
                                                 char *message, size_t message_size) noexcept nogil
        BackendStatus (*create_backend_context)(const BackendInstance *self,
                                                BackendContext **context,
                                                char *message, size_t message_size) noexcept nogil
        BackendStatus (*use_custom_allocator)(const BackendInstance *self,
                                              const BackendAllocator *allocator,
                                              char *message, size_t message_size) noexcept nogil
        BackendStatus (*optimize_subgraph)(const BackendInstance *self,
                                           const BackendSubgraph *subgraph,
                                           BackendOptimizationViews *views,
                                           char *message, size_t message_size) noexcept nogil
        BackendStatus (*is_available)(const BackendInstance *self,
                                      char *message, size_t message_size) noexcept nogil
        BackendStatus (*create_profiling_context)(const BackendInstance *self,
                                                  BackendProfilingContext **context,
                                                  char *message, size_t message_size) noexcept nogil
        BackendStatus (*load_compiled_subgraph)(const BackendInstance *self,
                                                const void *data, uint64_t size,
                                                BackendCompiledSubgraph **compiled,
                                                char *message, size_t message_size) noexcept nogil

    const size_t BACKEND_INSTANCE_SIZE_1_0
    const size_t BACKEND_INSTANCE_SIZE_1_1
    const size_t BACKEND_INSTANCE_SIZE_1_2
    const size_t BACKEND_INSTANCE_SIZE_1_3
    const size_t BACKEND_SUBGRAPH_TENSOR_SIZE_1_2
    const size_t BACKEND_SUBGRAPH_LAYER_SIZE_1_2
    const size_t BACKEND_SUBGRAPH_SIZE_1_2
    const size_t BACKEND_COMPILED_SUBGRAPH_SIZE_1_2
    const size_t BACKEND_OPTIMIZATION_VIEWS_SIZE_1_2
    const size_t BACKEND_PROFILING_SINK_SIZE_1_2
    const size_t BACKEND_PROFILING_CONTEXT_SIZE_1_2
    const size_t BACKEND_TENSOR_INFO_SIZE_1_1
    const size_t BACKEND_BUFFER_SIZE_1_1
    const size_t BACKEND_LAYER_DESCRIPTION_SIZE_1_1
    const size_t BACKEND_CAPABILITY_SIZE_1_1
    const size_t BACKEND_ALLOCATOR_SIZE_1_1
    const size_t BACKEND_MEMORY_MANAGER_SIZE_1_1
    const size_t BACKEND_WORKLOAD_SIZE_1_1
    const size_t BACKEND_WORKLOAD_FACTORY_SIZE_1_1
    const size_t BACKEND_CONTEXT_SIZE_1_1
    const size_t BACKEND_ACTIVATION_DESCRIPTOR_SIZE_1_1
    const size_t BACKEND_FULLY_CONNECTED_DESCRIPTOR_SIZE_1_1
    const size_t BACKEND_CONVOLUTION2D_DESCRIPTOR_SIZE_1_1
    const size_t BACKEND_POOLING2D_DESCRIPTOR_SIZE_1_1
    const size_t BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1

    ctypedef const char *(*GetBackendIdFunction)() noexcept nogil
    ctypedef void (*GetVersionFunction)(uint32_t *major, uint32_t *minor) noexcept nogil
    ctypedef void *(*BackendFactoryFunction)() noexcept nogil
