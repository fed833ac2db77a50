/*
 * The reference backend's sub-graph optimizer (Backend API 1.2).
 *
 * Every sub-graph it is offered becomes one substitution: a program that runs all the layers it
 * takes, in order, in a single execute() call. Its steps are fused kernels and single layers
 * (the workloads of layers.c). A Convolution2d, DepthwiseConvolution2d or FullyConnected layer
 * is fused with what alone reads its output: an Activation, or an Addition of a residual of the
 * output's shape optionally followed by an Activation; the fused kernel adds the residual and
 * applies the activation in the epilogue of the convolution or GEMM, on each part of the output
 * as soon as it is final, so those intermediate tensors never exist. Every other intermediate
 * tensor lives in one arena allocated once, when the program is made, at an offset planned from
 * the tensors' lifetimes so that tensors never alive at once share bytes. A layer
 * ref_check_layer() refuses is failed with its reason (the layers after it then form further
 * programs, so that no substitution needs another's output and its own).
 *
 * Each step reports one profiling event per execution naming the layers it runs (their debug
 * handles); fused kernels add a "macs" counter. A program serializes to self-contained bytes
 * (its slots, its steps, the fused kernels' geometry and every constant it reads) that
 * ref_load_compiled_subgraph() checks and loads again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* ---- profiling ----------------------------------------------------------------------------- */

#define MAX_PROFILED_EVENTS 65536

typedef struct RefEvent {
    const char *name;
    uint64_t layer_ids[3];
    uint32_t num_layer_ids;
    int64_t start_ns, end_ns;
} RefEvent;

/* One per loaded network: the executions of one network never overlap, so no lock. */
struct RefProfiling {
    BackendProfilingContext base;       /* first */
    int enabled;
    RefEvent *events;
    size_t count, capacity;
    double macs;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void profiling_enable(BackendProfilingContext *self, int enabled)
{
    ((RefProfiling *)self)->enabled = enabled != 0;
}

static void profiling_collect(BackendProfilingContext *self, BackendProfilingSink *sink)
{
    RefProfiling *p = (RefProfiling *)self;
    if (sink != NULL && sink->struct_size >= BACKEND_PROFILING_SINK_SIZE_1_2) {
        for (size_t i = 0; i < p->count; i++)
            sink->event(sink, p->events[i].name, p->events[i].layer_ids, p->events[i].num_layer_ids,
                        p->events[i].start_ns, p->events[i].end_ns);
        if (p->macs > 0)
            sink->counter(sink, "macs", p->macs);
    }
    p->count = 0;
    p->macs = 0;
}

static void profiling_destroy(BackendProfilingContext *self)
{
    free(((RefProfiling *)self)->events);
    free(self);
}

BackendStatus ref_create_profiling_context(const BackendInstance *self,
                                           BackendProfilingContext **context, char *message,
                                           size_t message_size)
{
    RefProfiling *p;
    (void)self;
    if (context == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, "NULL context");
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    p->base.struct_size = (uint32_t)sizeof p->base;
    p->base.enable = profiling_enable;
    p->base.collect = profiling_collect;
    p->base.destroy = profiling_destroy;
    *context = &p->base;
    return BACKEND_STATUS_OK;
}

static void record_event(RefProfiling *p, const char *name, const uint64_t *ids, uint32_t n,
                         int64_t start, int64_t end, double macs)
{
    if (p->count == p->capacity) {
        size_t capacity = p->capacity ? 2 * p->capacity : 64;
        RefEvent *grown;
        if (capacity > MAX_PROFILED_EVENTS)
            return;                      /* the rest of a long unprofiled stretch is dropped */
        grown = realloc(p->events, capacity * sizeof *grown);
        if (grown == NULL)
            return;
        p->events = grown;
        p->capacity = capacity;
    }
    p->events[p->count].name = name;
    memcpy(p->events[p->count].layer_ids, ids, n * sizeof *ids);
    p->events[p->count].num_layer_ids = n;
    p->events[p->count].start_ns = start;
    p->events[p->count].end_ns = end;
    p->count++;
    p->macs += macs;
}

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
    uint64_t layer_ids[3];              /* debug handles of the layers replaced */
    uint32_t num_layer_ids;
    RefProfiling *profiling;            /* borrowed, NULL when not profiled */
    void *owned;                        /* constants copied from serialized bytes, or NULL */
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

static double fused_macs(const FusedKernel *k)
{
    if (k->layer_type == BACKEND_LAYER_FULLY_CONNECTED)
        return (double)k->n * k->k * k->m;
    if (k->layer_type == BACKEND_LAYER_CONVOLUTION2D)
        return (double)k->window.n * k->window.oh * k->window.ow * k->channels_out * k->window.kh *
               k->window.kw * k->window.c;
    return (double)k->window.n * k->window.oh * k->window.ow * k->channels_out * k->window.kh *
           k->window.kw;
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
    RefProfiling *profiling = k->profiling != NULL && k->profiling->enabled ? k->profiling : NULL;
    int64_t start = profiling != NULL ? now_ns() : 0;
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
    if (profiling != NULL)
        record_event(profiling, k->layer_type == BACKEND_LAYER_FULLY_CONNECTED ? "fused FullyConnected"
                     : k->layer_type == BACKEND_LAYER_CONVOLUTION2D ? "fused Convolution2d"
                     : "fused DepthwiseConvolution2d",
                     k->layer_ids, k->num_layer_ids, start, now_ns(), fused_macs(k));
    return BACKEND_STATUS_OK;
}

static void fused_destroy(BackendCompiledSubgraph *self)
{
    free(((FusedKernel *)self)->owned);
    free(self);
}

static void fused_set_profiling_context(BackendCompiledSubgraph *self,
                                        BackendProfilingContext *context)
{
    ((FusedKernel *)self)->profiling = (RefProfiling *)context;
}

/* ---- serialized form ------------------------------------------------------------------------
 * "RKFK", format version, sizeof(FusedKernel), the kernel's fields (pointers zeroed), then for
 * each operand that is a constant its bytes (Operand.bytes of them). Read back only by this
 * very build (the runtime checks the backend id and version), and checked field by field. */

#define FORMAT_MAGIC 0x4b464b52u        /* "RKFK" */
#define FORMAT_VERSION 1u
#define MAX_DIMENSION ((int64_t)1 << 24)
#define MAX_OPERAND_BYTES ((uint64_t)1 << 32)

typedef struct FormatHeader {
    uint32_t magic, version;
    uint64_t kernel_size;
} FormatHeader;

static int constant_operand(const FusedKernel *k, int i)
{
    if (k->operands[i].input >= 0)
        return 0;
    return i == OPERAND_X || i == OPERAND_W || (i == OPERAND_BIAS && k->has_bias) ||
           (i == OPERAND_RESIDUAL && k->has_residual);
}

static BackendStatus fused_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                     uint64_t *size, char *message, size_t message_size)
{
    FusedKernel *k = (FusedKernel *)self, copy;
    FormatHeader header = { FORMAT_MAGIC, FORMAT_VERSION, sizeof(FusedKernel) };
    uint64_t needed = sizeof header + sizeof copy;
    char *out = buffer;
    if (size == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, "NULL size");
    for (int i = 0; i < OPERAND_COUNT; i++)
        if (constant_operand(k, i))
            needed += k->operands[i].bytes;
    *size = needed;
    if (buffer == NULL || capacity < needed)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY,
                        "%llu bytes are needed", (unsigned long long)needed);
    memcpy(&copy, k, sizeof copy);
    memset(&copy.base, 0, sizeof copy.base);
    copy.profiling = NULL;
    copy.owned = NULL;
    copy.epilogue.residual = NULL;
    for (int i = 0; i < OPERAND_COUNT; i++)
        copy.operands[i].constant = NULL;
    memcpy(out, &header, sizeof header);
    out += sizeof header;
    memcpy(out, &copy, sizeof copy);
    out += sizeof copy;
    for (int i = 0; i < OPERAND_COUNT; i++)
        if (constant_operand(k, i)) {
            memcpy(out, k->operands[i].constant, k->operands[i].bytes);
            out += k->operands[i].bytes;
        }
    return BACKEND_STATUS_OK;
}

