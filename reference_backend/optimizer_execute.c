/*
 * The reference backend's compiled sub-graphs at run time: a fused kernel (one step) and a
 * program (its steps in order, over slots bound to the caller's buffers, the constants and the
 * planned arena). Nothing is allocated or looked up while they run.
 */
#include <stdio.h>
#include <stdlib.h>

#include "optimizer_internal.h"

static double fused_macs(const FusedKernel *k)
{
    if (k->layer_type == BACKEND_LAYER_ACTIVATION)
        return 0.0;
    if (k->layer_type == BACKEND_LAYER_FULLY_CONNECTED)
        return (double)k->n * k->k * k->m;
    if (k->layer_type == BACKEND_LAYER_CONVOLUTION2D)
        return (double)k->window.n * k->window.oh * k->window.ow * k->channels_out * k->window.kh *
               k->window.kw * (k->window.c / k->groups);
    return (double)k->window.n * k->window.oh * k->window.ow * k->channels_out * k->window.kh *
           k->window.kw;
}

/* The operands of k from its constants and the buffers it is given, each checked to hold what
   k reads; then its output buffer, checked the same way. */
static BackendStatus bind_operands(const FusedKernel *k, const BackendBuffer *inputs, uint32_t num_inputs,
                                   const BackendBuffer *outputs, uint32_t num_outputs,
                                   const float *operand[OPERAND_COUNT], char *message, size_t message_size)
{
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
    return BACKEND_STATUS_OK;
}

static BackendStatus fused_execute(BackendCompiledSubgraph *self, const BackendBuffer *inputs,
                                   uint32_t num_inputs, const BackendBuffer *outputs,
                                   uint32_t num_outputs, char *message, size_t message_size)
{
    FusedKernel *k = (FusedKernel *)self;
    const float *operand[OPERAND_COUNT] = { NULL };
    rk_epilogue epilogue = k->epilogue;
    int failed = 0;
    BackendStatus status = bind_operands(k, inputs, num_inputs, outputs, num_outputs, operand, message,
                                         message_size);
    if (status != BACKEND_STATUS_OK)
        return status;
    float *y = outputs[0].data;
    epilogue.residual = k->has_residual ? operand[OPERAND_RESIDUAL] : NULL;
    RefProfiling *profiling = k->profiling != NULL && k->profiling->enabled ? k->profiling : NULL;
    int64_t start = profiling != NULL ? ref_now_ns() : 0;
    switch (k->layer_type) {
    case BACKEND_LAYER_FULLY_CONNECTED:
        failed = rk_fully_connected_packed(operand[OPERAND_X], operand[OPERAND_W], k->packed,
                                           k->has_bias ? operand[OPERAND_BIAS] : NULL, y, k->n,
                                           k->k, k->m, k->transpose_weights, &epilogue,
                                           k->threads);
        break;
    case BACKEND_LAYER_CONVOLUTION2D:
        failed = k->has_scale
                     ? rk_conv2d_scaled(operand[OPERAND_X], operand[OPERAND_SCALE], k->scale_stride,
                                        operand[OPERAND_W], k->packed,
                                        k->has_bias ? operand[OPERAND_BIAS] : NULL, y, &k->window,
                                        k->channels_out, &epilogue, k->threads)
                 : k->groups == 1
                     ? rk_conv2d_packed(operand[OPERAND_X], operand[OPERAND_W], k->packed,
                                        k->has_bias ? operand[OPERAND_BIAS] : NULL, y, &k->window,
                                        k->channels_out, &epilogue, k->threads)
                     : rk_grouped_conv2d_threads(operand[OPERAND_X], operand[OPERAND_W],
                                                 k->has_bias ? operand[OPERAND_BIAS] : NULL, y,
                                                 &k->window, k->channels_out, k->groups,
                                                 &epilogue, k->threads);
        break;
    case BACKEND_LAYER_ACTIVATION:
        failed = rk_activation(operand[OPERAND_X], y, k->n, epilogue.function, epilogue.a, epilogue.b);
        break;
    default:
        failed = rk_depthwise_conv2d_fused(operand[OPERAND_X], operand[OPERAND_W],
                                           k->has_bias ? operand[OPERAND_BIAS] : NULL, y,
                                           &k->window, k->channels_out / k->window.c, &epilogue,
                                           k->threads);
        break;
    }
    if (failed)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY,
                        "out of memory for the fused kernel's scratch space");
    if (profiling != NULL)
        ref_record_event(profiling, k->event_name, k->layer_ids, k->num_layer_ids, start,
                         ref_now_ns(), fused_macs(k));
    return BACKEND_STATUS_OK;
}

