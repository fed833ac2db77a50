/*
 * Fusion decisions: which layers of a sub-graph a fused kernel replaces. A Convolution2d (any
 * groups), DepthwiseConvolution2d or FullyConnected layer is fused with what alone reads its
 * output, in this order:
 *   - a BatchNormalization with constant statistics, folded into the layer's constant weights
 *     and bias here, once (the fused kernel owns the folded copies);
 *   - an Addition of a residual of the output's shape;
 *   - an Activation, or the swish pattern that EfficientNet and RegNet export: Activation
 *     sigmoid of t and Multiplication of t by it, the two alone reading t (one swish epilogue).
 * A pointwise Convolution2d also takes in the Multiplication before it that alone makes its
 * input, when that multiplies each channel by a scale (a squeeze-and-excitation block's; the
 * fused kernel scales the input as its GEMM packs it: rk_conv2d_scaled).
 * A swish pattern on a tensor no such layer produces becomes one step of its own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

BackendStatus ref_readers_init(ReaderTable *r, const BackendSubgraph *g)
{
    const uint32_t nt = g->num_tensors ? g->num_tensors : 1;
    r->count = calloc(nt, sizeof *r->count);
    r->first = calloc(nt, sizeof *r->first);
    r->is_output = calloc(nt, sizeof *r->is_output);
    if (r->count == NULL || r->first == NULL || r->is_output == NULL)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    for (uint32_t o = 0; o < g->num_outputs; o++)
        r->is_output[g->outputs[o]] = 1;
    for (uint32_t i = 0; i < g->num_layers; i++)
        for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++) {
            const uint32_t t = g->layers[i]->input_tensors[j];
            if (r->count[t] < 2)
                r->first[t][r->count[t]] = i;
            if (r->count[t] < 3)
                r->count[t]++;
        }
    return BACKEND_STATUS_OK;
}

void ref_readers_free(ReaderTable *r)
{
    free(r->count);
    free(r->first);
    free(r->is_output);
    r->count = NULL;
    r->first = NULL;
    r->is_output = NULL;
}

/* The only layer reading `tensor` (an index into g->layers), or -1 when none does, several do
   or the tensor is also read outside the sub-graph. */
static int64_t only_reader(const ReaderTable *r, uint32_t tensor)
{
    return !r->is_output[tensor] && r->count[tensor] == 1 ? r->first[tensor][0] : -1;
}

/* Layer `i` may join the fused kernel of `head`: same program, not taken yet, of that type. */
static int joins(const BackendSubgraph *g, int64_t i, uint32_t head, const char *taken,
                 const int32_t *group, BackendLayerType type)
{
    return i >= 0 && !taken[i] && group[i] == group[head] &&
           g->layers[i]->description->layer_type == type;
}

static int is_constant(const BackendSubgraph *g, uint32_t tensor)
{
    return g->tensors[tensor]->kind == BACKEND_SUBGRAPH_TENSOR_CONSTANT && g->tensors[tensor]->data != NULL;
}

/* The swish pattern on tensor t, in the program of layer `head`: exactly two layers read t,
   an Activation sigmoid (*sigmoid) and a Multiplication of t by that sigmoid (*product, of t's
   shape), and nothing else reads the sigmoid. */