static int positive(int64_t v) { return v > 0 && v <= MAX_DIMENSION; }
static int non_negative(int64_t v) { return v >= 0 && v <= MAX_DIMENSION; }

/* What is wrong with a kernel read from bytes, or NULL: every size the kernels use must follow
   from the geometry, so that no read or write goes past a buffer. */
static const char *check_kernel(const FusedKernel *k)
{
    uint64_t x, w, bias, out;
    if (k->has_bias != 0 && k->has_bias != 1)
        return "bad bias flag";
    if (k->has_residual != 0 && k->has_residual != 1)
        return "bad residual flag";
    if (k->num_inputs > 4 || k->num_layer_ids < 1 || k->num_layer_ids > 3)
        return "bad counts";
    if (k->epilogue.function < -1 || k->epilogue.function > 16)
        return "bad activation";
    if (k->layer_type == BACKEND_LAYER_FULLY_CONNECTED) {
        if (!positive(k->n) || !positive(k->k) || !positive(k->m) ||
            (k->transpose_weights != 0 && k->transpose_weights != 1))
            return "bad FullyConnected geometry";
        x = (uint64_t)k->n * k->k;
        w = (uint64_t)k->k * k->m;
        bias = (uint64_t)k->m;
        out = (uint64_t)k->n * k->m;
        if (k->epilogue.ldr != k->m)
            return "bad epilogue stride";
    } else if (k->layer_type == BACKEND_LAYER_CONVOLUTION2D ||
               k->layer_type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D) {
        const rk_conv_params *p = &k->window;
        if (!positive(p->n) || !positive(p->h) || !positive(p->w) || !positive(p->c) ||
            !positive(p->kh) || !positive(p->kw) || !positive(p->stride_h) ||
            !positive(p->stride_w) || !positive(p->dil_h) || !positive(p->dil_w) ||
            !non_negative(p->pad_top) || !non_negative(p->pad_bottom) ||
            !non_negative(p->pad_left) || !non_negative(p->pad_right) ||
            !positive(p->oh) || !positive(p->ow) || !positive(k->channels_out))
            return "bad convolution geometry";
        if (p->oh != (p->h + p->pad_top + p->pad_bottom - p->dil_h * (p->kh - 1) - 1) / p->stride_h + 1 ||
            p->ow != (p->w + p->pad_left + p->pad_right - p->dil_w * (p->kw - 1) - 1) / p->stride_w + 1)
            return "output size does not follow from the window";
        if (k->layer_type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D && k->channels_out % p->c != 0)
            return "depthwise output channels are not a multiple of the input's";
        x = (uint64_t)p->n * p->h * p->w * p->c;
        w = k->layer_type == BACKEND_LAYER_CONVOLUTION2D
                ? (uint64_t)k->channels_out * p->kh * p->kw * p->c
                : (uint64_t)p->kh * p->kw * k->channels_out;
        bias = (uint64_t)k->channels_out;
        out = (uint64_t)p->n * p->oh * p->ow * k->channels_out;
        if (k->epilogue.ldr != k->channels_out)
            return "bad epilogue stride";
    } else {
        return "unknown layer type";
    }
    if (k->output_bytes != out * 4 || k->operands[OPERAND_X].bytes != x * 4 ||
        k->operands[OPERAND_W].bytes != w * 4 ||
        (k->has_bias && k->operands[OPERAND_BIAS].bytes != bias * 4) ||
        (k->has_residual && k->operands[OPERAND_RESIDUAL].bytes != out * 4))
        return "operand sizes do not follow from the geometry";
    for (int i = 0; i < OPERAND_COUNT; i++)
        if (k->operands[i].input < -1 || k->operands[i].input >= (int32_t)k->num_inputs ||
            k->operands[i].bytes > MAX_OPERAND_BYTES)
            return "bad operand";
    return NULL;
}

