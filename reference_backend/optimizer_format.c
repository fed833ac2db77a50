/*
 * The serialized form of the reference backend's compiled sub-graphs: programs and fused kernels
 * written to self-contained bytes (their slots, steps, geometry and every constant they read) and
 * checked field by field when they are loaded again.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer_internal.h"

/* ---- the fused kernel's serialized form ------------------------------------------------------
 * "RKFK", format version, sizeof(FusedKernel), the kernel's fields (pointers zeroed), then for
 * each operand that is a constant its bytes (Operand.bytes of them; folded weights and bias
 * like any other). Version 2: grouped convolutions, folded BatchNormalization, the 1.3
 * activations and swish, a swish alone, five layers a kernel. Version 3: the input scale of a
 * pointwise convolution (OPERAND_SCALE), six layers a kernel. Read back only by this very build
 * (the runtime checks the backend id and version), and checked field by field. */

#define FORMAT_MAGIC 0x4b464b52u        /* "RKFK" */
#define FORMAT_VERSION 3u
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
    return i == OPERAND_X || (i == OPERAND_W && k->layer_type != BACKEND_LAYER_ACTIVATION) ||
           (i == OPERAND_BIAS && k->has_bias) || (i == OPERAND_RESIDUAL && k->has_residual) ||
           (i == OPERAND_SCALE && k->has_scale);
}

BackendStatus ref_fused_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
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
    copy.packed = NULL;
    copy.epilogue.residual = NULL;
    copy.threads = 0;
    memset(copy.event_name, 0, sizeof copy.event_name);
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

/* a * b, or UINT64_MAX past 2^62: no size below can wrap around to one that looks right */
static uint64_t times(uint64_t a, uint64_t b)
{
    return a != 0 && b > ((uint64_t)1 << 62) / a ? UINT64_MAX : a * b;
}

/* What is wrong with the epilogue's activation, or NULL: a function this build runs, with the
   parameters the layer's own check would have let through. */
static const char *check_activation(const rk_epilogue *e)
{
    if (e->function < -1 || e->function >= RK_ACTIVATION_COUNT)
        return "bad activation";
    if (!isfinite(e->a) || !isfinite(e->b) || (e->function == RK_CELU && e->a == 0.0f))
        return "bad activation parameters";
    return NULL;
}

/* What is wrong with a kernel read from bytes, or NULL: every size the kernels use must follow
   from the geometry, so that no read or write goes past a buffer. */