void ref_fused_plan(FusedKernel *k)
{
    const char *name = k->num_layer_ids == 1 ? ref_layer_name(k->layer_type)
                       : k->layer_type == BACKEND_LAYER_FULLY_CONNECTED ? "fused FullyConnected"
                       : k->layer_type == BACKEND_LAYER_CONVOLUTION2D ? "fused Convolution2d"
                       : k->layer_type == BACKEND_LAYER_ACTIVATION ? "fused swish"
                       : "fused DepthwiseConvolution2d";
    switch (k->layer_type) {
    case BACKEND_LAYER_FULLY_CONNECTED:
        k->threads = rk_fully_connected_step_threads(k->n, k->k, k->m);
        break;
    case BACKEND_LAYER_CONVOLUTION2D:
        k->threads = rk_conv2d_step_threads(&k->window, k->channels_out, k->groups);
        break;
    case BACKEND_LAYER_ACTIVATION:
        k->threads = 0; /* element-wise: decided per call, from the elements */
        break;
    default:
        k->threads = rk_depthwise_step_threads(&k->window, k->channels_out / k->window.c);
        break;
    }
    if (k->threads > 1)
        snprintf(k->event_name, sizeof k->event_name, "%s (%d threads)", name, k->threads);
    else
        snprintf(k->event_name, sizeof k->event_name, "%s", name);
}

static void fused_destroy(BackendCompiledSubgraph *self)
{
    free(((FusedKernel *)self)->packed);
    free(((FusedKernel *)self)->owned);
    free(self);
}

static void fused_set_profiling_context(BackendCompiledSubgraph *self,
                                        BackendProfilingContext *context)
{
    ((FusedKernel *)self)->profiling = (RefProfiling *)context;
}

void ref_fused_init(FusedKernel *k)
{
    k->base.struct_size = (uint32_t)sizeof k->base;
    k->base.reserved = 0;
    k->base.execute = fused_execute;
    k->base.destroy = fused_destroy;
    k->base.set_profiling_context = fused_set_profiling_context;
    k->base.serialize = ref_fused_serialize;
}

BackendStatus ref_fused_pack(FusedKernel *k)
{
    const Operand *w = &k->operands[OPERAND_W];
    if (k->packed != NULL || w->input >= 0 || w->constant == NULL)
        return BACKEND_STATUS_OK;
    if (k->layer_type == BACKEND_LAYER_CONVOLUTION2D && k->groups == 1 &&
        !rk_conv_streams_weights(&k->window)) {     /* a streamed one reads w as it is */
        k->packed = rk_pack_conv_weights(w->constant, &k->window, k->channels_out);
    } else if (k->layer_type == BACKEND_LAYER_FULLY_CONNECTED &&
               rk_fully_connected_uses_packed(k->n)) {
        k->packed = k->transpose_weights ? rk_pack_weights(w->constant, 1, k->k, k->k, k->m)
                                         : rk_pack_weights(w->constant, k->m, 1, k->k, k->m);
    } else {
        return BACKEND_STATUS_OK;
    }
    return k->packed != NULL ? BACKEND_STATUS_OK : BACKEND_STATUS_OUT_OF_MEMORY;
}