static BackendStatus load_fused(const void *data, uint64_t size, BackendCompiledSubgraph **compiled,
                                char *message, size_t message_size)
{
    FormatHeader header;
    FusedKernel *k;
    const char *in = data, *problem;
    uint64_t rest, constants = 0, used = 0;
    if (compiled == NULL || (data == NULL && size != 0))
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, "NULL argument");
    if (size < sizeof header + sizeof *k)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "%llu bytes are too few for a compiled sub-graph", (unsigned long long)size);
    memcpy(&header, in, sizeof header);
    if (header.magic != FORMAT_MAGIC || header.version != FORMAT_VERSION ||
        header.kernel_size != sizeof *k)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "not a compiled sub-graph of this reference backend build");
    k = calloc(1, sizeof *k);
    if (k == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    memcpy(k, in + sizeof header, sizeof *k);
    k->profiling = NULL;
    k->owned = NULL;
    problem = check_kernel(k);
    rest = size - sizeof header - sizeof *k;
    for (int i = 0; problem == NULL && i < OPERAND_COUNT; i++)
        if (constant_operand(k, i))
            constants += k->operands[i].bytes;
    if (problem == NULL && constants != rest)
        problem = "the constant data does not have the size the geometry needs";
    if (problem != NULL) {
        free(k);
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "compiled sub-graph bytes: %s", problem);
    }
    k->owned = malloc(constants ? constants : 1);
    if (k->owned == NULL) {
        free(k);
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    memcpy(k->owned, in + sizeof header + sizeof *k, constants);
    for (int i = 0; i < OPERAND_COUNT; i++) {
        k->operands[i].constant = NULL;
        if (constant_operand(k, i)) {
            k->operands[i].constant = (const float *)((const char *)k->owned + used);
            used += k->operands[i].bytes;
        }
    }
    k->epilogue.residual = NULL;
    k->base.struct_size = (uint32_t)sizeof k->base;
    k->base.reserved = 0;
    k->base.execute = fused_execute;
    k->base.destroy = fused_destroy;
    k->base.set_profiling_context = fused_set_profiling_context;
    k->base.serialize = fused_serialize;
    *compiled = &k->base;
    return BACKEND_STATUS_OK;
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

/* Tries to fuse layer `head` (in program group `group`) with what follows it; on success marks
   its layers in `taken` and returns the fused kernel, its boundary inputs in `inputs` (at most 4),
   the tensor it writes in *output and the index of its last layer in *last. */
static FusedKernel *fuse(const BackendSubgraph *g, uint32_t head, const char *taken_in,
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
    k->base.struct_size = (uint32_t)sizeof k->base;
    k->base.execute = fused_execute;
    k->base.destroy = fused_destroy;
    k->base.set_profiling_context = fused_set_profiling_context;
    k->base.serialize = fused_serialize;
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

/* ---- the program: every layer of one group, run in one call ----------------------------------
 * A compiled sub-graph that runs its steps (fused kernels and single layers) in order. Every
 * tensor a step reads or writes is a slot: a boundary input or output of the substitution, a
 * constant, or a place in one arena allocated once, at compile time (or load time), whose
 * offsets were planned from the tensors' lifetimes so that tensors never live at once share
 * bytes. Slots are handed to the steps as buffers of exactly their size, so every step's own
 * checks bound what it reads and writes. */

enum { SLOT_INPUT = 0, SLOT_OUTPUT = 1, SLOT_ARENA = 2, SLOT_CONSTANT = 3 };
enum { STEP_FUSED = 0, STEP_LAYER = 1 };

#define MAX_STEP_INPUTS 4
#define ARENA_ALIGNMENT 64
#define MAX_ARENA_BYTES ((uint64_t)1 << 40)

typedef struct Slot {
    uint32_t kind;                      /* SLOT_* */
    uint32_t index;                     /* SLOT_INPUT / SLOT_OUTPUT: boundary position */
    uint64_t offset;                    /* SLOT_ARENA: into the arena; SLOT_CONSTANT: into the
                                           serialized constants */
    uint64_t bytes;
} Slot;

typedef union LayerDescriptor {
    BackendActivationDescriptor activation;
    BackendFullyConnectedDescriptor fully_connected;
    BackendConvolution2dDescriptor convolution;
    BackendPooling2dDescriptor pooling;
    BackendSoftmaxDescriptor softmax;
} LayerDescriptor;

/* What a step is, as serialized (no pointers). */
typedef struct StepRecord {
    uint32_t kind;                      /* STEP_* */
    uint32_t num_inputs;
    uint32_t inputs[MAX_STEP_INPUTS];   /* slots */
    uint32_t output;                    /* slot */
    uint32_t layer_type;                /* STEP_LAYER */
    uint64_t layer_id;                  /* STEP_LAYER */
    uint64_t payload_bytes;             /* STEP_FUSED: bytes of the fused kernel that follow */
    BackendTensorInfo input_infos[3];   /* STEP_LAYER: the layer's description */
    BackendTensorInfo output_info;
    LayerDescriptor descriptor;
} StepRecord;

typedef struct Step {
    StepRecord record;
    BackendCompiledSubgraph *fused;     /* STEP_FUSED */
    BackendWorkload *workload;          /* STEP_LAYER */
} Step;

typedef struct Program {
    BackendCompiledSubgraph base;       /* first */
    uint32_t num_inputs, num_outputs, num_slots, num_steps;
    Slot *slots;
    const void **constants;             /* per slot: SLOT_CONSTANT data, else NULL */
    Step *steps;
    uint64_t arena_bytes;
    void *arena;
    void *owned;                        /* constants read from serialized bytes, or NULL */
    uint64_t owned_bytes;
    RefProfiling *profiling;
    BackendBuffer *scratch;             /* per-call buffers: num_slots entries */
} Program;

static const char *const LAYER_EVENT_NAMES[BACKEND_LAYER_TYPE_COUNT] = {
    "Activation", "Addition", "Multiplication", "FullyConnected", "Convolution2d",
    "DepthwiseConvolution2d", "Pooling2d", "Softmax", "Reshape",
};

static void program_destroy(BackendCompiledSubgraph *self)
{
    Program *p = (Program *)self;
    for (uint32_t i = 0; p->steps != NULL && i < p->num_steps; i++) {
        if (p->steps[i].fused != NULL)
            p->steps[i].fused->destroy(p->steps[i].fused);
        if (p->steps[i].workload != NULL)
            p->steps[i].workload->destroy(p->steps[i].workload);
    }
    free(p->steps);
    free(p->slots);
    free(p->constants);
    free(p->arena);
    free(p->owned);
    free(p->scratch);
    free(p);
}

static void program_set_profiling_context(BackendCompiledSubgraph *self,
                                          BackendProfilingContext *context)
{
    Program *p = (Program *)self;
    p->profiling = (RefProfiling *)context;
    for (uint32_t i = 0; i < p->num_steps; i++)
        if (p->steps[i].fused != NULL)
            p->steps[i].fused->set_profiling_context(p->steps[i].fused, context);
}

static BackendStatus program_execute(BackendCompiledSubgraph *self, const BackendBuffer *inputs,
                                     uint32_t num_inputs, const BackendBuffer *outputs,
                                     uint32_t num_outputs, char *message, size_t message_size)
{
    Program *p = (Program *)self;
    BackendBuffer *b = p->scratch;
    RefProfiling *profiling = p->profiling != NULL && p->profiling->enabled ? p->profiling : NULL;
    if (num_inputs != p->num_inputs || num_outputs != p->num_outputs ||
        (num_inputs && inputs == NULL) || (num_outputs && outputs == NULL))
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "the compiled sub-graph takes %u inputs and %u outputs, got %u and %u",
                        p->num_inputs, p->num_outputs, num_inputs, num_outputs);
    for (uint32_t s = 0; s < p->num_slots; s++) {
        const Slot *slot = &p->slots[s];
        const BackendBuffer *given = slot->kind == SLOT_INPUT ? &inputs[slot->index]
                                     : slot->kind == SLOT_OUTPUT ? &outputs[slot->index] : NULL;
        b[s].struct_size = (uint32_t)sizeof b[s];
        b[s].reserved = 0;
        b[s].size_bytes = slot->bytes;
        if (given != NULL) {
            if (given->data == NULL || given->size_bytes < slot->bytes)
                return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                                "%s %u holds %llu bytes, %llu are needed",
                                slot->kind == SLOT_INPUT ? "input" : "output", slot->index,
                                (unsigned long long)given->size_bytes,
                                (unsigned long long)slot->bytes);
            b[s].data = given->data;
        } else if (slot->kind == SLOT_ARENA) {
            b[s].data = (char *)p->arena + slot->offset;
        } else {
            b[s].data = (void *)p->constants[s];
        }
    }
    for (uint32_t i = 0; i < p->num_steps; i++) {
        const Step *step = &p->steps[i];
        BackendBuffer in[MAX_STEP_INPUTS];
        BackendStatus status;
        int64_t start = 0;
        for (uint32_t j = 0; j < step->record.num_inputs; j++)
            in[j] = b[step->record.inputs[j]];
        if (step->fused != NULL) {
            status = step->fused->execute(step->fused, in, step->record.num_inputs,
                                          &b[step->record.output], 1, message, message_size);
        } else {
            start = profiling != NULL ? now_ns() : 0;
            status = step->workload->execute(step->workload, in, step->record.num_inputs,
                                             &b[step->record.output], 1, message, message_size);
            if (status == BACKEND_STATUS_OK && profiling != NULL)
                record_event(profiling, LAYER_EVENT_NAMES[step->record.layer_type],
                             &step->record.layer_id, 1, start, now_ns(), 0);
        }
        if (status != BACKEND_STATUS_OK)
            return status;
    }
    return BACKEND_STATUS_OK;
}

