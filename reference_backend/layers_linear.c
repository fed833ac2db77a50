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

/* NumPy's matmul: a 1-D a is a row [1, k], a 1-D b a column [k, 1] (and the dimension they add
   is dropped from the output); the leading dimensions broadcast. The plan's batch is the
   broadcast of the leading dimensions, with a stride of 0 where an operand repeats. */
static BackendStatus plan_mat_mul(const BackendTensorInfo *a, const BackendTensorInfo *b,
                                  rk_matmul_plan *p, int64_t *out, uint32_t *out_rank,
                                  char *message, size_t message_size)
{
    uint32_t ra = a->num_dimensions, rb = b->num_dimensions;
    uint32_t ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;
    int64_t k_b, a_matrix, b_matrix;
    uint32_t r = 0;
    p->m = ra == 1 ? 1 : a->dimensions[ra - 2];
    p->k = a->dimensions[ra - 1];
    k_b = rb == 1 ? b->dimensions[0] : b->dimensions[rb - 2];
    p->n = rb == 1 ? 1 : b->dimensions[rb - 1];
    if (p->k != k_b)
        return INVALID("MatMul: the inner dimensions %lld and %lld differ", (long long)p->k,
                       (long long)k_b);
    p->batch_rank = (int)(ba > bb ? ba : bb);
    a_matrix = p->m * p->k;
    b_matrix = p->k * p->n;
    for (int d = p->batch_rank - 1; d >= 0; d--) {
        int ia = d - (p->batch_rank - (int)ba), ib = d - (p->batch_rank - (int)bb);
        int64_t da = ia < 0 ? 1 : a->dimensions[ia], db = ib < 0 ? 1 : b->dimensions[ib];
        if (da != db && da != 1 && db != 1)
            return INVALID("MatMul: the leading dimensions %lld and %lld do not broadcast",
                           (long long)da, (long long)db);
        p->batch[d] = da > db ? da : db;
        p->a_stride[d] = da == 1 ? 0 : a_matrix;
        p->b_stride[d] = db == 1 ? 0 : b_matrix;
        a_matrix *= da;
        b_matrix *= db;
    }
    for (int d = 0; d < p->batch_rank; d++)
        out[r++] = p->batch[d];
    if (ra > 1)
        out[r++] = p->m;
    if (rb > 1)
        out[r++] = p->n;
    if (r == 0)
        out[r++] = 1;                   /* vector . vector: shape [1] */
    *out_rank = r;
    return BACKEND_STATUS_OK;
}

static BackendStatus check_mat_mul(const BackendLayerDescription *layer, const RefDescriptor *d,
                                   char *message, size_t message_size)
{
    rk_matmul_plan plan;
    int64_t out[BACKEND_MAX_DIMENSIONS];
    uint32_t rank;
    (void)d;
    TRY(plan_mat_mul(&layer->inputs[0], &layer->inputs[1], &plan, out, &rank, message, message_size));
    return ref_expect_output(layer, out, rank, message, message_size);
}

static void prepare_mat_mul(RefWorkload *w)
{
    int64_t out[BACKEND_MAX_DIMENSIONS];
    uint32_t rank;
    plan_mat_mul(&w->inputs[0], &w->inputs[1], &w->g.matmul, out, &rank, NULL, 0);
}

static int run_mat_mul(const RefWorkload *w, const float *const *in, float *out)
{
    return rk_matmul(in[0], in[1], out, &w->g.matmul);
}

const RefLayerEntry ref_layer_mat_mul = {
    .name = "MatMul", .min_inputs = 2, .max_inputs = 2, .since_1_3 = 1,
    .check = check_mat_mul, .prepare = prepare_mat_mul, .run = run_mat_mul,
};
