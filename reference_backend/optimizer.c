/*
 * The reference backend's sub-graph optimizer (Backend API 1.2).
 *
 * It fuses a Convolution2d, DepthwiseConvolution2d or FullyConnected layer with what alone
 * reads its output: an Activation, or an Addition of a residual of the output's shape
 * optionally followed by an Activation. The fused kernel adds the residual and applies the
 * activation in the epilogue of the convolution or GEMM, on each part of the output as soon as
 * it is final, so the intermediate tensors never exist. Every other layer is left untouched
 * (it runs as its own workload); a layer ref_check_layer() refuses is failed with its reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "layers.h"

#define MAX_LAYERS 4096

/* Where a fused kernel finds an operand: a constant (kept valid by the runtime while the
   compiled sub-graph lives) or one of its boundary input buffers. */
typedef struct Operand {
    const float *constant;
    int32_t input;                      /* index into the boundary inputs, or -1 */
    uint64_t bytes;                     /* what the operand must hold */
} Operand;

enum { OPERAND_X, OPERAND_W, OPERAND_BIAS, OPERAND_RESIDUAL, OPERAND_COUNT };

typedef struct FusedKernel {
    BackendCompiledSubgraph base;       /* first: the runtime sees a BackendCompiledSubgraph */
    BackendLayerType layer_type;
    Operand operands[OPERAND_COUNT];
    int has_bias, has_residual;
    uint32_t num_inputs;
    uint64_t output_bytes;
    int64_t n, k, m;                    /* FullyConnected */
    int transpose_weights;
    rk_conv_params window;              /* convolutions */
    int64_t channels_out;
    rk_epilogue epilogue;
} FusedKernel;

static int64_t elements(const BackendTensorInfo *info)
{
    int64_t count = 1;
    for (uint32_t d = 0; d < info->num_dimensions; d++)
        count *= info->dimensions[d];
    return count;
}

static int same_shape(const BackendTensorInfo *a, const BackendTensorInfo *b)
{
    if (a->num_dimensions != b->num_dimensions)
        return 0;
    for (uint32_t d = 0; d < a->num_dimensions; d++)
        if (a->dimensions[d] != b->dimensions[d])
            return 0;
    return 1;
}

static BackendStatus fused_execute(BackendCompiledSubgraph *self, const BackendBuffer *inputs,
                                   uint32_t num_inputs, const BackendBuffer *outputs,
                                   uint32_t num_outputs, char *message, size_t message_size)
{
    FusedKernel *k = (FusedKernel *)self;
    const float *operand[OPERAND_COUNT] = { NULL, NULL, NULL, NULL };
    rk_epilogue epilogue = k->epilogue;
    float *y;
    int failed = 0;
    if (num_inputs != k->num_inputs || num_outputs != 1 || (num_inputs && inputs == NULL) ||
        outputs == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "the fused kernel takes %u inputs and 1 output, got %u and %u",
                        k->num_inputs, num_inputs, num_outputs);
    for (int i = 0; i < OPERAND_COUNT; i++) {
        const Operand *o = &k->operands[i];
        if (o->input < 0) {
            operand[i] = o->constant;
            continue;
        }
        if (inputs[o->input].data == NULL || inputs[o->input].size_bytes < o->bytes)
            return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                            "input %d holds %llu bytes, %llu are needed", o->input,
                            (unsigned long long)inputs[o->input].size_bytes,
                            (unsigned long long)o->bytes);
        operand[i] = inputs[o->input].data;
    }
    if (outputs[0].data == NULL || outputs[0].size_bytes < k->output_bytes)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "the output holds %llu bytes, %llu are needed",
                        (unsigned long long)outputs[0].size_bytes,
                        (unsigned long long)k->output_bytes);
    y = outputs[0].data;
    epilogue.residual = k->has_residual ? operand[OPERAND_RESIDUAL] : NULL;
    switch (k->layer_type) {
    case BACKEND_LAYER_FULLY_CONNECTED:
        failed = rk_fully_connected_fused(operand[OPERAND_X], operand[OPERAND_W],
                                          k->has_bias ? operand[OPERAND_BIAS] : NULL, y, k->n,
                                          k->k, k->m, k->transpose_weights, &epilogue);
        break;
    case BACKEND_LAYER_CONVOLUTION2D:
        failed = rk_conv2d_fused(operand[OPERAND_X], operand[OPERAND_W],
                                 k->has_bias ? operand[OPERAND_BIAS] : NULL, y, &k->window,
                                 k->channels_out, &epilogue);
        break;
    default:
        failed = rk_depthwise_conv2d_fused(operand[OPERAND_X], operand[OPERAND_W],
                                           k->has_bias ? operand[OPERAND_BIAS] : NULL, y,
                                           &k->window, k->channels_out / k->window.c, &epilogue);
        break;
    }
    if (failed)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY,
                        "out of memory for the fused kernel's scratch space");
    return BACKEND_STATUS_OK;
}