static BackendStatus program_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                       uint64_t *size, char *message, size_t message_size);

static uint64_t aligned(uint64_t n) { return (n + ARENA_ALIGNMENT - 1) / ARENA_ALIGNMENT * ARENA_ALIGNMENT; }

/* Greedy first-fit by lifetime: each arena slot, in the order its tensor is first written, goes
   to the lowest offset that overlaps no slot whose lifetime [first, last] (step indices) meets
   its own. Returns the arena size. */
static uint64_t plan_arena(Slot *slots, const uint32_t *first, const uint32_t *last, uint32_t n)
{
    uint64_t size = 0;
    uint32_t *placed = malloc((n ? n : 1) * sizeof *placed), count = 0;
    if (placed == NULL)
        return UINT64_MAX;
    for (uint32_t step = 0;; step++) {
        int any = 0;
        for (uint32_t s = 0; s < n; s++) {
            if (slots[s].kind != SLOT_ARENA)
                continue;
            any |= first[s] >= step;
            if (first[s] != step)
                continue;
            uint64_t offset = 0;
            for (int moved = 1; moved;) {
                moved = 0;
                for (uint32_t q = 0; q < count; q++) {
                    const Slot *o = &slots[placed[q]];
                    if (first[placed[q]] > last[s] || last[placed[q]] < first[s])
                        continue;                   /* never alive together */
                    if (offset < o->offset + aligned(o->bytes) && o->offset < offset + aligned(slots[s].bytes)) {
                        offset = o->offset + aligned(o->bytes);
                        moved = 1;
                    }
                }
            }
            slots[s].offset = offset;
            placed[count++] = s;
            if (offset + aligned(slots[s].bytes) > size)
                size = offset + aligned(slots[s].bytes);
        }
        if (!any)
            break;
    }
    free(placed);
    return size;
}

