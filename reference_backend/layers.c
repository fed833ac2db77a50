/*
 * The layer registry and its dispatch: which entry runs each layer type, the checks every layer
 * type shares (see layers_internal.h), and the workload that runs an entry. The entries
 * themselves live in one file per family (layers_elementwise.c, layers_linear.c,
 * layers_spatial.c, layers_tensor.c, layers_normalization.c).
 */
#include "layers_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

BackendStatus ref_fail(char *message, size_t message_size, BackendStatus status, const char *format, ...)
{
    if (message != NULL && message_size > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(message, message_size, format, args);
        va_end(args);
    }
    return status;
}

static const RefLayerEntry *const REGISTRY[BACKEND_LAYER_TYPE_COUNT_1_3] = {
    [BACKEND_LAYER_ACTIVATION] = &ref_layer_activation,
    [BACKEND_LAYER_ADDITION] = &ref_layer_addition,
    [BACKEND_LAYER_MULTIPLICATION] = &ref_layer_multiplication,
    [BACKEND_LAYER_FULLY_CONNECTED] = &ref_layer_fully_connected,
    [BACKEND_LAYER_CONVOLUTION2D] = &ref_layer_convolution2d,
    [BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D] = &ref_layer_depthwise_convolution2d,
    [BACKEND_LAYER_POOLING2D] = &ref_layer_pooling2d,
    [BACKEND_LAYER_SOFTMAX] = &ref_layer_softmax,
    [BACKEND_LAYER_RESHAPE] = &ref_layer_reshape,
    [BACKEND_LAYER_SUBTRACTION] = &ref_layer_subtraction,
    [BACKEND_LAYER_DIVISION] = &ref_layer_division,
    [BACKEND_LAYER_MAXIMUM] = &ref_layer_maximum,
    [BACKEND_LAYER_MINIMUM] = &ref_layer_minimum,
    [BACKEND_LAYER_POWER] = &ref_layer_power,
    [BACKEND_LAYER_ELEMENTWISE_UNARY] = &ref_layer_elementwise_unary,
    [BACKEND_LAYER_PRELU] = &ref_layer_prelu,
    [BACKEND_LAYER_CONCATENATION] = &ref_layer_concatenation,
    [BACKEND_LAYER_SLICE] = &ref_layer_slice,
    [BACKEND_LAYER_TRANSPOSE] = &ref_layer_transpose,
    [BACKEND_LAYER_PAD] = &ref_layer_pad,
    [BACKEND_LAYER_RESIZE] = &ref_layer_resize,
    [BACKEND_LAYER_REDUCE] = &ref_layer_reduce,
    [BACKEND_LAYER_BATCH_NORMALIZATION] = &ref_layer_batch_normalization,
    [BACKEND_LAYER_LAYER_NORMALIZATION] = &ref_layer_layer_normalization,
    [BACKEND_LAYER_MAT_MUL] = &ref_layer_mat_mul,
    [BACKEND_LAYER_TRANSPOSE_CONVOLUTION2D] = &ref_layer_transpose_convolution2d,
};

const char *ref_layer_name(BackendLayerType type)
{
    return type < BACKEND_LAYER_TYPE_COUNT_1_3 ? REGISTRY[type]->name : "unknown layer type";
}

/* ---- shapes ------------------------------------------------------------------------------- */

int64_t ref_elements(const BackendTensorInfo *info)
{
    int64_t count = 1;
    for (uint32_t d = 0; d < info->num_dimensions; d++)
        count *= info->dimensions[d];
    return count;
}

int ref_same_shape(const BackendTensorInfo *a, const BackendTensorInfo *b)
{
    if (a->num_dimensions != b->num_dimensions)
        return 0;
    for (uint32_t d = 0; d < a->num_dimensions; d++)
        if (a->dimensions[d] != b->dimensions[d])
            return 0;
    return 1;
}

void ref_format_shape(const BackendTensorInfo *info, char *out, size_t size)
{
    size_t used = 0;
    used += (size_t)snprintf(out, size, "[");
    for (uint32_t d = 0; d < info->num_dimensions && used < size; d++)
        used += (size_t)snprintf(out + used, size - used, d ? ", %lld" : "%lld",
                                 (long long)info->dimensions[d]);
    if (used < size)
        snprintf(out + used, size - used, "]");
}

