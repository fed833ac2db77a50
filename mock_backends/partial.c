/* Not a defect: a small, correct backend that takes only part of a network, to show a network
   split across two backends with fallback (rules 12.1-12.4).

   is_layer_supported accepts Convolution2d (not grouped) and the Activation functions relu,
   bounded_relu and leaky_relu (sigmoid, tanh and those of Backend API 1.3 are declined with a
   reason). Its optimizer replaces each
   Convolution2d whose weights (and bias) are constants, together with the Activation that
   alone reads its output, by one compiled kernel (a direct convolution with the activation in
   its epilogue). It fails what it cannot take: a convolution whose weights are not constants,
   and an Activation that does not follow one of its convolutions. Failed layers go to the
   next backend of the preference list. It has no workloads of its own. */
#define MOCK_BACKEND_ID "MockPartial"
#define MOCK_NO_BACKEND_FACTORY
#include <string.h>

#include "skeleton.h"

static BackendStatus say(char *message, size_t size, BackendStatus status, const char *text)
{
    if (message != NULL && size > 0)
        snprintf(message, size, "%s", text);
    return status;
}

static BackendStatus partial_is_layer_supported(const BackendInstance *self,
                                                const BackendLayerDescription *layer,
                                                char *message, size_t size)
{
    (void)self;
    if (layer == NULL || layer->struct_size < BACKEND_LAYER_DESCRIPTION_SIZE_1_1)
        return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "malformed layer description");
    if (layer->layer_type == BACKEND_LAYER_CONVOLUTION2D) {
        /* groups, appended in Backend API 1.3, is read only where the caller's struct has it */
        const BackendConvolution2dDescriptor *d = layer->descriptor;
        if (d != NULL && BACKEND_STRUCT_HAS(BackendConvolution2dDescriptor, d, groups) && d->groups != 1)
            return say(message, size, BACKEND_STATUS_UNSUPPORTED,
                       "MockPartial runs no grouped convolution");
        return BACKEND_STATUS_OK;
    }
    if (layer->layer_type == BACKEND_LAYER_ACTIVATION && layer->descriptor != NULL) {
        uint32_t f = ((const BackendActivationDescriptor *)layer->descriptor)->function;
        if (f == BACKEND_ACTIVATION_RELU || f == BACKEND_ACTIVATION_BOUNDED_RELU ||
            f == BACKEND_ACTIVATION_LEAKY_RELU)
            return BACKEND_STATUS_OK;
        return say(message, size, BACKEND_STATUS_UNSUPPORTED,
                   "MockPartial has no sigmoid or tanh");
    }
    return say(message, size, BACKEND_STATUS_UNSUPPORTED,
               "MockPartial runs only Convolution2d and Activation");
}

/* ---- the compiled kernel: convolution, then the activation on each output value ---------- */

typedef struct ConvActivation {
    BackendCompiledSubgraph base;
    BackendTensorInfo x, w, y;
    BackendConvolution2dDescriptor conv;
    const float *weights, *bias;        /* constants: the runtime keeps them valid */
    int has_activation;
    BackendActivationDescriptor activation;
} ConvActivation;

static float activate(const ConvActivation *k, float v)
{
    if (!k->has_activation)
        return v;
    switch (k->activation.function) {
    case BACKEND_ACTIVATION_RELU:
        return v > 0 ? v : 0;
    case BACKEND_ACTIVATION_BOUNDED_RELU:
        v = v < k->activation.b ? k->activation.b : v;
        return v > k->activation.a ? k->activation.a : v;
    default: /* leaky relu */
        return v > 0 ? v : k->activation.a * v;
    }
}

static BackendStatus conv_activation_execute(BackendCompiledSubgraph *self,
                                             const BackendBuffer *inputs, uint32_t num_inputs,
                                             const BackendBuffer *outputs, uint32_t num_outputs,
                                             char *message, size_t size)
{
    const ConvActivation *k = (const ConvActivation *)self;
    const int64_t *xd = k->x.dimensions, *wd = k->w.dimensions, *yd = k->y.dimensions;
    uint64_t x_bytes = (uint64_t)(xd[0] * xd[1] * xd[2] * xd[3]) * sizeof(float);
    uint64_t y_bytes = (uint64_t)(yd[0] * yd[1] * yd[2] * yd[3]) * sizeof(float);
    const float *x;
    float *y;
    if (num_inputs != 1 || num_outputs > 1 || inputs[0].size_bytes < x_bytes ||
        (num_outputs == 1 && outputs[0].size_bytes < y_bytes))
        return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT,
                   "the convolution takes one input and writes at most one output of its shapes");
    if (num_outputs == 0)
        return BACKEND_STATUS_OK;
    x = inputs[0].data;
    y = outputs[0].data;
    for (int64_t n = 0; n < yd[0]; n++)
        for (int64_t oy = 0; oy < yd[1]; oy++)
            for (int64_t ox = 0; ox < yd[2]; ox++)
                for (int64_t o = 0; o < yd[3]; o++) {
                    float acc = k->bias ? k->bias[o] : 0.0f;
                    for (int64_t ky = 0; ky < wd[1]; ky++) {
                        int64_t iy = oy * k->conv.stride_y + ky * k->conv.dilation_y - k->conv.pad_top;
                        if (iy < 0 || iy >= xd[1])
                            continue;
                        for (int64_t kx = 0; kx < wd[2]; kx++) {
                            int64_t ix = ox * k->conv.stride_x + kx * k->conv.dilation_x - k->conv.pad_left;
                            if (ix < 0 || ix >= xd[2])
                                continue;
                            const float *in = x + ((n * xd[1] + iy) * xd[2] + ix) * xd[3];
                            const float *f = k->weights + ((o * wd[1] + ky) * wd[2] + kx) * wd[3];
                            for (int64_t c = 0; c < xd[3]; c++)
                                acc += in[c] * f[c];
                        }
                    }
                    y[((n * yd[1] + oy) * yd[2] + ox) * yd[3] + o] = activate(k, acc);
                }
    return BACKEND_STATUS_OK;
}