static BackendStatus program_finish(Program *p, char *message, size_t message_size)
{
    p->scratch = calloc(p->num_slots ? p->num_slots : 1, sizeof *p->scratch);
    p->arena = malloc(p->arena_bytes ? p->arena_bytes : 1);
    if (p->scratch == NULL || p->arena == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    p->base.struct_size = (uint32_t)sizeof p->base;
    p->base.reserved = 0;
    p->base.execute = program_execute;
    p->base.destroy = program_destroy;
    p->base.set_profiling_context = program_set_profiling_context;
    p->base.serialize = program_serialize;
    return BACKEND_STATUS_OK;
}

/* The slot of `tensor`, added on first use. */
static uint32_t slot_of(Program *p, int64_t *slot_of_tensor, const BackendSubgraph *g, uint32_t tensor,
                        const int32_t *boundary_out, const int32_t *boundary_in)
{
    const BackendSubgraphTensor *t = g->tensors[tensor];
    Slot *slot;
    if (slot_of_tensor[tensor] >= 0)
        return (uint32_t)slot_of_tensor[tensor];
    slot = &p->slots[p->num_slots];
    slot->bytes = (uint64_t)elements(&t->info) * sizeof(float);
    if (t->kind == BACKEND_SUBGRAPH_TENSOR_CONSTANT) {
        slot->kind = SLOT_CONSTANT;
        p->constants[p->num_slots] = t->data;
    } else if (boundary_in[tensor] >= 0) {
        slot->kind = SLOT_INPUT;
        slot->index = (uint32_t)boundary_in[tensor];
    } else if (boundary_out[tensor] >= 0) {
        slot->kind = SLOT_OUTPUT;
        slot->index = (uint32_t)boundary_out[tensor];
    } else {
        slot->kind = SLOT_ARENA;
    }
    slot_of_tensor[tensor] = p->num_slots;
    return p->num_slots++;
}

static int read_by_other(const BackendSubgraph *g, uint32_t tensor, const int32_t *group, int32_t mine)
{
    if (is_subgraph_output(g, tensor))
        return 1;
    for (uint32_t i = 0; i < g->num_layers; i++)
        if (group[i] != mine)
            for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++)
                if (g->layers[i]->input_tensors[j] == tensor)
                    return 1;
    return 0;
}

/* Compiles the layers of group `mine` into one program and records the substitution. */
static BackendStatus compile_group(const BackendSubgraph *g, const int32_t *group, int32_t mine,
                                   BackendOptimizationViews *views)
{
    uint32_t n = g->num_layers, nt = g->num_tensors, num_ids = 0, num_in = 0, num_out = 0;
    Program *p = calloc(1, sizeof *p);
    int64_t *slot_of_tensor = malloc((nt ? nt : 1) * sizeof *slot_of_tensor);
    int32_t *boundary_in = malloc((nt ? nt : 1) * sizeof *boundary_in);
    int32_t *boundary_out = malloc((nt ? nt : 1) * sizeof *boundary_out);
    uint32_t *in_list = malloc((nt ? nt : 1) * sizeof *in_list);
    uint32_t *out_list = malloc((nt ? nt : 1) * sizeof *out_list);
    uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    char *taken = calloc(n ? n : 1, 1), *produced = calloc(nt ? nt : 1, 1);
    uint32_t *first = NULL, *last = NULL;
    uint32_t max_slots = 4 * n + 4;
    BackendStatus status = BACKEND_STATUS_OK;
    char message[256] = "";

    if (p == NULL || slot_of_tensor == NULL || boundary_in == NULL || boundary_out == NULL ||
        in_list == NULL || out_list == NULL || ids == NULL || taken == NULL || produced == NULL)
        goto out_of_memory;
    p->slots = calloc(max_slots, sizeof *p->slots);
    p->constants = calloc(max_slots, sizeof *p->constants);
    p->steps = calloc(n ? n : 1, sizeof *p->steps);
    first = calloc(max_slots, sizeof *first);
    last = calloc(max_slots, sizeof *last);
    if (p->slots == NULL || p->constants == NULL || p->steps == NULL || first == NULL || last == NULL)
        goto out_of_memory;
    for (uint32_t t = 0; t < nt; t++) {
        slot_of_tensor[t] = -1;
        boundary_in[t] = boundary_out[t] = -1;
    }
    /* the boundary: what the group's layers read and do not produce, what they produce that
       anything else reads */
    for (uint32_t i = 0; i < n; i++)
        if (group[i] == mine) {
            ids[num_ids++] = g->layers[i]->id;
            produced[g->layers[i]->output_tensors[0]] = 1;
        }
    for (uint32_t i = 0; i < n; i++)
        if (group[i] == mine) {
            const BackendSubgraphLayer *l = g->layers[i];
            for (uint32_t j = 0; j < l->description->num_inputs; j++) {
                uint32_t t = l->input_tensors[j];
                if (!produced[t] && g->tensors[t]->kind != BACKEND_SUBGRAPH_TENSOR_CONSTANT &&
                    boundary_in[t] < 0) {
                    boundary_in[t] = (int32_t)num_in;
                    in_list[num_in++] = t;
                }
            }
            uint32_t o = l->output_tensors[0];
            if (boundary_out[o] < 0 && read_by_other(g, o, group, mine)) {
                boundary_out[o] = (int32_t)num_out;
                out_list[num_out++] = o;
            }
        }
    p->num_inputs = num_in;
    p->num_outputs = num_out;
    for (uint32_t i = 0; i < n; i++) {
        const BackendSubgraphLayer *l = g->layers[i];
        BackendLayerType type = l->description->layer_type;
        uint32_t fin[4] = { 0 }, fout = 0, flast = i;
        FusedKernel *k = NULL;
        if (group[i] != mine || taken[i])
            continue;
        if (type == BACKEND_LAYER_CONVOLUTION2D || type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D ||
            type == BACKEND_LAYER_FULLY_CONNECTED) {
            k = fuse(g, i, taken, group, fin, &fout, &flast, &status);
            if (status != BACKEND_STATUS_OK)
                goto out_of_memory;
        }
        if (k != NULL) {
            /* placed where its last layer is: every tensor it reads exists by then */
            for (uint32_t m = 0; m < k->num_layer_ids; m++)
                for (uint32_t q = i; q <= flast; q++)
                    if (g->layers[q]->id == k->layer_ids[m])
                        taken[q] = 1;
            Step *step = &p->steps[p->num_steps++];
            step->fused = &k->base;
            step->record.kind = STEP_FUSED;
            step->record.num_inputs = k->num_inputs;
            for (uint32_t j = 0; j < k->num_inputs; j++)
                step->record.inputs[j] = fin[j];   /* tensors for now, slots below */
            step->record.output = fout;
            step->record.layer_id = flast;           /* sort key for now */
        } else {
            Step *step = &p->steps[p->num_steps++];
            taken[i] = 1;
            step->record.kind = STEP_LAYER;
            step->record.layer_type = type;
            step->record.num_inputs = l->description->num_inputs;
            for (uint32_t j = 0; j < l->description->num_inputs; j++) {
                step->record.inputs[j] = l->input_tensors[j];
                step->record.input_infos[j] = l->description->inputs[j];
            }
            step->record.output = l->output_tensors[0];
            step->record.output_info = l->description->outputs[0];
            step->record.layer_id = i;               /* sort key for now */
            if (l->description->descriptor != NULL) {
                size_t size = type == BACKEND_LAYER_ACTIVATION ? sizeof(BackendActivationDescriptor)
                              : type == BACKEND_LAYER_FULLY_CONNECTED ? sizeof(BackendFullyConnectedDescriptor)
                              : type == BACKEND_LAYER_CONVOLUTION2D || type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D
                                  ? sizeof(BackendConvolution2dDescriptor)
                              : type == BACKEND_LAYER_POOLING2D ? sizeof(BackendPooling2dDescriptor)
                              : type == BACKEND_LAYER_SOFTMAX ? sizeof(BackendSoftmaxDescriptor) : 0;
                memcpy(&step->record.descriptor, l->description->descriptor, size);
            }
            status = ref_create_workload(l->description, &step->workload, message, sizeof message);
            if (status != BACKEND_STATUS_OK)
                goto failed;
        }
    }
    /* execution order: by the position of each step's last layer (insertion sort, stable) */
    for (uint32_t a = 1; a < p->num_steps; a++)
        for (uint32_t b = a; b > 0 && p->steps[b - 1].record.layer_id > p->steps[b].record.layer_id; b--) {
            Step tmp = p->steps[b];
            p->steps[b] = p->steps[b - 1];
            p->steps[b - 1] = tmp;
        }
    for (uint32_t s = 0; s < p->num_steps; s++) {
        StepRecord *r = &p->steps[s].record;
        uint32_t layer = (uint32_t)r->layer_id;
        r->layer_id = r->kind == STEP_LAYER ? g->layers[layer]->id : 0;
        for (uint32_t j = 0; j < r->num_inputs; j++) {
            r->inputs[j] = slot_of(p, slot_of_tensor, g, r->inputs[j], boundary_out, boundary_in);
            last[r->inputs[j]] = s;
        }
        r->output = slot_of(p, slot_of_tensor, g, r->output, boundary_out, boundary_in);
        first[r->output] = s;
        if (last[r->output] < s)
            last[r->output] = s;
    }
    p->arena_bytes = plan_arena(p->slots, first, last, p->num_slots);
    if (p->arena_bytes == UINT64_MAX)
        goto out_of_memory;
    status = program_finish(p, message, sizeof message);
    if (status != BACKEND_STATUS_OK)
        goto failed;
    free(slot_of_tensor); free(boundary_in); free(boundary_out); free(taken); free(produced);
    free(first); free(last);
    /* Ownership of p passes to the runtime with this call. */
    views->add_substitution(views, ids, num_ids, in_list, num_in, out_list, num_out, &p->base);
    free(ids); free(in_list); free(out_list);
    return BACKEND_STATUS_OK;

out_of_memory:
    status = BACKEND_STATUS_OUT_OF_MEMORY;
failed:
    if (p != NULL)
        program_destroy(&p->base);
    free(slot_of_tensor); free(boundary_in); free(boundary_out); free(in_list); free(out_list);
    free(ids); free(taken); free(produced); free(first); free(last);
    return status;
}