static void fused_destroy(BackendCompiledSubgraph *self)
{
    free(self);
}

/* ---- reading the sub-graph ----------------------------------------------------------------- */

static int is_subgraph_output(const BackendSubgraph *g, uint32_t tensor)
{
    for (uint32_t o = 0; o < g->num_outputs; o++)
        if (g->outputs[o] == tensor)
            return 1;
    return 0;
}

/* The only layer reading `tensor` (an index into g->layers), or -1 when none does, several do
   or the tensor is also read outside the sub-graph. */
static int64_t only_reader(const BackendSubgraph *g, uint32_t tensor)
{
    int64_t reader = -1;
    if (is_subgraph_output(g, tensor))
        return -1;
    for (uint32_t i = 0; i < g->num_layers; i++)
        for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++)
            if (g->layers[i]->input_tensors[j] == tensor) {
                if (reader >= 0)
                    return -1;
                reader = i;
            }
    return reader;
}

/* Whether `tensor` is read by a layer not in `members` or is a sub-graph output. */
static int read_outside(const BackendSubgraph *g, uint32_t tensor, const int64_t *members, int count)
{
    if (is_subgraph_output(g, tensor))
        return 1;
    for (uint32_t i = 0; i < g->num_layers; i++) {
        int member = 0;
        for (int m = 0; m < count; m++)
            member |= members[m] == (int64_t)i;
        if (member)
            continue;
        for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++)
            if (g->layers[i]->input_tensors[j] == tensor)
                return 1;
    }
    return 0;
}

/* Makes `tensor` operand `which` of `k`: a constant, or a (deduplicated) boundary input. */
static void bind_operand(FusedKernel *k, int which, const BackendSubgraph *g, uint32_t tensor,
                         uint32_t *inputs)
{
    const BackendSubgraphTensor *t = g->tensors[tensor];
    Operand *o = &k->operands[which];
    o->bytes = (uint64_t)elements(&t->info) * sizeof(float);
    o->input = -1;
    if (t->kind == BACKEND_SUBGRAPH_TENSOR_CONSTANT) {
        o->constant = t->data;
        return;
    }
    for (uint32_t i = 0; i < k->num_inputs; i++)
        if (inputs[i] == tensor) {
            o->input = (int32_t)i;
            return;
        }
    inputs[k->num_inputs] = tensor;
    o->input = (int32_t)k->num_inputs++;
}

static void fill_geometry(FusedKernel *k, const BackendLayerDescription *d)
{
    const BackendTensorInfo *x = &d->inputs[0], *w = &d->inputs[1], *y = &d->outputs[0];
    k->layer_type = d->layer_type;
    k->output_bytes = (uint64_t)elements(y) * sizeof(float);
    if (d->layer_type == BACKEND_LAYER_FULLY_CONNECTED) {
        const BackendFullyConnectedDescriptor *fc = d->descriptor;
        k->has_bias = fc->bias_enabled != 0;
        k->transpose_weights = fc->transpose_weights != 0;
        k->n = x->dimensions[0];
        k->k = x->dimensions[1];
        k->m = y->dimensions[1];
        return;
    }
    const BackendConvolution2dDescriptor *c = d->descriptor;
    k->has_bias = c->bias_enabled != 0;
    k->channels_out = y->dimensions[3];
    k->window = (rk_conv_params){
        .n = x->dimensions[0], .h = x->dimensions[1], .w = x->dimensions[2], .c = x->dimensions[3],
        .kh = w->dimensions[1], .kw = w->dimensions[2], .stride_h = c->stride_y,
        .stride_w = c->stride_x, .dil_h = c->dilation_y, .dil_w = c->dilation_x,
        .pad_top = c->pad_top, .pad_bottom = c->pad_bottom, .pad_left = c->pad_left,
        .pad_right = c->pad_right, .oh = y->dimensions[1], .ow = y->dimensions[2],
    };
}

/* Tries to fuse layer `head` with what follows it; on success records the substitution, marks
   its layers in `taken` and returns 1. */