static void conv_activation_destroy(BackendCompiledSubgraph *self)
{
    free(self);
}

/* ---- the optimizer --------------------------------------------------------------------- */

/* Index in the sub-graph of the only layer reading tensor `t`, or -1 (none, several, or the
   tensor is also a sub-graph output). */
static int64_t only_reader(const BackendSubgraph *g, uint32_t t)
{
    int64_t reader = -1;
    for (uint32_t o = 0; o < g->num_outputs; o++)
        if (g->outputs[o] == t)
            return -1;
    for (uint32_t i = 0; i < g->num_layers; i++)
        for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++)
            if (g->layers[i]->input_tensors[j] == t) {
                if (reader >= 0 && reader != i)
                    return -1;
                reader = i;
            }
    return reader;
}

/* Whether tensor `t` is read by any layer outside `a` and `b`, or is a sub-graph output. */
static int read_outside(const BackendSubgraph *g, uint32_t t, uint32_t a, uint32_t b)
{
    for (uint32_t o = 0; o < g->num_outputs; o++)
        if (g->outputs[o] == t)
            return 1;
    for (uint32_t i = 0; i < g->num_layers; i++)
        if (i != a && i != b)
            for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++)
                if (g->layers[i]->input_tensors[j] == t)
                    return 1;
    return 0;
}

static BackendStatus partial_optimize(const BackendInstance *self, const BackendSubgraph *g,
                                      BackendOptimizationViews *views, char *message, size_t size)
{
    char *taken = calloc(g->num_layers, 1);   /* a sub-graph has any number of layers */
    (void)self;
    if (taken == NULL)
        return say(message, size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < g->num_layers; i++) {
        const BackendSubgraphLayer *layer = g->layers[i];
        const BackendLayerDescription *d = layer->description;
        const BackendConvolution2dDescriptor *conv = d->descriptor;
        uint32_t weights = layer->input_tensors[1], out = layer->output_tensors[0];
        uint64_t ids[2] = { layer->id, 0 };
        uint32_t count = 1, inputs[1] = { layer->input_tensors[0] }, produced = out;
        int64_t next;
        ConvActivation *k;
        if (taken[i] || d->layer_type != BACKEND_LAYER_CONVOLUTION2D)
            continue;
        taken[i] = 1;
        if (g->tensors[weights]->kind != BACKEND_SUBGRAPH_TENSOR_CONSTANT ||
            (conv->bias_enabled &&
             g->tensors[layer->input_tensors[2]]->kind != BACKEND_SUBGRAPH_TENSOR_CONSTANT)) {
            views->add_failed(views, layer->id, "MockPartial compiles only constant weights");
            continue;
        }
        k = calloc(1, sizeof *k);
        if (k == NULL) {
            free(taken);
            return say(message, size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
        }
        k->base.struct_size = (uint32_t)sizeof k->base;
        k->base.execute = conv_activation_execute;
        k->base.destroy = conv_activation_destroy;
        k->x = d->inputs[0];
        k->w = d->inputs[1];
        k->y = d->outputs[0];
        k->conv = *conv;
        k->weights = g->tensors[weights]->data;
        k->bias = conv->bias_enabled ? g->tensors[layer->input_tensors[2]]->data : NULL;
        next = only_reader(g, out);
        if (next >= 0 && g->layers[next]->description->layer_type == BACKEND_LAYER_ACTIVATION &&
            !taken[next]) {
            taken[next] = 1;
            k->has_activation = 1;
            k->activation = *(const BackendActivationDescriptor *)g->layers[next]->description->descriptor;
            ids[count++] = g->layers[next]->id;
            produced = g->layers[next]->output_tensors[0];
        }
        views->add_substitution(views, ids, count, inputs, 1, &produced,
                                read_outside(g, produced, i, count == 2 ? (uint32_t)next : i) ? 1 : 0,
                                &k->base);
    }
    for (uint32_t i = 0; i < g->num_layers; i++)
        if (!taken[i])
            views->add_failed(views, g->layers[i]->id,
                              "MockPartial runs an Activation only right after its own convolution");
    free(taken);
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL) {
        instance->is_layer_supported = partial_is_layer_supported;
        instance->optimize_subgraph = partial_optimize;
    }
    return instance;
}