BackendStatus ref_optimize_subgraph(const BackendInstance *self, const BackendSubgraph *subgraph,
                                    BackendOptimizationViews *views, char *message, size_t message_size)
{
    const BackendSubgraph *g = subgraph;
    int32_t *group, *levels, groups = 0;
    BackendStatus status = BACKEND_STATUS_OK;
    (void)self;
    if (subgraph == NULL || views == NULL || subgraph->struct_size < BACKEND_SUBGRAPH_SIZE_1_2 ||
        views->struct_size < BACKEND_OPTIMIZATION_VIEWS_SIZE_1_2)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "malformed sub-graph or views");
    if (subgraph->num_layers > MAX_LAYERS)
        return ref_fail(message, message_size, BACKEND_STATUS_UNSUPPORTED,
                        "sub-graphs of more than %d layers", MAX_LAYERS);
    group = calloc(g->num_layers ? g->num_layers : 1, sizeof *group);
    levels = calloc(g->num_layers ? g->num_layers : 1, sizeof *levels);
    if (group == NULL || levels == NULL) {
        free(group);
        free(levels);
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    /* A layer ref_check_layer() refuses is failed (group -1). The others are grouped by how many
       failed layers lie on the longest path to them (their level): paths never lead to a lower
       level, so every group is convex and no two groups need each other. Usually there is one. */
    for (uint32_t i = 0; i < g->num_layers; i++) {
        const BackendSubgraphLayer *layer = g->layers[i];
        char reason[256];
        int32_t level = 0;
        for (uint32_t q = 0; q < i; q++)
            for (uint32_t j = 0; j < layer->description->num_inputs; j++)
                if (layer->input_tensors[j] == g->layers[q]->output_tensors[0]) {
                    int32_t through = levels[q] + (group[q] < 0);
                    if (through > level)
                        level = through;
                }
        levels[i] = level;
        if (ref_check_layer(layer->description, reason, sizeof reason) != BACKEND_STATUS_OK) {
            views->add_failed(views, layer->id, reason);
            group[i] = -1;
        } else {
            group[i] = level;
            if (level + 1 > groups)
                groups = level + 1;
        }
    }
    for (int32_t k = 0; k < groups && status == BACKEND_STATUS_OK; k++) {
        int any = 0;
        for (uint32_t i = 0; i < g->num_layers; i++)
            any |= group[i] == k;
        if (any)
            status = compile_group(g, group, k, views);
    }
    free(levels);
    free(group);
    if (status != BACKEND_STATUS_OK)
        return ref_fail(message, message_size, status, "could not compile a sub-graph");
    return BACKEND_STATUS_OK;
}