static BackendStatus check_tensor(const BackendTensorInfo *info, const char *role, uint32_t index,
                                  uint32_t max_rank, char *message, size_t message_size)
{
    int64_t count = 1;
    if (info->struct_size < BACKEND_TENSOR_INFO_SIZE_1_1)
        return INVALID("%s %u: struct_size %u is too small", role, index, info->struct_size);
    if (info->data_type != BACKEND_DATA_TYPE_FLOAT32)
        return UNSUPPORTED("%s %u: data type %u is not supported, only float32", role, index,
                           info->data_type);
    if (info->num_dimensions > max_rank)
        return INVALID("%s %u: %u dimensions, at most %u", role, index, info->num_dimensions,
                       max_rank);
    for (uint32_t d = 0; d < info->num_dimensions; d++) {
        if (info->dimensions[d] < 1)
            return INVALID("%s %u: dimension %u is %lld, must be at least 1", role, index, d,
                           (long long)info->dimensions[d]);
        if (info->dimensions[d] > REF_MAX_ELEMENTS / count)
            return UNSUPPORTED("%s %u: more than 2^40 elements", role, index);
        count *= info->dimensions[d];
    }
    return BACKEND_STATUS_OK;
}

BackendStatus ref_expect_rank(const BackendTensorInfo *info, uint32_t rank, const char *what,
                              char *message, size_t message_size)
{
    if (info->num_dimensions != rank)
        return INVALID("%s must have %u dimensions, it has %u", what, rank, info->num_dimensions);
    return BACKEND_STATUS_OK;
}

BackendStatus ref_expect_output(const BackendLayerDescription *layer, const int64_t *dims,
                                uint32_t rank, char *message, size_t message_size)
{
    BackendTensorInfo expected = layer->outputs[0];
    char want[160], got[160];
    expected.num_dimensions = rank;
    memcpy(expected.dimensions, dims, rank * sizeof *dims);
    if (ref_same_shape(&expected, &layer->outputs[0]))
        return BACKEND_STATUS_OK;
    ref_format_shape(&expected, want, sizeof want);
    ref_format_shape(&layer->outputs[0], got, sizeof got);
    return INVALID("output shape is %s, the layer produces %s", got, want);
}

BackendStatus ref_expect_output_like(const BackendLayerDescription *layer, uint32_t index,
                                     char *message, size_t message_size)
{
    return ref_expect_output(layer, layer->inputs[index].dimensions,
                             layer->inputs[index].num_dimensions, message, message_size);
}

BackendStatus ref_expect_inputs(const BackendLayerDescription *layer, uint32_t count,
                                char *message, size_t message_size)
{
    if (layer->num_inputs != count)
        return INVALID("%s takes %u inputs here, got %u", ref_layer_name(layer->layer_type), count,
                       layer->num_inputs);
    return BACKEND_STATUS_OK;
}

BackendStatus ref_broadcast(const BackendTensorInfo *a, const BackendTensorInfo *b, int64_t *out,
                            uint32_t *rank, char *message, size_t message_size)
{
    uint32_t r = a->num_dimensions > b->num_dimensions ? a->num_dimensions : b->num_dimensions;
    for (uint32_t i = 0; i < r; i++) {
        /* right-aligned, as NumPy broadcasts */
        int64_t da = i < r - a->num_dimensions ? 1 : a->dimensions[i - (r - a->num_dimensions)];
        int64_t db = i < r - b->num_dimensions ? 1 : b->dimensions[i - (r - b->num_dimensions)];
        if (da != db && da != 1 && db != 1) {
            char sa[160], sb[160];
            ref_format_shape(a, sa, sizeof sa);
            ref_format_shape(b, sb, sizeof sb);
            return INVALID("shapes %s and %s do not broadcast", sa, sb);
        }
        out[i] = da > db ? da : db;
    }
    *rank = r;
    return BACKEND_STATUS_OK;
}

void ref_fill_broadcast(rk_broadcast *g, const BackendTensorInfo *a, const BackendTensorInfo *b,
                        const BackendTensorInfo *out)
{
    int rank = (int)out->num_dimensions;
    g->rank = rank;
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - (int)a->num_dimensions);
        int ib = i - (rank - (int)b->num_dimensions);
        g->a[i] = ia < 0 ? 1 : a->dimensions[ia];
        g->b[i] = ib < 0 ? 1 : b->dimensions[ib];
        g->out[i] = out->dimensions[i];
    }
}