static int swish_pattern(const BackendSubgraph *g, const ReaderTable *r, uint32_t t, uint32_t head,
                         const char *taken, const int32_t *group, int64_t *sigmoid,
                         int64_t *product)
{
    if (r->is_output[t] || r->count[t] != 2)
        return 0;
    const int64_t *readers = r->first[t];
    for (int s = 0; s < 2; s++) {
        const int64_t a = readers[s], m = readers[1 - s];
        if (!joins(g, a, head, taken, group, BACKEND_LAYER_ACTIVATION) ||
            !joins(g, m, head, taken, group, BACKEND_LAYER_MULTIPLICATION))
            continue;
        const BackendActivationDescriptor *act = g->layers[a]->description->descriptor;
        const BackendSubgraphLayer *mul = g->layers[m];
        const uint32_t sig = g->layers[a]->output_tensors[0];
        if (act->function != BACKEND_ACTIVATION_SIGMOID || only_reader(r, sig) != m)
            continue;
        if (!((mul->input_tensors[0] == t && mul->input_tensors[1] == sig) ||
              (mul->input_tensors[0] == sig && mul->input_tensors[1] == t)))
            continue;
        if (!same_shape(&mul->description->outputs[0], &g->tensors[t]->info))
            continue;
        *sigmoid = a;
        *product = m;
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
    k->groups = 1;
    if (d->layer_type == BACKEND_LAYER_ACTIVATION) {
        k->n = elements(y);
        return;
    }
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
    if (d->layer_type == BACKEND_LAYER_CONVOLUTION2D &&
        BACKEND_STRUCT_HAS(BackendConvolution2dDescriptor, c, groups))
        k->groups = c->groups;
    k->channels_out = y->dimensions[3];
    k->window = (rk_conv_params){
        .n = x->dimensions[0], .h = x->dimensions[1], .w = x->dimensions[2], .c = x->dimensions[3],
        .kh = w->dimensions[1], .kw = w->dimensions[2], .stride_h = c->stride_y,
        .stride_w = c->stride_x, .dil_h = c->dilation_y, .dil_w = c->dilation_x,
        .pad_top = c->pad_top, .pad_bottom = c->pad_bottom, .pad_left = c->pad_left,
        .pad_right = c->pad_right, .oh = y->dimensions[1], .ow = y->dimensions[2],
    };
}

/* Whether BatchNormalization `bn` can be folded into layer `head`: constant weights (and
   bias), constant statistics of one value per output channel. */
static int foldable(const BackendSubgraph *g, uint32_t head, int64_t bn)
{
    const BackendSubgraphLayer *h = g->layers[head], *b = g->layers[bn];
    const BackendLayerDescription *d = h->description;
    const int64_t channels = d->outputs[0].dimensions[d->outputs[0].num_dimensions - 1];
    int has_bias = d->layer_type == BACKEND_LAYER_FULLY_CONNECTED
                       ? ((const BackendFullyConnectedDescriptor *)d->descriptor)->bias_enabled != 0
                       : ((const BackendConvolution2dDescriptor *)d->descriptor)->bias_enabled != 0;
    if (!is_constant(g, h->input_tensors[1]) || (has_bias && !is_constant(g, h->input_tensors[2])))
        return 0;
    if (b->description->num_inputs != 5 || b->input_tensors[0] != h->output_tensors[0])
        return 0;
    for (uint32_t j = 1; j < 5; j++) {
        const BackendTensorInfo *info = &g->tensors[b->input_tensors[j]]->info;
        if (!is_constant(g, b->input_tensors[j]) || info->num_dimensions != 1 ||
            info->dimensions[0] != channels)
            return 0;
    }
    return 1;
}

/* The weights and bias of k's layer with BatchNormalization `bn` folded in, in memory k owns:
   per output channel o, s = scale / sqrt(variance + epsilon), w' = w * s and
   b' = (b - mean) * s + beta (computed in double). */
static BackendStatus fold(FusedKernel *k, const BackendSubgraph *g, uint32_t head, int64_t bn)
{
    const BackendSubgraphLayer *h = g->layers[head], *b = g->layers[bn];
    const BackendBatchNormalizationDescriptor *bd = b->description->descriptor;
    const float *mean = g->tensors[b->input_tensors[1]]->data;
    const float *variance = g->tensors[b->input_tensors[2]]->data;
    const float *scale = g->tensors[b->input_tensors[3]]->data;
    const float *beta = g->tensors[b->input_tensors[4]]->data;
    const float *w = g->tensors[h->input_tensors[1]]->data;
    const float *bias = k->has_bias ? g->tensors[h->input_tensors[2]]->data : NULL;
    const BackendTensorInfo *out = &h->description->outputs[0];
    const int64_t channels = out->dimensions[out->num_dimensions - 1];
    const int64_t count = (int64_t)(k->operands[OPERAND_W].bytes / sizeof(float));
    float *folded = malloc((size_t)(count + channels) * sizeof(float));
    if (folded == NULL)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    float *new_bias = folded + count;
    double *s = malloc((size_t)channels * sizeof *s);
    if (s == NULL) {
        free(folded);
        return BACKEND_STATUS_OUT_OF_MEMORY;
    }
    for (int64_t o = 0; o < channels; o++) {
        s[o] = (double)scale[o] / sqrt((double)variance[o] + (double)bd->epsilon);
        new_bias[o] = (float)(((bias ? (double)bias[o] : 0.0) - (double)mean[o]) * s[o] + (double)beta[o]);
    }
    /* which output channel each weight belongs to: rows of [O, ...] (Convolution2d,
       FullyConnected's [M, K]), the last axis of [1, kH, kW, O] and [K, M] */
    const int by_row = k->layer_type == BACKEND_LAYER_CONVOLUTION2D ||
                       (k->layer_type == BACKEND_LAYER_FULLY_CONNECTED && k->transpose_weights);
    const int64_t per_row = count / channels;
    for (int64_t i = 0; i < count; i++)
        folded[i] = (float)((double)w[i] * s[by_row ? i / per_row : i % channels]);
    free(s);
    k->owned = folded;
    k->operands[OPERAND_W].constant = folded;
    k->operands[OPERAND_W].input = -1;
    k->operands[OPERAND_BIAS] = (Operand){ new_bias, -1, (uint64_t)channels * sizeof(float) };
    k->has_bias = 1;
    return BACKEND_STATUS_OK;
}

static int64_t conv_groups(const BackendLayerDescription *d)
{
    const BackendConvolution2dDescriptor *c = d->descriptor;
    return BACKEND_STRUCT_HAS(BackendConvolution2dDescriptor, c, groups) ? c->groups : 1;
}

static FusedKernel *new_kernel(const BackendLayerDescription *d, BackendStatus *status)
{
    FusedKernel *k = calloc(1, sizeof *k);
    if (k == NULL) {
        *status = BACKEND_STATUS_OUT_OF_MEMORY;
        return NULL;
    }
    ref_fused_init(k);
    fill_geometry(k, d);
    for (int i = 0; i < OPERAND_COUNT; i++)
        k->operands[i].input = -1;
    k->epilogue.function = -1;
    k->epilogue.ldr = d->outputs[0].dimensions[d->outputs[0].num_dimensions - 1];
    return k;
}

static void swish_epilogue(FusedKernel *k)
{
    k->epilogue.function = RK_SWISH;
    k->epilogue.a = 1.0f;
    k->epilogue.b = 0.0f;
}

/* A swish pattern whose sigmoid is layer `head`, as one step: x * sigmoid(x). */
static FusedKernel *fuse_swish_alone(const BackendSubgraph *g, const ReaderTable *r, uint32_t head,
                                     const char *taken,
                                     const int32_t *group, uint32_t *inputs, uint32_t *output,
                                     uint32_t *last, BackendStatus *status)
{
    const BackendSubgraphLayer *layer = g->layers[head];
    int64_t sigmoid, product;
    if (!swish_pattern(g, r, layer->input_tensors[0], head, taken, group, &sigmoid, &product) ||
        sigmoid != head)
        return NULL;
    FusedKernel *k = new_kernel(layer->description, status);
    if (k == NULL)
        return NULL;
    swish_epilogue(k);
    bind_operand(k, OPERAND_X, g, layer->input_tensors[0], inputs);
    k->layer_ids[0] = layer->id;
    k->layer_ids[1] = g->layers[product]->id;
    k->num_layer_ids = 2;
    ref_fused_plan(k);
    *output = g->layers[product]->output_tensors[0];
    *last = (uint32_t)(product > (int64_t)head ? product : head);
    return k;
}

/* Whether `info` is one scale per channel of x (NHWC, broadcast from the right): 0 for shape
   [C] or [1, .., 1, C] (one for every image), x's channel count for [N, 1, 1, C] of x's N > 1
   images (one per image); -1 for anything else. */
static int64_t scale_stride_of(const BackendTensorInfo *info, const BackendTensorInfo *x)
{
    const uint32_t rank = info->num_dimensions;
    const int64_t c = x->dimensions[3];
    if (rank < 1 || rank > 4 || info->dimensions[rank - 1] != c)
        return -1;
    /* every axis but the channels' (and a rank-4 scale's images) of extent 1 */
    for (uint32_t d = rank == 4 ? 1 : 0; d + 1 < rank; d++)
        if (info->dimensions[d] != 1)
            return -1;
    if (rank < 4 || info->dimensions[0] == 1)
        return 0;
    return info->dimensions[0] == x->dimensions[0] ? c : -1;
}

/* The convolution a Multiplication `mul` scales the input channels of: the pointwise
   Convolution2d (groups 1, constant weights, rk_conv_takes_scale) that alone reads its product,
   when one of its inputs (*x) has the convolution's input shape and the other (*scale) is one
   scale per channel (scale_stride_of: *stride). Its index, or -1. */
static int64_t scaled_convolution(const BackendSubgraph *g, const ReaderTable *r, uint32_t mul,
                                  const char *taken, const int32_t *group, uint32_t *x, uint32_t *scale,
                                  int64_t *stride)
{
    const BackendSubgraphLayer *m = g->layers[mul];
    if (m->description->num_inputs != 2)
        return -1;
    const int64_t conv = only_reader(r, m->output_tensors[0]);
    if (!joins(g, conv, mul, taken, group, BACKEND_LAYER_CONVOLUTION2D))
        return -1;
    const BackendSubgraphLayer *c = g->layers[conv];
    const BackendLayerDescription *d = c->description;
    if (c->input_tensors[0] != m->output_tensors[0] || conv_groups(d) != 1 ||
        !is_constant(g, c->input_tensors[1]) || d->inputs[0].num_dimensions != 4)
        return -1;
    FusedKernel probe;
    memset(&probe, 0, sizeof probe);
    fill_geometry(&probe, d);
    if (!rk_conv_takes_scale(&probe.window))
        return -1;
    for (int s = 0; s < 2; s++) {
        const uint32_t a = m->input_tensors[s], b = m->input_tensors[1 - s];
        if (a == b || !same_shape(&g->tensors[a]->info, &d->inputs[0]))
            continue;
        *stride = scale_stride_of(&g->tensors[b]->info, &d->inputs[0]);
        if (*stride >= 0) {
            *x = a;
            *scale = b;
            return conv;
        }
    }
    return -1;
}

FusedKernel *ref_fuse(const BackendSubgraph *g, const ReaderTable *r, uint32_t head,
                      const char *taken_in, const int32_t *group, uint32_t *inputs, uint32_t *output, uint32_t *last,
                      BackendStatus *status)
{
    /* lead: the convolution or fully connected layer; head itself, or the one whose input the
       Multiplication `head` scales */
    int64_t lead = head, scale_stride = 0;
    uint32_t x_tensor = 0, scale_tensor = 0;
    int scaled = 0;
    if (g->layers[head]->description->layer_type == BACKEND_LAYER_MULTIPLICATION) {
        lead = scaled_convolution(g, r, head, taken_in, group, &x_tensor, &scale_tensor, &scale_stride);
        if (lead < 0)
            return NULL;
        scaled = 1;
    }
    const BackendSubgraphLayer *layer = g->layers[lead];
    const BackendLayerDescription *d = layer->description;
    int64_t members[MAX_FUSED_LAYERS] = { head, lead };  /* in the order they run */
    int count = scaled ? 2 : 1, residual_tensor = -1, swish = 0;
    int64_t bn = -1, sigmoid, product;
    uint32_t produced = layer->output_tensors[0];
    int64_t next = only_reader(r, produced);
    const BackendActivationDescriptor *activation = NULL;
    FusedKernel *k;

    if (d->layer_type == BACKEND_LAYER_ACTIVATION)
        return fuse_swish_alone(g, r, head, taken_in, group, inputs, output, last, status);
    if (!scaled)
        x_tensor = layer->input_tensors[0];
    if (joins(g, next, head, taken_in, group, BACKEND_LAYER_BATCH_NORMALIZATION) &&
        foldable(g, (uint32_t)lead, next)) {
        bn = next;
        members[count++] = next;
        produced = g->layers[next]->output_tensors[0];
        next = only_reader(r, produced);
    }
    if (joins(g, next, head, taken_in, group, BACKEND_LAYER_ADDITION)) {
        const BackendSubgraphLayer *add = g->layers[next];
        uint32_t a = add->input_tensors[0], b = add->input_tensors[1];
        uint32_t other = a == produced ? b : a;
        /* a residual of the full output shape, not the fused output itself */
        if (a != b && same_shape(&g->tensors[other]->info, &d->outputs[0]) &&
            same_shape(&add->description->outputs[0], &d->outputs[0])) {
            residual_tensor = (int)other;
            members[count++] = next;
            produced = add->output_tensors[0];
            next = only_reader(r, produced);
        }
    }
    if (joins(g, next, head, taken_in, group, BACKEND_LAYER_ACTIVATION)) {
        activation = g->layers[next]->description->descriptor;
        members[count++] = next;
        produced = g->layers[next]->output_tensors[0];
    } else if (swish_pattern(g, r, produced, head, taken_in, group, &sigmoid, &product)) {
        swish = 1;
        members[count++] = sigmoid;
        members[count++] = product;
        produced = g->layers[product]->output_tensors[0];
    }
    /* alone, a layer becomes a fused kernel only for what it keeps between executions: its
       constant weights packed once for the GEMM, or a thread count above one decided once */
    const int packs = (d->layer_type == BACKEND_LAYER_FULLY_CONNECTED &&
                       rk_fully_connected_uses_packed(d->inputs[0].dimensions[0])) ||
                      (d->layer_type == BACKEND_LAYER_CONVOLUTION2D && conv_groups(d) == 1);
    if (count == 1 && !is_constant(g, layer->input_tensors[1]))
        return NULL;

    k = new_kernel(d, status);
    if (k == NULL)
        return NULL;
    if (count == 1 && !packs) {
        ref_fused_plan(k);
        if (k->threads <= 1) {
            k->base.destroy(&k->base);
            return NULL;
        }
    }
    if (swish) {
        swish_epilogue(k);
    } else if (activation != NULL) {
        k->epilogue.function = (int)activation->function;
        k->epilogue.a = activation->a;
        k->epilogue.b = activation->b;
    }
    bind_operand(k, OPERAND_X, g, x_tensor, inputs);
    bind_operand(k, OPERAND_W, g, layer->input_tensors[1], inputs);
    if (k->has_bias)
        bind_operand(k, OPERAND_BIAS, g, layer->input_tensors[2], inputs);
    if (residual_tensor >= 0) {
        k->has_residual = 1;
        bind_operand(k, OPERAND_RESIDUAL, g, (uint32_t)residual_tensor, inputs);
    }
    if (scaled) {
        k->has_scale = 1;
        k->scale_stride = scale_stride;
        bind_operand(k, OPERAND_SCALE, g, scale_tensor, inputs);
    }
    if ((bn >= 0 && (*status = fold(k, g, (uint32_t)lead, bn)) != BACKEND_STATUS_OK) ||
        (*status = ref_fused_pack(k)) != BACKEND_STATUS_OK) {
        k->base.destroy(&k->base);
        return NULL;
    }
    for (int m = 0; m < count; m++)
        k->layer_ids[m] = g->layers[members[m]]->id;
    k->num_layer_ids = (uint32_t)count;
    ref_fused_plan(k);
    *output = produced;
    *last = (uint32_t)members[0];
    for (int m = 1; m < count; m++)
        if ((uint32_t)members[m] > *last)
            *last = (uint32_t)members[m];
    return k;
}