/* ---- the program's serialized form -----------------------------------------------------------
 * A ProgramHeader, the slots, each step's StepRecord followed (fused steps) by the fused
 * kernel's own serialized bytes, then the constants the slots name. Read back only by this very
 * build and checked field by field: every slot bounded, every step checked as the layer or
 * kernel it is (ref_create_workload() runs ref_check_layer() on the description), every slot a
 * step uses of exactly the size the step needs; the arena is planned again on load. */

#define PROGRAM_MAGIC 0x47504b52u       /* "RKPG" */
#define PROGRAM_VERSION 1u
#define MAX_SLOTS (4 * MAX_LAYERS + 4)

typedef struct ProgramHeader {
    uint32_t magic, version;
    uint32_t num_inputs, num_outputs, num_slots, num_steps;
    uint64_t step_record_size, constant_bytes;
} ProgramHeader;

static BackendStatus program_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                       uint64_t *size, char *message, size_t message_size)
{
    Program *p = (Program *)self;
    ProgramHeader header = { PROGRAM_MAGIC, PROGRAM_VERSION, p->num_inputs, p->num_outputs,
                             p->num_slots, p->num_steps, sizeof(StepRecord), 0 };
    uint64_t needed, constant_offset = 0;
    char *out = buffer;
    if (size == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, "NULL size");
    for (uint32_t s = 0; s < p->num_slots; s++)
        if (p->slots[s].kind == SLOT_CONSTANT)
            header.constant_bytes += p->slots[s].bytes;
    needed = sizeof header + (uint64_t)p->num_slots * sizeof(Slot) + header.constant_bytes;
    for (uint32_t i = 0; i < p->num_steps; i++) {
        Step *step = &p->steps[i];
        step->record.payload_bytes = 0;
        if (step->fused != NULL)
            step->fused->serialize(step->fused, NULL, 0, &step->record.payload_bytes, NULL, 0);
        needed += sizeof(StepRecord) + step->record.payload_bytes;
    }
    *size = needed;
    if (buffer == NULL || capacity < needed)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY,
                        "%llu bytes are needed", (unsigned long long)needed);
    memcpy(out, &header, sizeof header);
    out += sizeof header;
    for (uint32_t s = 0; s < p->num_slots; s++) {
        Slot slot = p->slots[s];
        if (slot.kind == SLOT_CONSTANT) {
            slot.offset = constant_offset;
            constant_offset += slot.bytes;
        }
        memcpy(out, &slot, sizeof slot);
        out += sizeof slot;
    }
    for (uint32_t i = 0; i < p->num_steps; i++) {
        Step *step = &p->steps[i];
        uint64_t written = 0;
        memcpy(out, &step->record, sizeof step->record);
        out += sizeof step->record;
        if (step->fused != NULL) {
            BackendStatus status = step->fused->serialize(step->fused, out, step->record.payload_bytes,
                                                          &written, message, message_size);
            if (status != BACKEND_STATUS_OK)
                return status;
            out += written;
        }
    }
    for (uint32_t s = 0; s < p->num_slots; s++)
        if (p->slots[s].kind == SLOT_CONSTANT) {
            memcpy(out, p->constants[s], p->slots[s].bytes);
            out += p->slots[s].bytes;
        }
    return BACKEND_STATUS_OK;
}

/* What is wrong with step `step` of a program read from bytes (its kernel or workload already
   made), or NULL. */
static const char *check_step(const Program *p, const Step *step, const char *written)
{
    const StepRecord *r = &step->record;
    const Slot *out = &p->slots[r->output];
    if (out->kind != SLOT_ARENA && out->kind != SLOT_OUTPUT)
        return "a step writes a tensor that is not its own";
    for (uint32_t j = 0; j < r->num_inputs; j++) {
        if (r->inputs[j] == r->output)
            return "a step reads the tensor it writes";
        if (p->slots[r->inputs[j]].kind == SLOT_ARENA && !written[r->inputs[j]])
            return "a step reads a tensor no earlier step writes";
    }
    if (step->fused != NULL) {
        const FusedKernel *k = (const FusedKernel *)step->fused;
        if (k->num_inputs != r->num_inputs || out->bytes != k->output_bytes)
            return "a fused step does not match its kernel";
        for (int i = 0; i < OPERAND_COUNT; i++)
            if (k->operands[i].input >= 0 &&
                p->slots[r->inputs[k->operands[i].input]].bytes != k->operands[i].bytes)
                return "a fused step's operand sizes do not match its kernel";
        return NULL;
    }
    for (uint32_t j = 0; j < r->num_inputs; j++)
        if (p->slots[r->inputs[j]].bytes != (uint64_t)elements(&r->input_infos[j]) * sizeof(float))
            return "a layer's input size does not follow from its description";
    if (out->bytes != (uint64_t)elements(&r->output_info) * sizeof(float))
        return "a layer's output size does not follow from its description";
    return NULL;
}

