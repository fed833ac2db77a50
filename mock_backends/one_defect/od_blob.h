/*
 * od_blob.h - a program's serialized form, and programs loaded again from it. Part of
 * od_subgraph.h.
 *
 * The bytes: a header (magic, version, number of tensors, steps, boundary inputs and outputs);
 * each tensor (OdSlot without its pointer: kind, index, bytes); each step (id, layer type,
 * number of inputs, output, fused, descriptor bytes; its inputs; its tensor infos; its
 * descriptor); then the data of each constant. Loading trusts none of it: every count is
 * bounded, every read checked against what is left, every index against what it indexes, each
 * tensor's size against its shape, each layer through the checks of a new workload, and no byte
 * may be left over.
 */
#ifndef ONE_DEFECT_BLOB_H
#define ONE_DEFECT_BLOB_H

typedef struct OdBlobHeader {
    uint32_t magic, version, num_slots, num_steps, num_inputs, num_outputs;
} OdBlobHeader;

typedef struct OdBlobSlot {
    uint32_t kind, index;
    uint64_t bytes;
} OdBlobSlot;

typedef struct OdBlobStep {
    uint64_t id;
    uint32_t type, num_inputs, output, fused, descriptor_bytes, reserved;
} OdBlobStep;

_Static_assert(sizeof(BackendSliceDescriptor) <= OD_DESCRIPTOR_MAX &&
               sizeof(BackendPadDescriptor) <= OD_DESCRIPTOR_MAX &&
               sizeof(BackendTransposeDescriptor) <= OD_DESCRIPTOR_MAX &&
               sizeof(BackendReduceDescriptor) <= OD_DESCRIPTOR_MAX,
               "a step keeps every descriptor whole");

/* Appends `n` bytes to `out` (NULL: only counts them). */
static void od_put(unsigned char *out, uint64_t *at, const void *data, uint64_t n)
{
    if (out != NULL && n > 0)
        memcpy(out + *at, data, (size_t)n);
    *at += n;
}

/* Writes the program to `out` (NULL: only counts); returns the number of bytes. */
static uint64_t od_write_program(const OdProgram *p, unsigned char *out)
{
    OdBlobHeader header = {OD_BLOB_MAGIC, OD_BLOB_VERSION, p->num_slots, (uint32_t)p->num_steps, p->num_inputs,
                           p->num_outputs};
    uint64_t at = 0;
    od_put(out, &at, &header, sizeof header);
    for (uint32_t s = 0; s < p->num_slots; s++) {
        OdBlobSlot slot = {p->slots[s].kind, p->slots[s].index, p->slots[s].bytes};
        od_put(out, &at, &slot, sizeof slot);
    }
    for (uint32_t i = 0; i < header.num_steps; i++) {
        const OdStep *step = &p->steps[i];
        OdBlobStep record = {step->id, step->type, step->num_inputs, step->output, step->fused,
                             step->descriptor_bytes, 0};
        od_put(out, &at, &record, sizeof record);
        od_put(out, &at, step->inputs, step->num_inputs * sizeof step->inputs[0]);
        od_put(out, &at, step->infos, (step->num_inputs + 1) * sizeof step->infos[0]);
        od_put(out, &at, step->descriptor, step->descriptor_bytes);
    }
    for (uint32_t s = 0; s < p->num_slots; s++)
        if (p->slots[s].kind == OD_SLOT_CONSTANT)
            od_put(out, &at, p->slots[s].data, p->slots[s].bytes);
    return at;
}

static BackendStatus od_program_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                          uint64_t *size, char *message, size_t message_size)
{
    *size = od_write_program((const OdProgram *)self, NULL);
    if (buffer == NULL || capacity < *size)
        return od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "%llu bytes needed",
                       (unsigned long long)*size);
    od_write_program((const OdProgram *)self, buffer);
    return BACKEND_STATUS_OK;
}