BackendStatus ref_check_unsupported(const BackendLayerDescription *layer, const RefDescriptor *d,
                                    char *message, size_t message_size)
{
    (void)d;
    return UNSUPPORTED("%s is not supported by this build of the reference backend",
                       ref_layer_name(layer->layer_type));
}

/* ---- the dispatch ------------------------------------------------------------------------- */

/* Everything every layer type is checked for, then the copy of its descriptor in *d. */
static BackendStatus check_common(const BackendLayerDescription *layer, const RefLayerEntry **entry_out,
                                  RefDescriptor *d, char *message, size_t message_size)
{
    const RefLayerEntry *entry;
    uint32_t max_rank;
    if (layer == NULL)
        return INVALID("no layer description");
    if (layer->struct_size < BACKEND_LAYER_DESCRIPTION_SIZE_1_1)
        return INVALID("layer description struct_size %u is too small", layer->struct_size);
    if (layer->layer_type >= BACKEND_LAYER_TYPE_COUNT_1_3)
        return UNSUPPORTED("layer type %u is not supported", layer->layer_type);
    entry = REGISTRY[layer->layer_type];
    if ((layer->num_inputs > 0 && layer->inputs == NULL) || (layer->num_outputs > 0 && layer->outputs == NULL))
        return INVALID("tensor list is NULL");
    if (layer->num_outputs != 1)
        return INVALID("%s has 1 output, got %u", entry->name, layer->num_outputs);
    if (layer->num_inputs < entry->min_inputs || layer->num_inputs > entry->max_inputs) {
        if (entry->min_inputs == entry->max_inputs)
            return INVALID("%s takes %u inputs, got %u", entry->name, entry->min_inputs,
                           layer->num_inputs);
        return INVALID("%s takes %u to %u inputs, got %u", entry->name, entry->min_inputs,
                       entry->max_inputs, layer->num_inputs);
    }
    max_rank = entry->since_1_3 ? BACKEND_MAX_LAYER_RANK : BACKEND_MAX_DIMENSIONS;
    for (uint32_t i = 0; i <= layer->num_inputs; i++) {
        const BackendTensorInfo *info = i < layer->num_inputs ? &layer->inputs[i] : &layer->outputs[0];
        const char *role = i < layer->num_inputs ? "input" : "output";
        uint32_t index = i < layer->num_inputs ? i : 0;
        TRY(check_tensor(info, role, index, max_rank, message, message_size));
        if (entry->since_1_3 && info->num_dimensions < 1)
            return INVALID("%s %u: %s takes tensors of rank 1 to %d, not 0", role, index,
                           entry->name, BACKEND_MAX_LAYER_RANK);
    }
    memset(d, 0, sizeof *d);
    if (entry->descriptor_min_size > 0) {
        const uint32_t *given = layer->descriptor;
        uint32_t size;
        if (given == NULL)
            return INVALID("%s needs a descriptor", entry->name);
        size = *given;
        if (size < entry->descriptor_min_size)
            return INVALID("%s descriptor struct_size %u is too small (at least %u)", entry->name,
                           size, entry->descriptor_min_size);
        /* never more than the caller's struct says it holds, never more than ours */
        memcpy(d, given, size < entry->descriptor_size ? size : entry->descriptor_size);
        if (entry->defaults != NULL)
            entry->defaults(d, layer);
        d->struct_size = entry->descriptor_size;
    }
    *entry_out = entry;
    return BACKEND_STATUS_OK;
}

BackendStatus ref_check_layer(const BackendLayerDescription *layer, char *message, size_t message_size)
{
    const RefLayerEntry *entry = NULL;
    RefDescriptor d;
    TRY(check_common(layer, &entry, &d, message, message_size));
    return entry->check(layer, &d, message, message_size);
}

/* ---- workloads ---------------------------------------------------------------------------- */

