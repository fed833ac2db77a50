/*
 * The reference backend's sub-graph optimizer (Backend API 1.2).
 *
 * It fuses a Convolution2d, DepthwiseConvolution2d or FullyConnected layer with what alone
 * reads its output: an Activation, or an Addition of a residual of the output's shape
 * optionally followed by an Activation. The fused kernel adds the residual and applies the
 * activation in the epilogue of the convolution or GEMM, on each part of the output as soon as
 * it is final, so the intermediate tensors never exist. Every other layer is left untouched
 * (it runs as its own workload); a layer ref_check_layer() refuses is failed with its reason.
 *
 * A fused kernel reports one profiling event per execution naming the layers it replaces (their
 * debug handles) and a "macs" counter, and serializes to self-contained bytes (its geometry and
 * the constant operands it reads) that ref_load_compiled_subgraph() checks and loads again.
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

BackendStatus ref_load_compiled_subgraph(const BackendInstance *self, const void *data, uint64_t size,
                                         BackendCompiledSubgraph **compiled, char *message,
                                         size_t message_size)
{
    FormatHeader header;
    FusedKernel *k;
    const char *in = data, *problem;
    uint64_t rest, constants = 0, used = 0;
    (void)self;
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
    for (int m = 0; m < count; m++) {
        ids[m] = g->layers[members[m]]->id;
        k->layer_ids[m] = ids[m];
        taken[members[m]] = 1;
    }
    k->num_layer_ids = (uint32_t)count;
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
