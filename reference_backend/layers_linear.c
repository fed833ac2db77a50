/*
 * Matrix products: FullyConnected and MatMul.
 */
#include "layers_internal.h"

/* ---- FullyConnected ----------------------------------------------------------------------- */

static BackendStatus check_fully_connected(const BackendLayerDescription *layer, const RefDescriptor *d,
                                           char *message, size_t message_size)
{
    const BackendFullyConnectedDescriptor *fc = &d->fully_connected;
    const BackendTensorInfo *x = &layer->inputs[0], *w = &layer->inputs[1];
    int64_t k, m, out[2];
    TRY(ref_expect_inputs(layer, fc->bias_enabled ? 3 : 2, message, message_size));
    TRY(ref_expect_rank(x, 2, "FullyConnected input", message, message_size));
    TRY(ref_expect_rank(w, 2, "FullyConnected weights", message, message_size));
    k = x->dimensions[1];
    m = fc->transpose_weights ? w->dimensions[0] : w->dimensions[1];
    if ((fc->transpose_weights ? w->dimensions[1] : w->dimensions[0]) != k)
        return INVALID("weights %s must have %lld input features (input is [%lld, %lld])",
                       fc->transpose_weights ? "[M, K]" : "[K, M]", (long long)k,
                       (long long)x->dimensions[0], (long long)k);
    if (fc->bias_enabled) {
        TRY(ref_expect_rank(&layer->inputs[2], 1, "FullyConnected bias", message, message_size));
        if (layer->inputs[2].dimensions[0] != m)
            return INVALID("bias has %lld elements, the layer has %lld outputs",
                           (long long)layer->inputs[2].dimensions[0], (long long)m);
    }
    out[0] = x->dimensions[0];
    out[1] = m;
    return ref_expect_output(layer, out, 2, message, message_size);
}

static int run_fully_connected(const RefWorkload *w, const float *const *in, float *out)
{
    const BackendFullyConnectedDescriptor *fc = &w->d.fully_connected;
    return rk_fully_connected(in[0], in[1], fc->bias_enabled ? in[2] : NULL, out,
                              w->inputs[0].dimensions[0], w->inputs[0].dimensions[1],
                              w->output.dimensions[1], (int)fc->transpose_weights);
}

const RefLayerEntry ref_layer_fully_connected = {
    .name = "FullyConnected", .min_inputs = 2, .max_inputs = 3,
    .descriptor_min_size = BACKEND_FULLY_CONNECTED_DESCRIPTOR_SIZE_1_1,
    .descriptor_size = sizeof(BackendFullyConnectedDescriptor),
    .check = check_fully_connected, .run = run_fully_connected,
};

/* ---- MatMul ------------------------------------------------------------------------------- */

const RefLayerEntry ref_layer_mat_mul = {
    .name = "MatMul", .min_inputs = 2, .max_inputs = 2, .since_1_3 = 1,
    .check = ref_check_unsupported,
};
