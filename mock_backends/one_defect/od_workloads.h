/*
 * od_workloads.h - workloads, the workload factory, the memory manager and the backend context.
 * Part of base.h: a one-defect backend includes base.h, which sets the knobs' defaults before it
 * includes this.
 */
#ifndef ONE_DEFECT_WORKLOADS_H
#define ONE_DEFECT_WORKLOADS_H

/* ---- workloads ---------------------------------------------------------------------------- */

static BackendStatus od_check_buffers(OdWorkload *w, const BackendBuffer *inputs, uint32_t num_inputs,
                                      const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                      size_t message_size);
#ifndef OD_OWN_CHECK_BUFFERS
static BackendStatus od_check_buffers(OdWorkload *w, const BackendBuffer *inputs, uint32_t num_inputs,
                                      const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                      size_t message_size)
{
    if (num_inputs != w->num_inputs || num_outputs != 1 || inputs == NULL || outputs == NULL)
        return OD_INVALID("expected %u inputs and 1 output", w->num_inputs);
    for (uint32_t i = 0; i <= num_inputs; i++) {
        const BackendBuffer *b = i < num_inputs ? &inputs[i] : &outputs[0];
        const BackendTensorInfo *t = i < num_inputs ? &w->in[i] : &w->out;
        if (b->struct_size < BACKEND_BUFFER_SIZE_1_1 || b->data == NULL)
            return OD_INVALID("buffer %u is malformed", i);
        if (b->size_bytes < (uint64_t)od_count(t) * sizeof(float))
            return OD_INVALID("buffer %u holds %llu bytes, too few", i, (unsigned long long)b->size_bytes);
    }
    return BACKEND_STATUS_OK;
}
#endif

static BackendStatus od_execute(BackendWorkload *self, const BackendBuffer *inputs, uint32_t num_inputs,
                                const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                size_t message_size)
{
    OdWorkload *w = (OdWorkload *)self;
    const float *in[OD_MAX_INPUTS] = {NULL};
    OD_TRY(od_check_buffers(w, inputs, num_inputs, outputs, num_outputs, message, message_size));
    for (uint32_t i = 0; i < num_inputs && i < OD_MAX_INPUTS; i++)
        in[i] = inputs[i].data;
    w->kernel(w, in, outputs[0].data);
    OD_AFTER_EXECUTE(w);
    return BACKEND_STATUS_OK;
}

static void od_workload_destroy(BackendWorkload *self)
{
    OdWorkload *w = (OdWorkload *)self;
    OD_FREE_STATE(w);
    od_free(w->allocator, w);
}

/* The descriptor of the layer, read as far as its struct_size reaches (od_read_descriptor), and
   the kernel that runs it: what 1.3 added runs in kernels of its own (od_kernels13.h,
   od_spatial13.h), so that a backend replacing a kernel of 1.1 replaces nothing of 1.3. */