void ref_program_destroy(BackendCompiledSubgraph *self)
{
    Program *p = (Program *)self;
    for (uint32_t i = 0; p->steps != NULL && i < p->num_steps; i++) {
        if (p->steps[i].fused != NULL)
            p->steps[i].fused->destroy(p->steps[i].fused);
        if (p->steps[i].workload != NULL)
            p->steps[i].workload->destroy(p->steps[i].workload);
        free(p->steps[i].inputs);
        free(p->steps[i].input_infos);
    }
    free(p->steps);
    free(p->slots);
    free(p->constants);
    free(p->arena);
    free(p->owned);
    free(p->scratch);
    free(p->step_inputs);
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

/* The steps i .. i + pipeline - 1 of p as one pipeline (ref_plan_pipelines), over the per-call
   buffers b: each step's operands bound and checked as its own execute would. */
static BackendStatus pipeline_execute(Program *p, uint32_t i, const BackendBuffer *b, char *message,
                                      size_t message_size)
{
    const Step *first = &p->steps[i];
    const FusedKernel *k[3] = { NULL, NULL, NULL };
    const float *o[3][OPERAND_COUNT];
    rk_epilogue e[3];
    BackendStatus status = BACKEND_STATUS_OK;
    for (int s = 0; s < first->pipeline && status == BACKEND_STATUS_OK; s++) {
        const Step *step = &p->steps[i + (uint32_t)s];
        BackendBuffer in[MAX_FUSED_INPUTS];
        for (uint32_t j = 0; j < step->record.num_inputs; j++)
            in[j] = b[step->inputs[j]];
        k[s] = (const FusedKernel *)step->fused;
        status = bind_operands(k[s], in, step->record.num_inputs, &b[step->record.output], 1, o[s], message,
                               message_size);
        e[s] = k[s]->epilogue;
        e[s].residual = k[s]->has_residual ? o[s][OPERAND_RESIDUAL] : NULL;
    }
    if (status != BACKEND_STATUS_OK)
        return status;
    const int d = first->pipeline_expands;              /* the depthwise step */
    const FusedKernel *ke = d ? k[0] : NULL, *kd = k[d], *kp = first->pipeline_projects ? k[d + 1] : NULL;
    const rk_pipeline pipeline = {
        o[0][OPERAND_X],
        ke ? o[0][OPERAND_W] : NULL, ke ? ke->packed : NULL, ke && ke->has_bias ? o[0][OPERAND_BIAS] : NULL,
        ke ? &ke->window : NULL, ke ? &e[0] : NULL,
        o[d][OPERAND_W], kd->has_bias ? o[d][OPERAND_BIAS] : NULL, &kd->window, &e[d],
        kp ? o[d + 1][OPERAND_W] : NULL, kp ? kp->packed : NULL, kp && kp->has_bias ? o[d + 1][OPERAND_BIAS] : NULL,
        kp ? &kp->window : NULL, kp ? kp->channels_out : 0, kp ? &e[d + 1] : NULL,
        b[p->steps[i + (uint32_t)first->pipeline - 1].record.output].data };
    RefProfiling *profiling = p->profiling != NULL && p->profiling->enabled ? p->profiling : NULL;
    const int64_t start = profiling != NULL ? ref_now_ns() : 0;
    if (rk_pointwise_depthwise(&pipeline, p->pipeline_scratch, first->pipeline_threads))
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY,
                        "out of memory for the fused kernel's scratch space");
    if (profiling != NULL) {
        double macs = 0.0;
        for (int s = 0; s < first->pipeline; s++)
            macs += fused_macs(k[s]);
        ref_record_event(profiling, first->pipeline_name, first->pipeline_layers, first->pipeline_num_layers,
                         start, ref_now_ns(), macs);
    }
    return BACKEND_STATUS_OK;
}

/* Step i (a Transpose that ref_plan_relayouts marked) and the convolution after it, over the
   per-call buffers b: the convolution's operands bound and checked as its own execute would,
   its input the Transpose's input, the image's planes (the same bytes). */