static BackendStatus load_program(const void *data, uint64_t size, BackendCompiledSubgraph **compiled,
                                  char *message, size_t message_size)
{
    const char *in = data, *problem = NULL;
    ProgramHeader header;
    Program *p;
    uint64_t rest, constant_end = 0;
    uint32_t *first = NULL, *last = NULL;
    char *written = NULL;
    char detail[256] = "";

#define REFUSE(why) do { problem = (why); goto refused; } while (0)
    memcpy(&header, in, sizeof header);
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    if (header.version != PROGRAM_VERSION || header.step_record_size != sizeof(StepRecord))
        REFUSE("not a compiled sub-graph of this reference backend build");
    if (header.num_steps < 1 || header.num_steps > MAX_LAYERS || header.num_slots > MAX_SLOTS ||
        header.num_inputs > header.num_slots || header.num_outputs > header.num_slots ||
        header.constant_bytes > MAX_ARENA_BYTES)
        REFUSE("bad counts");
    p->num_inputs = header.num_inputs;
    p->num_outputs = header.num_outputs;
    rest = size - sizeof header;
    in += sizeof header;
    if (rest < (uint64_t)header.num_slots * sizeof(Slot))
        REFUSE("too few bytes for the slots");
    p->slots = calloc(header.num_slots ? header.num_slots : 1, sizeof *p->slots);
    p->constants = calloc(header.num_slots ? header.num_slots : 1, sizeof *p->constants);
    p->steps = calloc(header.num_steps, sizeof *p->steps);
    first = calloc(header.num_slots ? header.num_slots : 1, sizeof *first);
    last = calloc(header.num_slots ? header.num_slots : 1, sizeof *last);
    written = calloc(header.num_slots ? header.num_slots : 1, 1);
    if (p->slots == NULL || p->constants == NULL || p->steps == NULL || first == NULL ||
        last == NULL || written == NULL)
        REFUSE("out of memory");
    memcpy(p->slots, in, (size_t)header.num_slots * sizeof(Slot));
    p->num_slots = header.num_slots;
    in += (size_t)header.num_slots * sizeof(Slot);
    rest -= (uint64_t)header.num_slots * sizeof(Slot);
    for (uint32_t s = 0; s < p->num_slots; s++) {
        Slot *slot = &p->slots[s];
        if (slot->bytes > MAX_OPERAND_BYTES || slot->bytes % sizeof(float) != 0)
            REFUSE("bad slot size");
        if (slot->kind == SLOT_INPUT ? slot->index >= p->num_inputs
            : slot->kind == SLOT_OUTPUT ? slot->index >= p->num_outputs
            : slot->kind == SLOT_CONSTANT ? slot->offset > header.constant_bytes ||
                                                slot->bytes > header.constant_bytes - slot->offset
            : slot->kind != SLOT_ARENA)
            REFUSE("bad slot");
        if (slot->kind == SLOT_CONSTANT && slot->offset + slot->bytes > constant_end)
            constant_end = slot->offset + slot->bytes;
        if (slot->kind == SLOT_ARENA)
            slot->offset = 0;                /* planned again below */
    }
    for (uint32_t i = 0; i < header.num_steps; i++) {
        Step *step = &p->steps[i];
        StepRecord *r = &step->record;
        BackendStatus status;
        if (rest < sizeof *r)
            REFUSE("too few bytes for the steps");
        memcpy(r, in, sizeof *r);
        in += sizeof *r;
        rest -= sizeof *r;
        p->num_steps = i + 1;
        if (r->num_inputs > MAX_STEP_INPUTS || r->output >= p->num_slots)
            REFUSE("bad step");
        for (uint32_t j = 0; j < r->num_inputs; j++)
            if (r->inputs[j] >= p->num_slots)
                REFUSE("bad step");
        if (r->kind == STEP_FUSED) {
            if (r->payload_bytes > rest)
                REFUSE("a fused step runs past the end");
            status = load_fused(in, r->payload_bytes, &step->fused, detail, sizeof detail);
            if (status != BACKEND_STATUS_OK)
                REFUSE(detail);
            in += r->payload_bytes;
            rest -= r->payload_bytes;
        } else if (r->kind == STEP_LAYER) {
            BackendLayerDescription d = {
                .struct_size = (uint32_t)sizeof d, .layer_type = r->layer_type,
                .num_inputs = r->num_inputs, .num_outputs = 1, .inputs = r->input_infos,
                .outputs = &r->output_info, .descriptor = &r->descriptor,
            };
            if (r->payload_bytes != 0 || r->num_inputs > 3)
                REFUSE("bad step");
            status = ref_create_workload(&d, &step->workload, detail, sizeof detail);
            if (status != BACKEND_STATUS_OK)
                REFUSE(detail);
        } else {
            REFUSE("unknown step kind");
        }
        problem = check_step(p, step, written);
        if (problem != NULL)
            goto refused;
        for (uint32_t j = 0; j < r->num_inputs; j++)
            last[r->inputs[j]] = i;
        first[r->output] = i;
        if (last[r->output] < i)
            last[r->output] = i;
        written[r->output] = 1;
    }
    if (rest != header.constant_bytes || constant_end > header.constant_bytes)
        REFUSE("the constant data does not have the size the slots need");
    p->owned = malloc(header.constant_bytes ? header.constant_bytes : 1);
    if (p->owned == NULL)
        REFUSE("out of memory");
    memcpy(p->owned, in, header.constant_bytes);
    for (uint32_t s = 0; s < p->num_slots; s++)
        if (p->slots[s].kind == SLOT_CONSTANT)
            p->constants[s] = (const char *)p->owned + p->slots[s].offset;
    p->arena_bytes = plan_arena(p->slots, first, last, p->num_slots);
    if (p->arena_bytes == UINT64_MAX || program_finish(p, detail, sizeof detail) != BACKEND_STATUS_OK)
        REFUSE("out of memory");
    free(first);
    free(last);
    free(written);
    *compiled = &p->base;
    return BACKEND_STATUS_OK;
#undef REFUSE

refused:
    free(first);
    free(last);
    free(written);
    program_destroy(&p->base);
    return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                    "compiled sub-graph bytes: %s", problem);
}

BackendStatus ref_load_compiled_subgraph(const BackendInstance *self, const void *data, uint64_t size,
                                         BackendCompiledSubgraph **compiled, char *message,
                                         size_t message_size)
{
    uint32_t magic;
    (void)self;
    if (compiled == NULL || (data == NULL && size != 0))
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT, "NULL argument");
    if (size >= sizeof(ProgramHeader)) {
        memcpy(&magic, data, sizeof magic);
        if (magic == PROGRAM_MAGIC)
            return load_program(data, size, compiled, message, message_size);
    }
    return load_fused(data, size, compiled, message, message_size);
}