static void od_read_layer(OdWorkload *w, const BackendLayerDescription *layer)
{
    static OdKernel *const KERNELS[BACKEND_LAYER_TYPE_COUNT_1_3] = {
        od_activation, od_binary, od_binary, od_fully_connected, od_convolution, od_depthwise, od_pooling,
        od_softmax, od_reshape, od_binary13, od_binary13, od_binary13, od_binary13, od_binary13, od_unary,
        od_prelu, od_concatenation, od_slice, od_transpose, od_pad, od_resize, od_reduce,
        od_batch_normalization, od_layer_normalization, od_mat_mul, od_transpose_convolution,
    };
    const void *d = layer->descriptor;
    uint32_t rank = layer->inputs[0].num_dimensions;
    /* od_check_layer checked a type past the table as a Reshape */
    w->kernel = layer->layer_type < BACKEND_LAYER_TYPE_COUNT_1_3 ? KERNELS[layer->layer_type] : od_reshape;
    switch (layer->layer_type) {
    case BACKEND_LAYER_ACTIVATION:
        od_read_descriptor(&w->activation, sizeof w->activation, d);
        if (w->activation.function > BACKEND_ACTIVATION_LEAKY_RELU)
            w->kernel = od_activation13;
        break;
    case BACKEND_LAYER_FULLY_CONNECTED: od_read_descriptor(&w->fc, sizeof w->fc, d); break;
    case BACKEND_LAYER_CONVOLUTION2D:
    case BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D:
        w->conv = od_conv_descriptor(d);
        if (w->conv.groups != 1)
            w->kernel = od_grouped_convolution;
        break;
    case BACKEND_LAYER_POOLING2D:
        w->pool = od_pool_descriptor(d);
        if (w->pool.pool_type == BACKEND_POOLING_L2 || w->pool.ceil_mode || w->pool.count_include_pad ||
            w->pool.dilation_y != 1 || w->pool.dilation_x != 1)
            w->kernel = od_pooling13;
        break;
    case BACKEND_LAYER_SOFTMAX:
        w->softmax = od_softmax_descriptor(d, rank);
        if (w->softmax.axis != rank - 1 || w->softmax.log)
            w->kernel = od_softmax13;
        break;
    case BACKEND_LAYER_ELEMENTWISE_UNARY: od_read_descriptor(&w->unary, sizeof w->unary, d); break;
    case BACKEND_LAYER_CONCATENATION: od_read_descriptor(&w->concat, sizeof w->concat, d); break;
    case BACKEND_LAYER_SLICE: od_read_descriptor(&w->slice, sizeof w->slice, d); break;
    case BACKEND_LAYER_TRANSPOSE: od_read_descriptor(&w->transpose, sizeof w->transpose, d); break;
    case BACKEND_LAYER_PAD: od_read_descriptor(&w->pad, sizeof w->pad, d); break;
    case BACKEND_LAYER_RESIZE: od_read_descriptor(&w->resize, sizeof w->resize, d); break;
    case BACKEND_LAYER_REDUCE: od_read_descriptor(&w->reduce, sizeof w->reduce, d); break;
    case BACKEND_LAYER_BATCH_NORMALIZATION: od_read_descriptor(&w->batch_norm, sizeof w->batch_norm, d); break;
    case BACKEND_LAYER_LAYER_NORMALIZATION: od_read_descriptor(&w->layer_norm, sizeof w->layer_norm, d); break;
    case BACKEND_LAYER_TRANSPOSE_CONVOLUTION2D: od_read_descriptor(&w->tconv, sizeof w->tconv, d); break;
    default: break;
    }
}

static BackendStatus od_create_workload(BackendWorkloadFactory *self, const BackendLayerDescription *layer,
                                        BackendWorkload **workload, char *message, size_t message_size)
{
    OdFactory *factory = (OdFactory *)self;
    OdWorkload *w;
    *workload = NULL;
    OD_TRY(od_check_layer(layer, message, message_size));
    w = od_alloc(factory->allocator, sizeof *w);
    if (w == NULL)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    w->base.struct_size = OD_WORKLOAD_STRUCT_SIZE;
    w->base.execute = od_execute;
    w->base.destroy = od_workload_destroy;
    w->allocator = factory->allocator;
    w->type = layer->layer_type;
    w->num_inputs = layer->num_inputs;
    memcpy(w->in, layer->inputs, layer->num_inputs * sizeof w->in[0]);
    w->out = layer->outputs[0];
    od_read_layer(w, layer);
    *workload = &w->base;
    return BACKEND_STATUS_OK;
}

static void od_factory_destroy(BackendWorkloadFactory *self)
{
    od_free(((OdFactory *)self)->allocator, self);
}

/* ---- memory manager ----------------------------------------------------------------------- */

static BackendStatus od_acquire(BackendMemoryManager *self, char *message, size_t message_size);
static BackendStatus od_release(BackendMemoryManager *self, char *message, size_t message_size);
#ifndef OD_OWN_ACQUIRE
static BackendStatus od_acquire(BackendMemoryManager *self, char *message, size_t message_size)
{
    OdManager *m = (OdManager *)self;
    if (m->acquired)
        return od_fail(message, message_size, BACKEND_STATUS_INVALID_STATE, "already acquired");
    m->acquired = 1;
    return BACKEND_STATUS_OK;
}
#endif
#ifndef OD_OWN_RELEASE
static BackendStatus od_release(BackendMemoryManager *self, char *message, size_t message_size)
{
    OdManager *m = (OdManager *)self;
    if (!m->acquired)
        return od_fail(message, message_size, BACKEND_STATUS_INVALID_STATE, "release without acquire");
    m->acquired = 0;
    return BACKEND_STATUS_OK;
}
#endif

static void od_manager_destroy(BackendMemoryManager *self)
{
    od_free(((OdManager *)self)->allocator, self);
}

/* ---- backend context: every notification in order is accepted ----------------------------- */

static BackendStatus od_context_notified(BackendContext *self, uint64_t network_id, char *message,
                                         size_t message_size)
{
    (void)self, (void)network_id, (void)message, (void)message_size;
    return BACKEND_STATUS_OK;
}

static void od_context_destroy(BackendContext *self)
{
    od_free(((OdContext *)self)->allocator, self);
}

#endif /* ONE_DEFECT_WORKLOADS_H */