static BackendStatus relayout_execute(Program *p, uint32_t i, const BackendBuffer *b, char *message,
                                      size_t message_size)
{
    const Step *planes = &p->steps[i], *step = &p->steps[i + 1];
    const FusedKernel *k = (const FusedKernel *)step->fused;
    BackendBuffer in[MAX_FUSED_INPUTS];
    const float *o[OPERAND_COUNT];
    for (uint32_t j = 0; j < step->record.num_inputs; j++)
        in[j] = b[step->inputs[j]];
    in[k->operands[OPERAND_X].input] = b[planes->inputs[0]];
    BackendStatus status = bind_operands(k, in, step->record.num_inputs, &b[step->record.output], 1, o,
                                         message, message_size);
    if (status != BACKEND_STATUS_OK)
        return status;
    rk_epilogue epilogue = k->epilogue;
    epilogue.residual = k->has_residual ? o[OPERAND_RESIDUAL] : NULL;
    RefProfiling *profiling = p->profiling != NULL && p->profiling->enabled ? p->profiling : NULL;
    const int64_t start = profiling != NULL ? ref_now_ns() : 0;
    const int failed = rk_conv2d_channels_first(o[OPERAND_X], o[OPERAND_W], k->packed,
                                                k->has_bias ? o[OPERAND_BIAS] : NULL,
                                                b[step->record.output].data, &k->window, k->channels_out,
                                                &epilogue, k->threads);
    if (failed != 0)    /* (-1, not taken, cannot happen: ref_plan_relayouts asked the same) */
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY,
                        "out of memory for the fused kernel's scratch space");
    if (profiling != NULL)
        ref_record_event(profiling, planes->relayout_name, planes->relayout_layers, planes->relayout_num_layers,
                         start, ref_now_ns(), fused_macs(k));
    return BACKEND_STATUS_OK;
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
    /* the workers stay hot from step to step; released on every way out below */
    if (p->threads > 1)
        rk_pool_hold(p->threads);
    BackendStatus status = BACKEND_STATUS_OK;
    for (uint32_t i = 0; i < p->num_steps && status == BACKEND_STATUS_OK; i++) {
        const Step *step = &p->steps[i];
        BackendBuffer *in = p->step_inputs;
        int64_t start = 0;
        if (step->pipeline) {
            status = pipeline_execute(p, i, b, message, message_size);
            i += (uint32_t)step->pipeline - 1;  /* the steps after it ran in the pipeline */
            continue;
        }
        if (step->relayout) {
            status = relayout_execute(p, i, b, message, message_size);
            i++;                                /* the convolution ran with it */
            continue;
        }
        for (uint32_t j = 0; j < step->record.num_inputs; j++)
            in[j] = b[step->inputs[j]];
        if (step->fused != NULL) {
            status = step->fused->execute(step->fused, in, step->record.num_inputs,
                                          &b[step->record.output], 1, message, message_size);
        } else {
            start = profiling != NULL ? ref_now_ns() : 0;
            status = step->workload->execute(step->workload, in, step->record.num_inputs,
                                             &b[step->record.output], 1, message, message_size);
            if (status == BACKEND_STATUS_OK && profiling != NULL)
                ref_record_event(profiling, ref_layer_name(step->record.layer_type),
                                 &step->record.layer_id, 1, start, ref_now_ns(), 0);
        }
    }
    if (p->threads > 1)
        rk_pool_release();
    return status;
}

/* No pipeline for a tensor between two steps smaller than this: it stays in the core's cache
   between them anyway. From 256 KiB (MobileNetV2's 14 x 14 blocks), the pipeline also keeps
   each band on the thread that made it, where the steps apart hand a tensor written by two
   threads to a depthwise step on one: 6-9% on MobileNetV2 on two threads, 0-6% on the other
   mobile networks, against 512 KiB (interleaved, per step). */
#ifndef RK_PIPELINE_MIN_BYTES
#define RK_PIPELINE_MIN_BYTES (256 * 1024)
#endif