#define OD_REFUSE(...) do { status = OD_INVALID("compiled sub-graph bytes: " __VA_ARGS__); goto done; } while (0)
#define OD_TAKE(into, n, what) do { if (!od_read_blob(&at, &rest, (into), (n))) OD_REFUSE("they end inside %s", what); } while (0)

static BackendStatus od_load_compiled_subgraph(const BackendInstance *self, const void *data, uint64_t size,
                                               BackendCompiledSubgraph **compiled, char *message,
                                               size_t message_size)
{
    const unsigned char *at = data;
    uint64_t rest = size;
    OdBlobHeader header;
    OdProgram *p = NULL;
    char *seen = NULL;               /* each boundary input and output: one tensor each */
    BackendStatus status = BACKEND_STATUS_OK;
    (void)self;
    *compiled = NULL;
    if (data == NULL && size != 0)
        return OD_INVALID("no bytes");
    OD_TAKE(&header, sizeof header, "the header");
    if (header.magic != OD_BLOB_MAGIC || header.version != OD_BLOB_VERSION)
        OD_REFUSE("not a program of this backend (magic %08x, version %u)", header.magic, header.version);
    if (header.num_slots == 0 || header.num_slots > OD_PROGRAM_LIMIT || header.num_steps == 0 ||
        header.num_steps > OD_PROGRAM_LIMIT || header.num_inputs > header.num_slots ||
        header.num_outputs > header.num_slots)
        OD_REFUSE("%u tensors, %u steps, %u inputs, %u outputs", header.num_slots, header.num_steps,
                  header.num_inputs, header.num_outputs);
    if (rest / sizeof(OdBlobSlot) < header.num_slots)
        OD_REFUSE("they end inside the tensors");
    p = od_program_new(header.num_slots, header.num_steps);
    seen = calloc((size_t)header.num_inputs + header.num_outputs + 1, 1);
    if (p == NULL || seen == NULL) {
        status = od_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    p->num_inputs = header.num_inputs;
    p->num_outputs = header.num_outputs;
    for (uint32_t s = 0; s < header.num_slots; s++) {
        OdBlobSlot slot;
        OD_TAKE(&slot, sizeof slot, "the tensors");
        if (slot.kind > OD_SLOT_INTERNAL || slot.bytes % sizeof(float) != 0 ||
            slot.bytes > ((uint64_t)1 << 40) * sizeof(float))
            OD_REFUSE("tensor %u: kind %u, %llu bytes", s, slot.kind, (unsigned long long)slot.bytes);
        if (slot.kind == OD_SLOT_INPUT || slot.kind == OD_SLOT_OUTPUT) {
            uint32_t count = slot.kind == OD_SLOT_INPUT ? header.num_inputs : header.num_outputs;
            size_t mark = slot.kind == OD_SLOT_INPUT ? slot.index : (size_t)header.num_inputs + slot.index;
            if (slot.index >= count || seen[mark])
                OD_REFUSE("tensor %u: boundary index %u twice or past %u", s, slot.index, count);
            seen[mark] = 1;
        }
        p->slots[s].kind = slot.kind;
        p->slots[s].index = slot.index;
        p->slots[s].bytes = slot.bytes;
    }
    for (uint32_t k = 0; k < header.num_inputs + header.num_outputs; k++)
        if (!seen[k])
            OD_REFUSE("boundary %s %u has no tensor", k < header.num_inputs ? "input" : "output",
                      k < header.num_inputs ? k : k - header.num_inputs);
    for (uint32_t i = 0; i < header.num_steps; i++) {
        OdStep *step = &p->steps[i];
        OdBlobStep record;
        OD_TAKE(&record, sizeof record, "a step");
        if (record.type >= BACKEND_LAYER_TYPE_COUNT_1_3 || record.num_inputs == 0 ||
            record.num_inputs > OD_MAX_INPUTS || record.output >= header.num_slots || record.fused > 1 ||
            (record.fused && (i == 0 || p->steps[i - 1].fused)) || record.descriptor_bytes > OD_DESCRIPTOR_MAX ||
            (record.descriptor_bytes > 0 && record.descriptor_bytes < sizeof(uint32_t)))
            OD_REFUSE("step %u is malformed", i);
        step->id = record.id;
        step->type = record.type;
        step->num_inputs = record.num_inputs;
        step->output = record.output;
        step->fused = record.fused;
        step->descriptor_bytes = record.descriptor_bytes;
        OD_TAKE(step->inputs, record.num_inputs * sizeof step->inputs[0], "a step's inputs");
        OD_TAKE(step->infos, (record.num_inputs + 1) * sizeof step->infos[0], "a step's tensors");
        OD_TAKE(step->descriptor, record.descriptor_bytes, "a step's descriptor");
        if (record.descriptor_bytes > 0) {       /* read no further than what was kept */
            uint32_t given;
            memcpy(&given, step->descriptor, sizeof given);
            given = given < record.descriptor_bytes ? given : record.descriptor_bytes;
            memcpy(step->descriptor, &given, sizeof given);
        }
        if (p->slots[step->output].kind != OD_SLOT_OUTPUT && p->slots[step->output].kind != OD_SLOT_INTERNAL)
            OD_REFUSE("step %u writes an input or a constant", i);
        for (uint32_t j = 0; j <= step->num_inputs; j++) {
            uint32_t t = j < step->num_inputs ? step->inputs[j] : step->output;
            const BackendTensorInfo *info = &step->infos[j];
            if (t >= header.num_slots || info->num_dimensions > BACKEND_MAX_DIMENSIONS)
                OD_REFUSE("step %u: tensor %u is malformed", i, j);
            for (uint32_t d = 0; d < info->num_dimensions; d++)
                if (info->dimensions[d] < 1 || info->dimensions[d] > ((int64_t)1 << 30))
                    OD_REFUSE("step %u: tensor %u has a dimension out of range", i, j);
        }
        status = od_make_step(p, step, message, message_size);   /* the layer's own checks */
        if (status != BACKEND_STATUS_OK)
            goto done;
        for (uint32_t j = 0; j <= step->num_inputs; j++) {
            uint32_t t = j < step->num_inputs ? step->inputs[j] : step->output;
            if (od_count(&step->infos[j]) * sizeof(float) != p->slots[t].bytes)
                OD_REFUSE("step %u: tensor %u does not have the size of its shape", i, j);
        }
    }
    p->num_steps = (OD_PROGRAM_STEP_COUNT)header.num_steps;
    for (uint32_t s = 0; s < header.num_slots; s++) {
        OdSlot *slot = &p->slots[s];
        if (slot->kind == OD_SLOT_CONSTANT) {
            slot->data = malloc(slot->bytes ? slot->bytes : 1);
            if (slot->data == NULL)
                OD_REFUSE("no memory for the %llu bytes of tensor %u", (unsigned long long)slot->bytes, s);
            OD_TAKE(slot->data, slot->bytes, "the constants");
        } else if (slot->kind == OD_SLOT_INTERNAL) {
            slot->data = calloc(slot->bytes ? slot->bytes / sizeof(float) : 1, sizeof(float));
            if (slot->data == NULL)
                OD_REFUSE("no memory for the %llu bytes of tensor %u", (unsigned long long)slot->bytes, s);
        }
    }
    if (rest != 0)
        OD_REFUSE("%llu bytes past the end of the program", (unsigned long long)rest);
done:
    free(seen);
    if (status != BACKEND_STATUS_OK) {
        if (p != NULL)
            od_program_destroy(&p->base);
        return status;
    }
    *compiled = &p->base;
    return BACKEND_STATUS_OK;
}

#undef OD_TAKE
#undef OD_REFUSE

#endif /* ONE_DEFECT_BLOB_H */
