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
    int64_t start = profiling != NULL ? ref_now_ns() : 0;
    switch (k->layer_type) {
    case BACKEND_LAYER_FULLY_CONNECTED:
        failed = rk_fully_connected_packed(operand[OPERAND_X], operand[OPERAND_W], k->packed,
                                           k->has_bias ? operand[OPERAND_BIAS] : NULL, y, k->n,
                                           k->k, k->m, k->transpose_weights, &epilogue,
                                           k->threads);
        break;
    case BACKEND_LAYER_CONVOLUTION2D:
        failed = k->groups == 1
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

BackendStatus ref_program_finish(Program *p, char *message, size_t message_size)
{
    uint32_t most_inputs = 1;
    for (uint32_t i = 0; i < p->num_steps; i++)
        if (p->steps[i].record.num_inputs > most_inputs)
            most_inputs = p->steps[i].record.num_inputs;
    p->scratch = calloc(p->num_slots ? p->num_slots : 1, sizeof *p->scratch);
    p->step_inputs = calloc(most_inputs, sizeof *p->step_inputs);
    p->arena = malloc(p->arena_bytes ? p->arena_bytes : 1);
    if (p->scratch == NULL || p->step_inputs == NULL || p->arena == NULL)
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
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