/* A pointwise convolution with its filter packed (not streamed). */
static int pointwise_step(const FusedKernel *k)
{
    return k != NULL && k->layer_type == BACKEND_LAYER_CONVOLUTION2D && k->groups == 1 && k->packed != NULL &&
           !k->has_scale &&
           rk_conv_is_pointwise(&k->window) && !rk_conv_streams_weights(&k->window);
}

/* A depthwise convolution of multiplier 1 without a residual. */
static int depthwise_step(const FusedKernel *k)
{
    return k != NULL && k->layer_type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D && !k->has_residual &&
           k->channels_out == k->window.c;
}

static const FusedKernel *fused_at(const Program *p, uint32_t i)
{
    if (i >= p->num_steps || p->steps[i].fused == NULL || p->steps[i].record.num_inputs > MAX_FUSED_INPUTS)
        return NULL;
    return (const FusedKernel *)p->steps[i].fused;
}

/* Whether step a's output (kernel ka) is what step b (kernel kb) reads as its X operand, of the
   shape kb's window takes, and nothing else reads (`readers`: operand slots reading each slot):
   an arena tensor large enough to leave the cache between the two steps. */
static int feeds(const Program *p, const uint32_t *readers, uint32_t a, const FusedKernel *ka, uint32_t b,
                 const FusedKernel *kb)
{
    const uint32_t slot = p->steps[a].record.output;
    const Operand *x = &kb->operands[OPERAND_X];
    return kb->window.n == ka->window.n && kb->window.h == ka->window.oh && kb->window.w == ka->window.ow &&
           kb->window.c == ka->channels_out && slot < p->num_slots && p->slots[slot].kind == SLOT_ARENA &&
           p->slots[slot].bytes >= RK_PIPELINE_MIN_BYTES && readers[slot] == 1 && x->input >= 0 &&
           (uint32_t)x->input < p->steps[b].record.num_inputs && p->steps[b].inputs[x->input] == slot;
}

/* The steps of a pipeline from step i (0: none): an expansion, a depthwise convolution and a
   projection, or two of them in that order, each tensor between them read by the next alone. */
static int pipeline_at(const Program *p, const uint32_t *readers, uint32_t i, int *expands, int *projects)
{
    const FusedKernel *a = fused_at(p, i), *b = fused_at(p, i + 1), *c = fused_at(p, i + 2);
    *expands = *projects = 0;
    if (a == NULL || b == NULL)
        return 0;
    if (pointwise_step(a) && !a->has_residual && depthwise_step(b) && feeds(p, readers, i, a, i + 1, b)) {
        *expands = 1;
        a = b;
        b = c;
        i++;
    } else if (!depthwise_step(a)) {
        return 0;
    }
    if (pointwise_step(b) && feeds(p, readers, i, a, i + 1, b))
        *projects = 1;
    return *expands + *projects > 0 ? 1 + *expands + *projects : 0;
}

/* The step inputs that read each slot, counted once for a whole plan (asking at each
   candidate was quadratic); NULL when out of memory. free() it. */
static uint32_t *slot_readers(const Program *p)
{
    uint32_t *readers = calloc(p->num_slots ? p->num_slots : 1, sizeof *readers);
    if (readers == NULL)
        return NULL;
    for (uint32_t j = 0; j < p->num_steps; j++)
        for (uint32_t k = 0; k < p->steps[j].record.num_inputs; k++)
            if (p->steps[j].inputs[k] < p->num_slots)
                readers[p->steps[j].inputs[k]]++;
    return readers;
}

