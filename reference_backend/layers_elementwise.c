/*
 * Element-wise layers: Activation, the two-input layers with NumPy broadcasting (Addition,
 * Multiplication, Subtraction, Division, Maximum, Minimum, Power), ElementwiseUnary and Prelu.
 */
#include <math.h>
#include <string.h>

#include "layers_internal.h"

/* ---- Activation --------------------------------------------------------------------------- */

static BackendStatus check_activation(const BackendLayerDescription *layer, const RefDescriptor *d,
                                      char *message, size_t message_size)
{
    const BackendActivationDescriptor *a = &d->activation;
    if (a->function >= RK_ACTIVATION_COUNT)
        return UNSUPPORTED("activation function %u is not supported", a->function);
    if (!isfinite(a->a) || !isfinite(a->b))
        return INVALID("activation parameters a and b must be finite");
    if (a->function == BACKEND_ACTIVATION_CELU && a->a == 0.0f)
        return INVALID("celu divides by its parameter a, which is 0");
    return ref_expect_output_like(layer, 0, message, message_size);
}

static int run_activation(const RefWorkload *w, const float *const *in, float *out)
{
    const BackendActivationDescriptor *a = &w->d.activation;
    return rk_activation(in[0], out, ref_elements(&w->output), (int)a->function, a->a, a->b);
}

const RefLayerEntry ref_layer_activation = {
    .name = "Activation", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_ACTIVATION_DESCRIPTOR_SIZE_1_1,
    .descriptor_size = sizeof(BackendActivationDescriptor),
    .check = check_activation, .run = run_activation,
};

/* ---- two inputs, broadcast ---------------------------------------------------------------- */

static BackendStatus check_binary(const BackendLayerDescription *layer, const RefDescriptor *d,
                                  char *message, size_t message_size)
{
    int64_t out[BACKEND_MAX_DIMENSIONS];
    uint32_t rank;
    (void)d;
    TRY(ref_broadcast(&layer->inputs[0], &layer->inputs[1], out, &rank, message, message_size));
    return ref_expect_output(layer, out, rank, message, message_size);
}

static void prepare_binary(RefWorkload *w)
{
    ref_fill_broadcast(&w->g.binary, &w->inputs[0], &w->inputs[1], &w->output);
}

static const int BINARY_OPS[BACKEND_LAYER_TYPE_COUNT_1_3] = {
    [BACKEND_LAYER_ADDITION] = RK_ADD, [BACKEND_LAYER_MULTIPLICATION] = RK_MUL,
    [BACKEND_LAYER_SUBTRACTION] = RK_SUB, [BACKEND_LAYER_DIVISION] = RK_DIV,
    [BACKEND_LAYER_MAXIMUM] = RK_MAX, [BACKEND_LAYER_MINIMUM] = RK_MIN,
    [BACKEND_LAYER_POWER] = RK_POW, [BACKEND_LAYER_PRELU] = RK_PRELU,
};

static int run_binary(const RefWorkload *w, const float *const *in, float *out)
{
    const rk_broadcast *g = &w->g.binary;
    int op = BINARY_OPS[w->layer_type];
    if (g->rank == 0) {                 /* Addition and Multiplication of scalars (1.1) */
        out[0] = op == RK_ADD ? in[0][0] + in[1][0] : in[0][0] * in[1][0];
        return 0;
    }
    return rk_binary(op, in[0], g->a, in[1], g->b, out, g->out, g->rank);
}

#define BINARY_ENTRY(name_, since_1_3_)                                                        \
    {                                                                                          \
        .name = (name_), .min_inputs = 2, .max_inputs = 2, .since_1_3 = (since_1_3_),          \
        .check = check_binary, .prepare = prepare_binary, .run = run_binary,                   \
    }

const RefLayerEntry ref_layer_addition = BINARY_ENTRY("Addition", 0);
const RefLayerEntry ref_layer_multiplication = BINARY_ENTRY("Multiplication", 0);
const RefLayerEntry ref_layer_subtraction = BINARY_ENTRY("Subtraction", 1);
const RefLayerEntry ref_layer_division = BINARY_ENTRY("Division", 1);
const RefLayerEntry ref_layer_maximum = BINARY_ENTRY("Maximum", 1);
const RefLayerEntry ref_layer_minimum = BINARY_ENTRY("Minimum", 1);
const RefLayerEntry ref_layer_power = BINARY_ENTRY("Power", 1);

/* ---- ElementwiseUnary --------------------------------------------------------------------- */

static BackendStatus check_unary(const BackendLayerDescription *layer, const RefDescriptor *d,
                                 char *message, size_t message_size)
{
    if (d->unary.function >= RK_UNARY_COUNT)
        return UNSUPPORTED("element-wise function %u is not supported", d->unary.function);
    return ref_expect_output_like(layer, 0, message, message_size);
}

static int run_unary(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_unary(in[0], out, ref_elements(&w->output), (int)w->d.unary.function);
}

const RefLayerEntry ref_layer_elementwise_unary = {
    .name = "ElementwiseUnary", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_ELEMENTWISE_UNARY_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendElementwiseUnaryDescriptor), .since_1_3 = 1,
    .check = check_unary, .run = run_unary,
};

/* ---- Prelu -------------------------------------------------------------------------------- */

/* The slope broadcasts to x without changing its shape. */
static BackendStatus check_prelu(const BackendLayerDescription *layer, const RefDescriptor *d,
                                 char *message, size_t message_size)
{
    const BackendTensorInfo *x = &layer->inputs[0];
    int64_t out[BACKEND_MAX_DIMENSIONS];
    uint32_t rank;
    (void)d;
    TRY(ref_broadcast(x, &layer->inputs[1], out, &rank, message, message_size));
    if (rank != x->num_dimensions || memcmp(out, x->dimensions, rank * sizeof *out) != 0) {
        char sx[160], ss[160];
        ref_format_shape(x, sx, sizeof sx);
        ref_format_shape(&layer->inputs[1], ss, sizeof ss);
        return INVALID("the slope %s does not broadcast to the input %s without changing it", ss, sx);
    }
    return ref_expect_output_like(layer, 0, message, message_size);
}

const RefLayerEntry ref_layer_prelu = {
    .name = "Prelu", .min_inputs = 2, .max_inputs = 2, .since_1_3 = 1,
    .check = check_prelu, .prepare = prepare_binary, .run = run_binary,
};