static const char *check_kernel(const FusedKernel *k)
{
    uint64_t x, w, bias, out;
    const char *problem;
    if (k->has_bias != 0 && k->has_bias != 1)
        return "bad bias flag";
    if (k->has_residual != 0 && k->has_residual != 1)
        return "bad residual flag";
    if (k->has_scale != 0 && k->has_scale != 1)
        return "bad scale flag";
    if (k->num_inputs > MAX_FUSED_INPUTS || k->num_layer_ids < 1 || k->num_layer_ids > MAX_FUSED_LAYERS)
        return "bad counts";
    if ((problem = check_activation(&k->epilogue)) != NULL)
        return problem;
    if (k->layer_type != BACKEND_LAYER_CONVOLUTION2D && k->groups != 1)
        return "bad group count";
    if (k->layer_type == BACKEND_LAYER_ACTIVATION) {
        /* a swish alone: x in, the same elements out */
        if (k->n < 1 || k->n > REF_MAX_ELEMENTS || k->has_bias || k->has_residual ||
            k->epilogue.function < 0 || k->operands[OPERAND_W].bytes != 0)
            return "bad activation geometry";
        x = w = bias = 0;
        out = x = (uint64_t)k->n;
    } else if (k->layer_type == BACKEND_LAYER_FULLY_CONNECTED) {
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
        if (!positive(k->groups) || p->c % k->groups != 0 || k->channels_out % k->groups != 0)
            return "the groups do not divide the channels";
        x = times(times(times(p->n, p->h), p->w), p->c);
        w = k->layer_type == BACKEND_LAYER_CONVOLUTION2D
                ? times(times(times(k->channels_out, p->kh), p->kw), p->c / k->groups)
                : times(times(p->kh, p->kw), k->channels_out);
        bias = (uint64_t)k->channels_out;
        out = times(times(times(p->n, p->oh), p->ow), k->channels_out);
        if (k->epilogue.ldr != k->channels_out)
            return "bad epilogue stride";
    } else {
        return "unknown layer type";
    }
    /* (the window is checked above before its pixels are counted) */
    if (k->has_scale && (k->layer_type != BACKEND_LAYER_CONVOLUTION2D || k->groups != 1 ||
                         !rk_conv_takes_scale(&k->window) ||
                         (k->scale_stride != 0 && k->scale_stride != k->window.c)))
        return "a scale on a layer that takes none";
    if (k->output_bytes != times(out, 4) || k->operands[OPERAND_X].bytes != times(x, 4) ||
        k->operands[OPERAND_W].bytes != times(w, 4) ||
        (k->has_bias && k->operands[OPERAND_BIAS].bytes != bias * 4) ||
        (k->has_residual && k->operands[OPERAND_RESIDUAL].bytes != times(out, 4)) ||
        (k->has_scale && k->operands[OPERAND_SCALE].bytes !=
                             times(k->scale_stride ? (uint64_t)k->window.n : 1, times((uint64_t)k->window.c, 4))) ||
        (!k->has_scale && k->operands[OPERAND_SCALE].bytes != 0))
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
    k->packed = NULL;
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
    ref_fused_init(k);
    /* the packed weights follow this process's kernel: made again from the loaded constants */
    if (ref_fused_pack(k) != BACKEND_STATUS_OK) {
        k->base.destroy(&k->base);
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    ref_fused_plan(k);
    *compiled = &k->base;
    return BACKEND_STATUS_OK;
}

/* ---- the program's serialized form -----------------------------------------------------------
 * A ProgramHeader, the slots, each step's StepRecord followed by its input slots and then its
 * layer's input tensor infos (layer steps) or the fused kernel's own serialized bytes (fused
 * steps), then the constants the slots name. Version 2 (Backend API 1.3): steps of any number
 * of inputs and every descriptor; other versions are refused. Read back only by this very
 * build and checked field by field: every slot bounded, every step checked as the layer or
 * kernel it is (ref_create_workload() runs ref_check_layer() on the description), every slot a
 * step uses of exactly the size the step needs; the arena is planned again on load. */

#define PROGRAM_MAGIC 0x47504b52u       /* "RKPG" */
#define PROGRAM_VERSION 2u

typedef struct ProgramHeader {
    uint32_t magic, version;
    uint32_t num_inputs, num_outputs, num_slots, num_steps;
    uint64_t step_record_size, constant_bytes;
} ProgramHeader;

/* Bytes that follow a step's record per input: its slot, and for a layer step its info. */
static uint64_t step_input_bytes(const StepRecord *r)
{
    return sizeof(uint32_t) + (r->kind == STEP_LAYER ? sizeof(BackendTensorInfo) : 0);
}

BackendStatus ref_program_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
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
        needed += sizeof(StepRecord) + step->record.payload_bytes +
                  (uint64_t)step->record.num_inputs * step_input_bytes(&step->record);
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
        memcpy(out, step->inputs, step->record.num_inputs * sizeof *step->inputs);
        out += step->record.num_inputs * sizeof *step->inputs;
        if (step->input_infos != NULL) {
            memcpy(out, step->input_infos, step->record.num_inputs * sizeof *step->input_infos);
            out += step->record.num_inputs * sizeof *step->input_infos;
        }
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
        if (step->inputs[j] == r->output)
            return "a step reads the tensor it writes";
        if (p->slots[step->inputs[j]].kind == SLOT_ARENA && !written[step->inputs[j]])
            return "a step reads a tensor no earlier step writes";
    }
    if (step->fused != NULL) {
        const FusedKernel *k = (const FusedKernel *)step->fused;
        if (k->num_inputs != r->num_inputs || out->bytes != k->output_bytes)
            return "a fused step does not match its kernel";
        for (int i = 0; i < OPERAND_COUNT; i++)
            if (k->operands[i].input >= 0 &&
                p->slots[step->inputs[k->operands[i].input]].bytes != k->operands[i].bytes)
                return "a fused step's operand sizes do not match its kernel";
        return NULL;
    }
    for (uint32_t j = 0; j < r->num_inputs; j++)
        if (p->slots[step->inputs[j]].bytes != (uint64_t)elements(&step->input_infos[j]) * sizeof(float))
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
        if (r->output >= p->num_slots || (r->kind != STEP_FUSED && r->kind != STEP_LAYER) ||
            r->num_inputs > (r->kind == STEP_FUSED ? MAX_FUSED_INPUTS : REF_MAX_INPUTS))
            REFUSE("bad step");
        /* bounded by the bytes there are before anything is allocated for them */
        if ((uint64_t)r->num_inputs * step_input_bytes(r) > rest)
            REFUSE("a step's inputs run past the end");
        step->inputs = malloc((r->num_inputs ? r->num_inputs : 1) * sizeof *step->inputs);
        if (step->inputs == NULL)
            REFUSE("out of memory");
        memcpy(step->inputs, in, r->num_inputs * sizeof *step->inputs);
        in += r->num_inputs * sizeof *step->inputs;
        rest -= r->num_inputs * sizeof *step->inputs;
        for (uint32_t j = 0; j < r->num_inputs; j++)
            if (step->inputs[j] >= p->num_slots)
                REFUSE("bad step");
        if (r->kind == STEP_FUSED) {
            if (r->payload_bytes > rest)
                REFUSE("a fused step runs past the end");
            status = load_fused(in, r->payload_bytes, &step->fused, detail, sizeof detail);
            if (status != BACKEND_STATUS_OK)
                REFUSE(detail);
            in += r->payload_bytes;
            rest -= r->payload_bytes;
        } else {
            BackendLayerDescription d = {
                .struct_size = (uint32_t)sizeof d, .layer_type = r->layer_type,
                .num_inputs = r->num_inputs, .num_outputs = 1, .outputs = &r->output_info,
                .descriptor = &r->descriptor,
            };
            if (r->payload_bytes != 0)
                REFUSE("bad step");
            step->input_infos = malloc((r->num_inputs ? r->num_inputs : 1) * sizeof *step->input_infos);
            if (step->input_infos == NULL)
                REFUSE("out of memory");
            memcpy(step->input_infos, in, r->num_inputs * sizeof *step->input_infos);
            in += r->num_inputs * sizeof *step->input_infos;
            rest -= r->num_inputs * sizeof *step->input_infos;
            d.inputs = step->input_infos;
            /* the descriptor's own struct_size bounds what is read of it: never more than the
               union the record holds */
            if (r->descriptor.struct_size > sizeof r->descriptor)
                REFUSE("bad step");
            status = ref_create_workload(&d, &step->workload, detail, sizeof detail);
            if (status != BACKEND_STATUS_OK)
                REFUSE(detail);
        }
        problem = check_step(p, step, written);
        if (problem != NULL)
            goto refused;
        for (uint32_t j = 0; j < r->num_inputs; j++)
            last[step->inputs[j]] = i;
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
    ref_plan_relayouts(p, last);
    ref_plan_pipelines(p, last);
    p->arena_bytes = ref_plan_arena(p, first, last);
    if (p->arena_bytes == UINT64_MAX || ref_program_finish(p, detail, sizeof detail) != BACKEND_STATUS_OK)
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
    ref_program_destroy(&p->base);
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