void ref_plan_pipelines(Program *p, uint32_t *last)
{
    /* out of memory: no pipelines, the steps run apart */
    uint32_t *readers = rk_pipeline_available() ? slot_readers(p) : NULL;
    if (readers == NULL)
        return;
    for (uint32_t i = 0; i + 1 < p->num_steps; i++) {
        int expands, projects;
        const int n = pipeline_at(p, readers, i, &expands, &projects);
        if (n == 0)
            continue;
        Step *first = &p->steps[i];
        first->pipeline = n;
        first->pipeline_expands = expands;
        first->pipeline_projects = projects;
        first->pipeline_threads = 1;
        first->pipeline_num_layers = 0;
        size_t used = 0;
        first->pipeline_name[0] = '\0';
        for (int s = 0; s < n; s++) {
            const FusedKernel *k = fused_at(p, i + (uint32_t)s);
            if (k->threads > first->pipeline_threads)
                first->pipeline_threads = k->threads;
            const char *kind = k->layer_type == BACKEND_LAYER_CONVOLUTION2D ? "Convolution2d" : "DepthwiseConvolution2d";
            int w = snprintf(first->pipeline_name + used, sizeof first->pipeline_name - used, "%s%s%s",
                             s ? " + " : "", k->num_layer_ids == 1 ? "" : "fused ", kind);
            if (w > 0 && used + (size_t)w < sizeof first->pipeline_name)
                used += (size_t)w;
            for (uint32_t j = 0; j < k->num_layer_ids && j < MAX_FUSED_LAYERS; j++)
                first->pipeline_layers[first->pipeline_num_layers++] = k->layer_ids[j];
            /* the pipeline reads every step's inputs until it writes its last output: they stay
               alive until then, so the arena never places that output over them */
            const Step *step = &p->steps[i + (uint32_t)s];
            for (uint32_t j = 0; j < step->record.num_inputs; j++)
                if (last[step->inputs[j]] < i + (uint32_t)n - 1)
                    last[step->inputs[j]] = i + (uint32_t)n - 1;
        }
        if (first->pipeline_threads > 1 && used < sizeof first->pipeline_name)
            snprintf(first->pipeline_name + used, sizeof first->pipeline_name - used, " (%d threads)",
                     first->pipeline_threads);
        i += (uint32_t)n - 1;           /* a step is in one pipeline at most */
    }
    free(readers);
}

/* Whether step i is a Transpose of 4-d float planes [n, c, h, w] to [n, h, w, c] whose output
   only step i + 1 reads, once, as the X operand (no other) of a convolution that takes the
   padded copy of few channels (rk_conv_reads_channels_first: neither pointwise nor depthwise,
   so never in a pipeline). */
static int relayout_at(const Program *p, const uint32_t *readers, uint32_t i)
{
    const Step *t = &p->steps[i];
    const FusedKernel *k = fused_at(p, i + 1);
    if (t->record.kind != STEP_LAYER || t->record.layer_type != BACKEND_LAYER_TRANSPOSE ||
        t->record.num_inputs != 1 || t->input_infos == NULL || k == NULL ||
        k->layer_type != BACKEND_LAYER_CONVOLUTION2D || k->groups != 1 || k->has_scale)
        return 0;
    const BackendTensorInfo *x = &t->input_infos[0];
    const uint32_t *perm = t->record.descriptor.transpose.perm;
    /* (perm is a permutation, checked when the layer was made: the last axis is 1) */
    if (x->data_type != BACKEND_DATA_TYPE_FLOAT32 || x->num_dimensions != 4 || perm[0] != 0 || perm[1] != 2 ||
        perm[2] != 3)
        return 0;
    const rk_conv_params *w = &k->window;
    if (x->dimensions[0] != w->n || x->dimensions[1] != w->c || x->dimensions[2] != w->h ||
        x->dimensions[3] != w->w || !rk_conv_reads_channels_first(w, k->channels_out, k->packed != NULL))
        return 0;
    const uint32_t slot = t->record.output, source = t->inputs[0];
    const int xi = k->operands[OPERAND_X].input;
    if (slot >= p->num_slots || source >= p->num_slots || p->slots[slot].kind != SLOT_ARENA ||
        readers[slot] != 1 || xi < 0 || (uint32_t)xi >= p->steps[i + 1].record.num_inputs ||
        p->steps[i + 1].inputs[xi] != slot || p->slots[source].bytes != p->slots[slot].bytes)
        return 0;
    for (int o = 0; o < OPERAND_COUNT; o++)
        if (o != OPERAND_X && k->operands[o].input == xi)
            return 0;
    return 1;
}