static int fuse(const BackendSubgraph *g, uint32_t head, char *taken, BackendOptimizationViews *views,
                BackendStatus *status)
{
    const BackendSubgraphLayer *layer = g->layers[head];
    const BackendLayerDescription *d = layer->description;
    int64_t members[3] = { head, -1, -1 };
    int count = 1, residual_tensor = -1;
    uint32_t produced = layer->output_tensors[0], inputs[4], output;
    uint64_t ids[3];
    int64_t next = only_reader(g, produced);
    const BackendActivationDescriptor *activation = NULL;
    FusedKernel *k;

    if (next >= 0 && !taken[next] &&
        g->layers[next]->description->layer_type == BACKEND_LAYER_ADDITION) {
        const BackendSubgraphLayer *add = g->layers[next];
        uint32_t a = add->input_tensors[0], b = add->input_tensors[1];
        uint32_t other = a == produced ? b : a;
        /* a residual of the full output shape, not the fused output itself */
        if (a != b && same_shape(&g->tensors[other]->info, &d->outputs[0]) &&
            same_shape(&add->description->outputs[0], &d->outputs[0])) {
            residual_tensor = (int)other;
            members[count++] = next;
            produced = add->output_tensors[0];
            next = only_reader(g, produced);
        }
    }
    if (next >= 0 && !taken[next] &&
        g->layers[next]->description->layer_type == BACKEND_LAYER_ACTIVATION) {
        activation = g->layers[next]->description->descriptor;
        members[count++] = next;
        produced = g->layers[next]->output_tensors[0];
    }
    if (count == 1 || !read_outside(g, produced, members, count))
        return 0;

    k = calloc(1, sizeof *k);
    if (k == NULL) {
        *status = BACKEND_STATUS_OUT_OF_MEMORY;
        return 0;
    }
    k->base.struct_size = (uint32_t)sizeof k->base;
    k->base.execute = fused_execute;
    k->base.destroy = fused_destroy;
    fill_geometry(k, d);
    k->epilogue.function = activation ? (int)activation->function : -1;
    k->epilogue.a = activation ? activation->a : 0.0f;
    k->epilogue.b = activation ? activation->b : 0.0f;
    k->epilogue.ldr = d->outputs[0].dimensions[d->outputs[0].num_dimensions - 1];
    for (int i = 0; i < OPERAND_COUNT; i++)
        k->operands[i].input = -1;
    bind_operand(k, OPERAND_X, g, layer->input_tensors[0], inputs);
    bind_operand(k, OPERAND_W, g, layer->input_tensors[1], inputs);
    if (k->has_bias)
        bind_operand(k, OPERAND_BIAS, g, layer->input_tensors[2], inputs);
    if (residual_tensor >= 0) {
        k->has_residual = 1;
        bind_operand(k, OPERAND_RESIDUAL, g, (uint32_t)residual_tensor, inputs);
    }
    for (int m = 0; m < count; m++) {
        ids[m] = g->layers[members[m]]->id;
        taken[members[m]] = 1;
    }
    output = produced;
    /* Ownership of k passes to the runtime with this call. */
    views->add_substitution(views, ids, (uint32_t)count, inputs, k->num_inputs, &output, 1, &k->base);
    return 1;
}

BackendStatus ref_optimize_subgraph(const BackendInstance *self, const BackendSubgraph *subgraph,
                                    BackendOptimizationViews *views, char *message, size_t message_size)
{
    char *taken;
    BackendStatus status = BACKEND_STATUS_OK;
    (void)self;
    if (subgraph == NULL || views == NULL || subgraph->struct_size < BACKEND_SUBGRAPH_SIZE_1_2 ||
        views->struct_size < BACKEND_OPTIMIZATION_VIEWS_SIZE_1_2)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "malformed sub-graph or views");
    if (subgraph->num_layers > MAX_LAYERS)
        return ref_fail(message, message_size, BACKEND_STATUS_UNSUPPORTED,
                        "sub-graphs of more than %d layers", MAX_LAYERS);
    taken = calloc(subgraph->num_layers ? subgraph->num_layers : 1, 1);
    if (taken == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < subgraph->num_layers && status == BACKEND_STATUS_OK; i++) {
        const BackendSubgraphLayer *layer = subgraph->layers[i];
        BackendLayerType type = layer->description->layer_type;
        char reason[256];
        if (taken[i])
            continue;
        if (ref_check_layer(layer->description, reason, sizeof reason) != BACKEND_STATUS_OK) {
            taken[i] = 1;
            views->add_failed(views, layer->id, reason);
            continue;
        }
        if (type == BACKEND_LAYER_CONVOLUTION2D || type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D ||
            type == BACKEND_LAYER_FULLY_CONNECTED)
            fuse(subgraph, i, taken, views, &status);
    }
    for (uint32_t i = 0; i < subgraph->num_layers && status == BACKEND_STATUS_OK; i++)
        if (!taken[i])
            views->add_untouched(views, subgraph->layers[i]->id);
    free(taken);
    if (status != BACKEND_STATUS_OK)
        return ref_fail(message, message_size, status, "out of memory");
    return BACKEND_STATUS_OK;
}
