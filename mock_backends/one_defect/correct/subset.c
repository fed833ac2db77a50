/* Correct: a backend that runs only Activation (relu, sigmoid, tanh), Addition and Softmax (over
   the last axis), and refuses everything else with status UNSUPPORTED and a reason: the layer
   types, activation functions and Softmax members of Backend API 1.3 among them. No memory manager, no backend
   context, no custom allocator (the optional functions are NULL). Independent of base.h and of
   reference_backend/. Must be conformant: everything it does not do is NOT_SUPPORTED. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_api.h"

#define ID "CorrectSubset"

static BackendStatus say(char *message, size_t size, BackendStatus status, const char *text)
{
    if (message != NULL && size > 0)
        snprintf(message, size, "%s", text);
    return status;
}

typedef struct Job {
    BackendWorkload base;
    uint32_t kind;          /* layer type */
    uint32_t function;      /* Activation */
    float beta;             /* Softmax */
    int64_t count, rows, cols;
    uint32_t rank;
    int64_t a_dims[BACKEND_MAX_DIMENSIONS], b_dims[BACKEND_MAX_DIMENSIONS], o_dims[BACKEND_MAX_DIMENSIONS];
    int64_t a_count, b_count;
} Job;

static int64_t elements(const BackendTensorInfo *t)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < t->num_dimensions; i++)
        n *= t->dimensions[i];
    return n;
}

static int same(const BackendTensorInfo *a, const BackendTensorInfo *b)
{
    return a->num_dimensions == b->num_dimensions &&
           memcmp(a->dimensions, b->dimensions, a->num_dimensions * sizeof a->dimensions[0]) == 0;
}

static BackendStatus judge(const BackendLayerDescription *l, char *message, size_t size)
{
    if (l == NULL || l->struct_size < BACKEND_LAYER_DESCRIPTION_SIZE_1_1)
        return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "malformed layer description");
    if (l->layer_type != BACKEND_LAYER_ACTIVATION && l->layer_type != BACKEND_LAYER_ADDITION &&
        l->layer_type != BACKEND_LAYER_SOFTMAX)
        return say(message, size, BACKEND_STATUS_UNSUPPORTED, "CorrectSubset runs Activation, Addition and Softmax only");
    if (l->num_inputs != (l->layer_type == BACKEND_LAYER_ADDITION ? 2u : 1u) || l->num_outputs != 1 ||
        l->inputs == NULL || l->outputs == NULL)
        return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "wrong number of tensors");
    for (uint32_t i = 0; i <= l->num_inputs; i++) {
        const BackendTensorInfo *t = i < l->num_inputs ? &l->inputs[i] : &l->outputs[0];
        if (t->struct_size < BACKEND_TENSOR_INFO_SIZE_1_1 || t->num_dimensions > BACKEND_MAX_DIMENSIONS)
            return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "malformed tensor");
        if (t->data_type != BACKEND_DATA_TYPE_FLOAT32)
            return say(message, size, BACKEND_STATUS_UNSUPPORTED, "float32 only");
        for (uint32_t d = 0; d < t->num_dimensions; d++)
            if (t->dimensions[d] < 1 || t->dimensions[d] > (1 << 30))
                return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "dimension out of range");
    }
    if (l->layer_type == BACKEND_LAYER_ACTIVATION) {
        const BackendActivationDescriptor *d = l->descriptor;
        if (d == NULL || d->struct_size < BACKEND_ACTIVATION_DESCRIPTOR_SIZE_1_1)
            return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "no activation descriptor");
        if (d->function != BACKEND_ACTIVATION_RELU && d->function != BACKEND_ACTIVATION_SIGMOID &&
            d->function != BACKEND_ACTIVATION_TANH)
            return say(message, size, BACKEND_STATUS_UNSUPPORTED, "only relu, sigmoid and tanh");
    } else if (l->layer_type == BACKEND_LAYER_SOFTMAX) {
        const BackendSoftmaxDescriptor *d = l->descriptor;
        if (d == NULL || d->struct_size < BACKEND_SOFTMAX_DESCRIPTOR_SIZE_1_1 || !isfinite(d->beta) ||
            l->inputs[0].num_dimensions < 1)
            return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "bad softmax");
        /* Backend API 1.3 appended axis and log; read only when the caller's struct has them. */
        if (BACKEND_STRUCT_HAS(BackendSoftmaxDescriptor, d, log) &&
            (d->axis != l->inputs[0].num_dimensions - 1 || d->log != 0))
            return say(message, size, BACKEND_STATUS_UNSUPPORTED,
                       "CorrectSubset normalizes over the last axis only, and not as LogSoftmax");
    } else {
        const BackendTensorInfo *a = &l->inputs[0], *b = &l->inputs[1], *o = &l->outputs[0];
        uint32_t rank = a->num_dimensions > b->num_dimensions ? a->num_dimensions : b->num_dimensions;
        if (rank == 0)
            return say(message, size, BACKEND_STATUS_UNSUPPORTED, "CorrectSubset adds tensors of rank 1 or more");
        if (o->num_dimensions != rank)
            return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "wrong output rank");
        for (uint32_t i = 0; i < rank; i++) {
            int64_t da = i + a->num_dimensions < rank ? 1 : a->dimensions[i + a->num_dimensions - rank];
            int64_t db = i + b->num_dimensions < rank ? 1 : b->dimensions[i + b->num_dimensions - rank];
            if (da != db && da != 1 && db != 1)
                return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "shapes do not broadcast");
            if (o->dimensions[i] != (da > db ? da : db))
                return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "wrong output shape");
        }
        return BACKEND_STATUS_OK;
    }
    if (!same(&l->inputs[0], &l->outputs[0]))
        return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "the output must have the input's shape");
    return BACKEND_STATUS_OK;
}

