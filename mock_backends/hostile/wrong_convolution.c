/* Defect: runs Convolution2d, but applies the padding one row and one column off (it reads
   input pixel (y - pad + 1, x - pad + 1) where the definition reads (y - pad, x - pad)).
   Breaks conformance LAYER-1 (claimed layers match the reference within tolerance) -> FAIL. */
#include <string.h>

#define MOCK_BACKEND_ID "MockWrongConvolution"
#define MOCK_NO_BACKEND_FACTORY
#include "../skeleton.h"

typedef struct ConvWorkload {
    BackendWorkload base;
    BackendTensorInfo x, w, y;
    BackendConvolution2dDescriptor d;
} ConvWorkload;

static int is_plain_convolution(const BackendLayerDescription *layer)
{
    const BackendConvolution2dDescriptor *d = layer->descriptor;
    return layer->layer_type == BACKEND_LAYER_CONVOLUTION2D && layer->num_inputs == 2 &&
           d != NULL && !d->bias_enabled && d->dilation_x == 1 && d->dilation_y == 1 &&
           (!BACKEND_STRUCT_HAS(BackendConvolution2dDescriptor, d, groups) || d->groups == 1) &&
           d->stride_x >= 1 && d->stride_y >= 1 &&
           layer->inputs[0].num_dimensions == 4 && layer->inputs[1].num_dimensions == 4 &&
           layer->outputs[0].num_dimensions == 4;
}

static BackendStatus conv_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                    char *message, size_t message_size)
{
    (void)self;
    if (is_plain_convolution(layer))
        return BACKEND_STATUS_OK;
    snprintf(message, message_size, "only Convolution2d without bias, dilation or groups");
    return BACKEND_STATUS_UNSUPPORTED;
}

static BackendStatus conv_execute(BackendWorkload *self, const BackendBuffer *inputs, uint32_t num_inputs,
                                  const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                  size_t message_size)
{
    const ConvWorkload *c = (const ConvWorkload *)self;
    const float *x = inputs[0].data, *w = inputs[1].data;
    float *y = outputs[0].data;
    int64_t H = c->x.dimensions[1], W = c->x.dimensions[2], C = c->x.dimensions[3];
    int64_t O = c->w.dimensions[0], KH = c->w.dimensions[1], KW = c->w.dimensions[2];
    (void)num_inputs, (void)num_outputs, (void)message, (void)message_size;
    for (int64_t n = 0; n < c->y.dimensions[0]; n++)
        for (int64_t oy = 0; oy < c->y.dimensions[1]; oy++)
            for (int64_t ox = 0; ox < c->y.dimensions[2]; ox++)
                for (int64_t o = 0; o < O; o++) {
                    float sum = 0;
                    for (int64_t i = 0; i < KH; i++)
                        for (int64_t j = 0; j < KW; j++) {
                            int64_t iy = oy * c->d.stride_y + i - c->d.pad_top + 1; /* the defect */
                            int64_t ix = ox * c->d.stride_x + j - c->d.pad_left + 1;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                                continue;
                            for (int64_t ch = 0; ch < C; ch++)
                                sum += x[((n * H + iy) * W + ix) * C + ch] * w[((o * KH + i) * KW + j) * C + ch];
                        }
                    y[((n * c->y.dimensions[1] + oy) * c->y.dimensions[2] + ox) * O + o] = sum;
                }
    return BACKEND_STATUS_OK;
}

static void conv_destroy(BackendWorkload *self)
{
    free(self);
}

static BackendStatus conv_create(BackendWorkloadFactory *self, const BackendLayerDescription *layer,
                                 BackendWorkload **workload, char *message, size_t message_size)
{
    ConvWorkload *c;
    (void)self;
    *workload = NULL;
    if (!is_plain_convolution(layer)) {
        snprintf(message, message_size, "only Convolution2d without bias, dilation or groups");
        return BACKEND_STATUS_UNSUPPORTED;
    }
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return BACKEND_STATUS_OUT_OF_MEMORY;
    c->base.struct_size = (uint32_t)sizeof c->base;
    c->base.execute = conv_execute;
    c->base.destroy = conv_destroy;
    c->x = layer->inputs[0];
    c->w = layer->inputs[1];
    c->y = layer->outputs[0];
    memcpy(&c->d, layer->descriptor, sizeof c->d);
    *workload = &c->base;
    return BACKEND_STATUS_OK;
}

static BackendStatus conv_factory(const BackendInstance *self, BackendMemoryManager *manager,
                                  BackendWorkloadFactory **factory, char *message, size_t size)
{
    BackendStatus status = mock_create_workload_factory(self, manager, factory, message, size);
    if (status == BACKEND_STATUS_OK)
        (*factory)->create_workload = conv_create;
    return status;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL) {
        instance->is_layer_supported = conv_supported;
        instance->create_workload_factory = conv_factory;
    }
    return instance;
}
