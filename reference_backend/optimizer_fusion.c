/*
 * Fusion decisions: which layers of a sub-graph a fused kernel replaces. A Convolution2d,
 * DepthwiseConvolution2d or FullyConnected layer is fused with what alone reads its output: an
 * Activation, or an Addition of a residual of the output's shape optionally followed by an
 * Activation.
 */
#include <stdlib.h>

#include "optimizer_internal.h"

static int same_shape(const BackendTensorInfo *a, const BackendTensorInfo *b)
{
    if (a->num_dimensions != b->num_dimensions)
        return 0;
    for (uint32_t d = 0; d < a->num_dimensions; d++)
        if (a->dimensions[d] != b->dimensions[d])
            return 0;
    return 1;
}

int ref_is_subgraph_output(const BackendSubgraph *g, uint32_t tensor)
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
    if (ref_is_subgraph_output(g, tensor))
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

FusedKernel *ref_fuse(const BackendSubgraph *g, uint32_t head, const char *taken_in,
                      const int32_t *group, uint32_t *inputs, uint32_t *output, uint32_t *last,
                      BackendStatus *status)
{
    const BackendSubgraphLayer *layer = g->layers[head];
    const BackendLayerDescription *d = layer->description;
    int64_t members[3] = { head, -1, -1 };
    int count = 1, residual_tensor = -1;
    uint32_t produced = layer->output_tensors[0];
    int64_t next = only_reader(g, produced);
    const BackendActivationDescriptor *activation = NULL;
    FusedKernel *k;

    if (next >= 0 && !taken_in[next] && group[next] == group[head] &&
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
    if (next >= 0 && !taken_in[next] && group[next] == group[head] &&
        g->layers[next]->description->layer_type == BACKEND_LAYER_ACTIVATION) {
        activation = g->layers[next]->description->descriptor;
        members[count++] = next;
        produced = g->layers[next]->output_tensors[0];
    }
    if (count == 1)
        return NULL;

    k = calloc(1, sizeof *k);
    if (k == NULL) {
        *status = BACKEND_STATUS_OUT_OF_MEMORY;
        return NULL;
    }
    ref_fused_init(k);
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
    for (int m = 0; m < count; m++)
        k->layer_ids[m] = g->layers[members[m]]->id;
    k->num_layer_ids = (uint32_t)count;
    *output = produced;
    *last = (uint32_t)members[count - 1];
    return k;
}