static BackendStatus workload_execute(BackendWorkload *self, const BackendBuffer *inputs, uint32_t num_inputs,
                                      const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                      size_t message_size)
{
    RefWorkload *w = (RefWorkload *)self;
    if (num_inputs != w->num_inputs || num_outputs != 1)
        return INVALID("%s workload takes %u inputs and 1 output, got %u and %u", w->entry->name,
                       w->num_inputs, num_inputs, num_outputs);
    if (inputs == NULL || outputs == NULL)
        return INVALID("buffer list is NULL");
    for (uint32_t i = 0; i <= num_inputs; i++) {
        const BackendBuffer *buffer = i < num_inputs ? &inputs[i] : &outputs[0];
        const BackendTensorInfo *info = i < num_inputs ? &w->inputs[i] : &w->output;
        uint64_t need = (uint64_t)ref_elements(info) * sizeof(float);
        const char *role = i < num_inputs ? "input" : "output";
        uint32_t index = i < num_inputs ? i : 0;
        if (buffer->struct_size < BACKEND_BUFFER_SIZE_1_1)
            return INVALID("%s %u: buffer struct_size %u is too small", role, index, buffer->struct_size);
        if (buffer->data == NULL)
            return INVALID("%s %u: buffer is NULL", role, index);
        if (buffer->size_bytes < need)
            return INVALID("%s %u: buffer holds %llu bytes, the tensor needs %llu", role, index,
                           (unsigned long long)buffer->size_bytes, (unsigned long long)need);
        if (i < num_inputs)
            w->in[i] = (const float *)buffer->data;
    }
    if (w->entry->run(w, w->in, (float *)outputs[0].data) != 0)
        return FAIL(BACKEND_STATUS_OUT_OF_MEMORY, "out of memory for %s scratch space", w->entry->name);
    return BACKEND_STATUS_OK;
}

static void workload_destroy(BackendWorkload *self)
{
    free(self);
}

BackendStatus ref_create_workload(const BackendLayerDescription *layer, BackendWorkload **workload,
                                  char *message, size_t message_size)
{
    const RefLayerEntry *entry = NULL;
    RefWorkload *w;
    RefDescriptor d;
    size_t inputs_at, pointers_at, extra_at, extra, size;
    if (workload == NULL)
        return INVALID("no place to return the workload");
    *workload = NULL;
    TRY(check_common(layer, &entry, &d, message, message_size));
    TRY(entry->check(layer, &d, message, message_size));
    /* one allocation: the workload, its tensor infos, its per-call input pointers, the
       entry's tables */
    inputs_at = (sizeof *w + _Alignof(BackendTensorInfo) - 1) / _Alignof(BackendTensorInfo) *
                _Alignof(BackendTensorInfo);
    pointers_at = inputs_at + (size_t)layer->num_inputs * sizeof(BackendTensorInfo);
    extra_at = (pointers_at + (size_t)layer->num_inputs * sizeof(const float *) + 15) / 16 * 16;
    extra = entry->extra_bytes != NULL ? entry->extra_bytes(layer, &d) : 0;
    size = extra_at + extra;
    w = calloc(1, size);                /* aligned for any type, the tables' included */
    if (w == NULL)
        return FAIL(BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    w->base.struct_size = sizeof w->base;
    w->base.execute = workload_execute;
    w->base.destroy = workload_destroy;
    w->entry = entry;
    w->layer_type = layer->layer_type;
    w->num_inputs = layer->num_inputs;
    w->inputs = (BackendTensorInfo *)((char *)w + inputs_at);
    w->in = (const float **)((char *)w + pointers_at);
    w->extra = extra > 0 ? (char *)w + extra_at : NULL;
    memcpy(w->inputs, layer->inputs, layer->num_inputs * sizeof *layer->inputs);
    w->output = layer->outputs[0];
    w->d = d;
    if (entry->prepare != NULL)
        entry->prepare(w);
    *workload = &w->base;
    return BACKEND_STATUS_OK;
}

void ref_workload_description(const BackendWorkload *workload, BackendLayerDescription *out)
{
    const RefWorkload *w = (const RefWorkload *)workload;
    memset(out, 0, sizeof *out);
    out->struct_size = (uint32_t)sizeof *out;
    out->layer_type = w->layer_type;
    out->num_inputs = w->num_inputs;
    out->num_outputs = 1;
    out->inputs = w->inputs;
    out->outputs = &w->output;
    out->descriptor = w->entry->descriptor_min_size > 0 ? &w->d : NULL;
}