static BackendStatus run(BackendWorkload *self, const BackendBuffer *in, uint32_t n_in, const BackendBuffer *out,
                         uint32_t n_out, char *message, size_t size)
{
    Job *job = (Job *)self;
    uint32_t want = job->kind == BACKEND_LAYER_ADDITION ? 2 : 1;
    const float *x, *b;
    float *y;
    if (in == NULL || out == NULL || n_in != want || n_out != 1)
        return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "wrong number of buffers");
    for (uint32_t i = 0; i <= want; i++) {
        const BackendBuffer *buf = i < want ? &in[i] : &out[0];
        int64_t need = i == want ? job->count : (i == 0 ? job->a_count : job->b_count);
        if (buf->struct_size < BACKEND_BUFFER_SIZE_1_1 || buf->data == NULL ||
            buf->size_bytes < (uint64_t)need * sizeof(float))
            return say(message, size, BACKEND_STATUS_INVALID_ARGUMENT, "a buffer is missing or too small");
    }
    x = in[0].data;
    y = out[0].data;
    if (job->kind == BACKEND_LAYER_ACTIVATION) {
        for (int64_t i = 0; i < job->count; i++) {
            float v = x[i];
            if (job->function == BACKEND_ACTIVATION_RELU)
                y[i] = v > 0 ? v : 0;
            else if (job->function == BACKEND_ACTIVATION_TANH)
                y[i] = tanhf(v);
            else /* sigmoid, written so that no exponential overflows */
                y[i] = v >= 0 ? 1 / (1 + expf(-v)) : expf(v) / (1 + expf(v));
        }
    } else if (job->kind == BACKEND_LAYER_SOFTMAX) {
        for (int64_t r = 0; r < job->rows; r++) {
            const float *row = x + r * job->cols;
            float *out_row = y + r * job->cols;
            float top = -INFINITY, total = 0;
            for (int64_t i = 0; i < job->cols; i++)
                top = fmaxf(top, job->beta * row[i]);
            for (int64_t i = 0; i < job->cols; i++)
                total += out_row[i] = expf(job->beta * row[i] - top);
            for (int64_t i = 0; i < job->cols; i++)
                out_row[i] /= total;
        }
    } else {
        /* Addition: each row of the last dimension at once; the row's offsets in a and b come
           from the output index of its first element. */
        int64_t last = job->o_dims[job->rank - 1];
        int64_t step_a = job->a_dims[job->rank - 1] == 1 ? 0 : 1, step_b = job->b_dims[job->rank - 1] == 1 ? 0 : 1;
        b = in[1].data;
        for (int64_t start = 0; start < job->count; start += last) {
            int64_t rest = start / last, oa = 0, ob = 0, sa = job->a_dims[job->rank - 1], sb = job->b_dims[job->rank - 1];
            for (int d = (int)job->rank - 2; d >= 0; d--) {
                int64_t at = rest % job->o_dims[d];
                rest /= job->o_dims[d];
                oa += (job->a_dims[d] == 1 ? 0 : at) * sa;
                ob += (job->b_dims[d] == 1 ? 0 : at) * sb;
                sa *= job->a_dims[d];
                sb *= job->b_dims[d];
            }
            for (int64_t i = 0; i < last; i++)
                y[start + i] = x[oa + i * step_a] + b[ob + i * step_b];
        }
    }
    return BACKEND_STATUS_OK;
}