void ref_plan_relayouts(Program *p, uint32_t *last)
{
    uint32_t *readers = slot_readers(p);
    if (readers == NULL)
        return;                         /* out of memory: the steps run apart */
    for (uint32_t i = 0; i + 1 < p->num_steps; i++) {
        Step *t = &p->steps[i];
        t->relayout = relayout_at(p, readers, i);
        if (!t->relayout)
            continue;
        const FusedKernel *k = fused_at(p, i + 1);
        snprintf(t->relayout_name, sizeof t->relayout_name, "Transpose + %s", k->event_name);
        t->relayout_layers[0] = t->record.layer_id;
        t->relayout_num_layers = 1;
        for (uint32_t j = 0; j < k->num_layer_ids && j < MAX_FUSED_LAYERS; j++)
            t->relayout_layers[t->relayout_num_layers++] = k->layer_ids[j];
        /* the convolution reads the planes: they stay alive until it has run */
        if (last[t->inputs[0]] < i + 1)
            last[t->inputs[0]] = i + 1;
        i++;                            /* the convolution is no Transpose */
    }
    free(readers);
}

/* The scratch floats of the largest pipeline (ref_plan_pipelines marked them). */
static uint64_t pipeline_floats(const Program *p)
{
    uint64_t floats = 0;
    for (uint32_t i = 0; i < p->num_steps; i++) {
        const Step *first = &p->steps[i];
        if (!first->pipeline)
            continue;
        const FusedKernel *dw = (const FusedKernel *)p->steps[i + (uint32_t)first->pipeline_expands].fused;
        const uint64_t need = (uint64_t)rk_pipeline_scratch_floats(&dw->window, first->pipeline_expands,
                                                                   first->pipeline_projects, first->pipeline_threads);
        if (need > floats)
            floats = need;
    }
    return floats;
}

BackendStatus ref_program_finish(Program *p, char *message, size_t message_size)
{
    uint32_t most_inputs = 1;
    for (uint32_t i = 0; i < p->num_steps; i++)
        if (p->steps[i].record.num_inputs > most_inputs)
            most_inputs = p->steps[i].record.num_inputs;
    p->scratch = calloc(p->num_slots ? p->num_slots : 1, sizeof *p->scratch);
    p->step_inputs = calloc(most_inputs, sizeof *p->step_inputs);
    /* the pipelines' band buffers after the planned tensors, in the same allocation */
    const uint64_t planned = (p->arena_bytes + ARENA_ALIGNMENT - 1) / ARENA_ALIGNMENT * ARENA_ALIGNMENT;
    const uint64_t band_floats = pipeline_floats(p);
    if (band_floats > MAX_ARENA_BYTES / sizeof(float) || planned + band_floats * sizeof(float) > MAX_ARENA_BYTES)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    const uint64_t total = planned + band_floats * sizeof(float);
    p->arena = malloc(total ? (size_t)total : 1);
    if (p->scratch == NULL || p->step_inputs == NULL || p->arena == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    p->pipeline_scratch = band_floats ? (float *)(void *)((char *)p->arena + planned) : NULL;
    p->threads = 1;
    for (uint32_t i = 0; i < p->num_steps; i++) {
        const FusedKernel *k = (const FusedKernel *)p->steps[i].fused;
        if (k != NULL && k->threads > p->threads)
            p->threads = k->threads;
    }
    p->base.struct_size = (uint32_t)sizeof p->base;
    p->base.reserved = 0;
    p->base.execute = program_execute;
    p->base.destroy = ref_program_destroy;
    p->base.set_profiling_context = program_set_profiling_context;
    p->base.serialize = ref_program_serialize;
    return BACKEND_STATUS_OK;
}