static void job_destroy(BackendWorkload *self)
{
    free(self);
}

static BackendStatus create(BackendWorkloadFactory *self, const BackendLayerDescription *l, BackendWorkload **out,
                            char *message, size_t size)
{
    BackendStatus status = judge(l, message, size);
    Job *job;
    (void)self;
    *out = NULL;
    if (status != BACKEND_STATUS_OK)
        return status;
    job = calloc(1, sizeof *job);
    if (job == NULL)
        return say(message, size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    job->base.struct_size = sizeof job->base;
    job->base.execute = run;
    job->base.destroy = job_destroy;
    job->kind = l->layer_type;
    job->count = elements(&l->outputs[0]);
    job->a_count = elements(&l->inputs[0]);
    if (l->layer_type == BACKEND_LAYER_ACTIVATION) {
        job->function = ((const BackendActivationDescriptor *)l->descriptor)->function;
    } else if (l->layer_type == BACKEND_LAYER_SOFTMAX) {
        job->beta = ((const BackendSoftmaxDescriptor *)l->descriptor)->beta;
        job->cols = l->inputs[0].dimensions[l->inputs[0].num_dimensions - 1];
        job->rows = job->count / job->cols;
    } else {
        const BackendTensorInfo *a = &l->inputs[0], *b = &l->inputs[1];
        job->rank = l->outputs[0].num_dimensions;
        job->b_count = elements(b);
        for (uint32_t d = 0; d < job->rank; d++) {
            job->o_dims[d] = l->outputs[0].dimensions[d];
            job->a_dims[d] = d + a->num_dimensions < job->rank ? 1 : a->dimensions[d + a->num_dimensions - job->rank];
            job->b_dims[d] = d + b->num_dimensions < job->rank ? 1 : b->dimensions[d + b->num_dimensions - job->rank];
        }
    }
    *out = &job->base;
    return BACKEND_STATUS_OK;
}

static void factory_destroy(BackendWorkloadFactory *self)
{
    free(self);
}

static BackendStatus make_factory(const BackendInstance *self, BackendMemoryManager *manager,
                                  BackendWorkloadFactory **factory, char *message, size_t size)
{
    BackendWorkloadFactory *f = calloc(1, sizeof *f);
    (void)self;
    (void)manager;
    if (f == NULL)
        return say(message, size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    f->struct_size = sizeof *f;
    f->create_workload = create;
    f->destroy = factory_destroy;
    *factory = f;
    return BACKEND_STATUS_OK;
}

static BackendStatus supported(const BackendInstance *self, const BackendLayerDescription *l, char *message,
                               size_t size)
{
    (void)self;
    return judge(l, message, size);
}

static BackendStatus capabilities(const BackendInstance *self, const BackendCapability **list, uint32_t *count)
{
    static const BackendCapability none[1] = {{BACKEND_CAPABILITY_SIZE_1_1, 0, "NonConstWeights"}};
    (void)self;
    *list = none;
    *count = 1;
    return BACKEND_STATUS_OK;
}

static const char *get_id(const BackendInstance *self)
{
    (void)self;
    return ID;
}

static void destroy(BackendInstance *self)
{
    free(self);
}

BACKEND_EXPORT const char *GetBackendId(void)
{
    return ID;
}

BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{
    *major = BACKEND_API_VERSION_MAJOR;
    *minor = BACKEND_API_VERSION_MINOR;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = calloc(1, sizeof *instance);
    if (instance == NULL)
        return NULL;
    instance->struct_size = sizeof *instance;
    instance->api_major = BACKEND_API_VERSION_MAJOR;
    instance->api_minor = BACKEND_API_VERSION_MINOR;
    instance->get_id = get_id;
    instance->destroy = destroy;
    instance->get_capabilities = capabilities;
    instance->is_layer_supported = supported;
    instance->create_workload_factory = make_factory;
    return instance;
}
