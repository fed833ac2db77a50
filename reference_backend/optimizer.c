/*
 * The reference backend's sub-graph optimizer (Backend API 1.2).
 *
 * Every sub-graph it is offered becomes one substitution (or one per MAX_LAYERS layers of a
 * longer one): a program that runs all the layers it takes, in order, in a single execute()
 * call. Its steps are fused kernels and single layers
 * (the workloads of layers.c). A Convolution2d, DepthwiseConvolution2d or FullyConnected layer
 * is fused with what alone reads its output (optimizer_fusion.c): a BatchNormalization folded
 * into its weights, an Addition of a residual of the output's shape, an Activation or a swish
 * (sigmoid and product); the fused kernel adds the residual and applies the activation in the
 * epilogue of the convolution or GEMM, on each part of the output as soon as it is final, so
 * those intermediate tensors never exist. A swish on any other tensor is one step. Every other intermediate
 * tensor lives in one arena allocated once, when the program is made, at an offset planned from
 * the tensors' lifetimes so that tensors never alive at once share bytes. A layer
 * ref_check_layer() refuses is failed with its reason (the layers after it then form further
 * programs, so that no substitution needs another's output and its own).
 *
 * Each step reports one profiling event per execution naming the layers it runs (their debug
 * handles); fused kernels add a "macs" counter. A program serializes to self-contained bytes
 * (its slots, its steps, the fused kernels' geometry and every constant it reads) that
 * ref_load_compiled_subgraph() checks and loads again.
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer_internal.h"

static uint64_t aligned(uint64_t n) { return (n + ARENA_ALIGNMENT - 1) / ARENA_ALIGNMENT * ARENA_ALIGNMENT; }

/* The residual slot whose bytes step i's output takes, or UINT32_MAX: a convolution that adds a
   residual nothing reads after it writes its output over it, where its kernel may
   (rk_conv_residual_in_place). Both are arena tensors of the same size, the residual is no
   other operand of the step, and the step is not part of a pipeline (`piped`). */
static uint32_t residual_taken(const Program *p, uint32_t i, const uint32_t *first, const uint32_t *last,
                               int piped)
{
    const Step *step = &p->steps[i];
    if (piped || step->record.kind != STEP_FUSED || step->fused == NULL)
        return UINT32_MAX;
    const FusedKernel *k = (const FusedKernel *)step->fused;
    const int32_t input = k->operands[OPERAND_RESIDUAL].input;
    if (k->layer_type != BACKEND_LAYER_CONVOLUTION2D || k->groups != 1 || !k->has_residual || input < 0 ||
        (uint32_t)input >= step->record.num_inputs || k->epilogue.ldr != k->channels_out)
        return UINT32_MAX;
    const uint32_t r = step->inputs[input], out = step->record.output;
    if (r >= p->num_slots || out >= p->num_slots || p->slots[r].kind != SLOT_ARENA ||
        p->slots[out].kind != SLOT_ARENA || p->slots[r].bytes != p->slots[out].bytes ||
        p->slots[out].bytes != k->output_bytes || last[r] != i || first[out] != i)
        return UINT32_MAX;
    for (uint32_t j = 0; j < step->record.num_inputs; j++)
        if (j != (uint32_t)input && step->inputs[j] == r)
            return UINT32_MAX;
    for (int o = 0; o < OPERAND_COUNT; o++)             /* one input may serve two operands */
        if (o != OPERAND_RESIDUAL && k->operands[o].input == input)
            return UINT32_MAX;
    return rk_conv_residual_in_place(&k->window, k->channels_out, k->packed != NULL) ? r : UINT32_MAX;
}

/* The slot whose bytes a Reshape step's output shares, or UINT32_MAX: the Reshape moves no
   value, so its output is its input's bytes (both arena tensors). */
static uint32_t reshape_of(const Program *p, uint32_t i)
{
    const Step *step = &p->steps[i];
    if (step->record.kind != STEP_LAYER || step->record.layer_type != BACKEND_LAYER_RESHAPE ||
        step->record.num_inputs != 1)
        return UINT32_MAX;
    const uint32_t in = step->inputs[0], out = step->record.output;
    if (in >= p->num_slots || out >= p->num_slots || in == out || p->slots[in].kind != SLOT_ARENA ||
        p->slots[out].kind != SLOT_ARENA || p->slots[in].bytes != p->slots[out].bytes)
        return UINT32_MAX;
    return in;
}

/* Greedy first-fit by lifetime: each arena slot, in the order its tensor is first written, goes
   to the lowest offset that overlaps no slot whose lifetime [first, last] (step indices) meets
   its own; or to the offset of the slot whose bytes it takes (`takes`, always a slot placed
   before it), which no other slot alive from its first step on overlaps:
   - a Reshape's output takes its input's bytes (a chain of Reshapes, the first input's),
     whose lifetime is extended to the output's last read: the bytes live while any of their
     names is read (each name's own lifetime already keeps other slots off them);
   - a convolution's output takes the residual it alone still reads (residual_taken), which
     dies at that step; not a residual that shares bytes with another slot.
   Returns the arena size, UINT64_MAX when out of memory. */
uint64_t ref_plan_arena(Program *p, const uint32_t *first, const uint32_t *last_in)
{
    const uint32_t n = p->num_slots;
    Slot *slots = p->slots;
    uint64_t size = 0;
    uint32_t *placed = malloc((n ? n : 1) * sizeof *placed), count = 0;
    uint32_t *takes = malloc((n ? n : 1) * sizeof *takes);
    uint32_t *last = malloc((n ? n : 1) * sizeof *last);
    if (placed == NULL || takes == NULL || last == NULL) {
        free(placed);
        free(takes);
        free(last);
        return UINT64_MAX;
    }
    for (uint32_t s = 0; s < n; s++) {
        takes[s] = UINT32_MAX;
        last[s] = last_in[s];
    }
    /* in step order, so a Reshape of a Reshape's output finds that output's bytes taken */
    for (uint32_t i = 0; i < p->num_steps; i++) {
        const uint32_t in = reshape_of(p, i);
        if (in == UINT32_MAX)
            continue;
        const uint32_t root = takes[in] != UINT32_MAX ? takes[in] : in, out = p->steps[i].record.output;
        takes[out] = root;
        if (last[root] < last[out])
            last[root] = last[out];
    }
    for (uint32_t i = 0, piped = 0; i < p->num_steps; i++) {
        piped = p->steps[i].pipeline > 0 ? (uint32_t)p->steps[i].pipeline : piped > 0 ? piped - 1 : 0;
        const uint32_t r = residual_taken(p, i, first, last, piped > 0);
        if (r != UINT32_MAX && takes[r] == UINT32_MAX)
            takes[p->steps[i].record.output] = r;
    }
    for (uint32_t step = 0;; step++) {
        int any = 0;
        for (uint32_t s = 0; s < n; s++) {
            if (slots[s].kind != SLOT_ARENA)
                continue;
            any |= first[s] >= step;
            if (first[s] != step)
                continue;
            uint64_t offset = 0;
            for (int moved = takes[s] == UINT32_MAX; moved;) {
                moved = 0;
                for (uint32_t q = 0; q < count; q++) {
                    const Slot *o = &slots[placed[q]];
                    if (first[placed[q]] > last[s] || last[placed[q]] < first[s])
                        continue;                   /* never alive together */
                    if (offset < o->offset + aligned(o->bytes) && o->offset < offset + aligned(slots[s].bytes)) {
                        offset = o->offset + aligned(o->bytes);
                        moved = 1;
                    }
                }
            }
            if (takes[s] != UINT32_MAX)
                offset = slots[takes[s]].offset;
            slots[s].offset = offset;
            placed[count++] = s;
            if (offset + aligned(slots[s].bytes) > size)
                size = offset + aligned(slots[s].bytes);
        }
        if (!any)
            break;
    }
    free(placed);
    free(takes);
    free(last);
    return size;
}

/* The slot of `tensor`, added on first use. */
static uint32_t slot_of(Program *p, int64_t *slot_of_tensor, const BackendSubgraph *g, uint32_t tensor,
                        const int32_t *boundary_out, const int32_t *boundary_in)
{
    const BackendSubgraphTensor *t = g->tensors[tensor];
    Slot *slot;
    if (slot_of_tensor[tensor] >= 0)
        return (uint32_t)slot_of_tensor[tensor];
    slot = &p->slots[p->num_slots];
    slot->bytes = (uint64_t)elements(&t->info) * sizeof(float);
    if (t->kind == BACKEND_SUBGRAPH_TENSOR_CONSTANT) {
        slot->kind = SLOT_CONSTANT;
        p->constants[p->num_slots] = t->data;
    } else if (boundary_in[tensor] >= 0) {
        slot->kind = SLOT_INPUT;
        slot->index = (uint32_t)boundary_in[tensor];
    } else if (boundary_out[tensor] >= 0) {
        slot->kind = SLOT_OUTPUT;
        slot->index = (uint32_t)boundary_out[tensor];
    } else {
        slot->kind = SLOT_ARENA;
    }
    slot_of_tensor[tensor] = p->num_slots;
    return p->num_slots++;
}

/* Compiles the layers of group `mine` into one program and records the substitution. */
static BackendStatus compile_group(const BackendSubgraph *g, const ReaderTable *readers,
                                   const int32_t *group, int32_t mine,
                                   BackendOptimizationViews *views)
{
    uint32_t n = g->num_layers, nt = g->num_tensors, num_ids = 0, num_in = 0, num_out = 0;
    Program *p = calloc(1, sizeof *p);
    int64_t *slot_of_tensor = malloc((nt ? nt : 1) * sizeof *slot_of_tensor);
    int32_t *boundary_in = malloc((nt ? nt : 1) * sizeof *boundary_in);
    int32_t *boundary_out = malloc((nt ? nt : 1) * sizeof *boundary_out);
    uint32_t *in_list = malloc((nt ? nt : 1) * sizeof *in_list);
    uint32_t *out_list = malloc((nt ? nt : 1) * sizeof *out_list);
    uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    char *taken = calloc(n ? n : 1, 1), *produced = calloc(nt ? nt : 1, 1);
    char *read_elsewhere = calloc(nt ? nt : 1, 1);   /* by another group or after the sub-graph */
    uint32_t *first = NULL, *last = NULL;
    uint32_t max_slots = nt + 1;        /* one slot per tensor at most */
    BackendStatus status = BACKEND_STATUS_OK;
    char message[256] = "";

    if (p == NULL || slot_of_tensor == NULL || boundary_in == NULL || boundary_out == NULL ||
        in_list == NULL || out_list == NULL || ids == NULL || taken == NULL || produced == NULL ||
        read_elsewhere == NULL)
        goto out_of_memory;
    for (uint32_t o = 0; o < g->num_outputs; o++)
        read_elsewhere[g->outputs[o]] = 1;
    for (uint32_t i = 0; i < n; i++)
        if (group[i] != mine)
            for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++)
                read_elsewhere[g->layers[i]->input_tensors[j]] = 1;
    p->slots = calloc(max_slots, sizeof *p->slots);
    p->constants = calloc(max_slots, sizeof *p->constants);
    p->steps = calloc(n ? n : 1, sizeof *p->steps);
    first = calloc(max_slots, sizeof *first);
    last = calloc(max_slots, sizeof *last);
    if (p->slots == NULL || p->constants == NULL || p->steps == NULL || first == NULL || last == NULL)
        goto out_of_memory;
    for (uint32_t t = 0; t < nt; t++) {
        slot_of_tensor[t] = -1;
        boundary_in[t] = boundary_out[t] = -1;
    }
    /* the boundary: what the group's layers read and do not produce, what they produce that
       anything else reads */
    for (uint32_t i = 0; i < n; i++)
        if (group[i] == mine) {
            ids[num_ids++] = g->layers[i]->id;
            produced[g->layers[i]->output_tensors[0]] = 1;
        }
    for (uint32_t i = 0; i < n; i++)
        if (group[i] == mine) {
            const BackendSubgraphLayer *l = g->layers[i];
            for (uint32_t j = 0; j < l->description->num_inputs; j++) {
                uint32_t t = l->input_tensors[j];
                if (!produced[t] && g->tensors[t]->kind != BACKEND_SUBGRAPH_TENSOR_CONSTANT &&
                    boundary_in[t] < 0) {
                    boundary_in[t] = (int32_t)num_in;
                    in_list[num_in++] = t;
                }
            }
            uint32_t o = l->output_tensors[0];
            if (boundary_out[o] < 0 && read_elsewhere[o]) {
                boundary_out[o] = (int32_t)num_out;
                out_list[num_out++] = o;
            }
        }
    p->num_inputs = num_in;
    p->num_outputs = num_out;
    for (uint32_t i = 0; i < n; i++) {
        const BackendSubgraphLayer *l = g->layers[i];
        BackendLayerType type = l->description->layer_type;
        uint32_t fin[MAX_FUSED_INPUTS] = { 0 }, fout = 0, flast = i;
        FusedKernel *k = NULL;
        if (group[i] != mine || taken[i])
            continue;
        if (type == BACKEND_LAYER_CONVOLUTION2D || type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D ||
            type == BACKEND_LAYER_FULLY_CONNECTED || type == BACKEND_LAYER_ACTIVATION ||
            type == BACKEND_LAYER_MULTIPLICATION) {
            k = ref_fuse(g, readers, i, taken, group, fin, &fout, &flast, &status);
            if (status != BACKEND_STATUS_OK)
                goto out_of_memory;
        }
        if (k != NULL) {
            /* placed where its last layer is: every tensor it reads exists by then */
            for (uint32_t m = 0; m < k->num_layer_ids; m++)
                for (uint32_t q = i; q <= flast; q++)
                    if (g->layers[q]->id == k->layer_ids[m])
                        taken[q] = 1;
            Step *step = &p->steps[p->num_steps++];
            step->fused = &k->base;
            step->record.kind = STEP_FUSED;
            step->record.num_inputs = k->num_inputs;
            step->inputs = malloc(MAX_FUSED_INPUTS * sizeof *step->inputs);
            if (step->inputs == NULL)
                goto out_of_memory;
            for (uint32_t j = 0; j < k->num_inputs; j++)
                step->inputs[j] = fin[j];          /* tensors for now, slots below */
            step->record.output = fout;
            step->record.layer_id = flast;           /* sort key for now */
        } else {
            Step *step = &p->steps[p->num_steps++];
            BackendLayerDescription made;
            uint32_t count = l->description->num_inputs;
            taken[i] = 1;
            step->record.kind = STEP_LAYER;
            step->record.layer_type = type;
            step->record.num_inputs = count;
            step->record.output = l->output_tensors[0];
            step->record.layer_id = i;               /* sort key for now */
            step->inputs = malloc((count ? count : 1) * sizeof *step->inputs);
            if (step->inputs == NULL)
                goto out_of_memory;
            for (uint32_t j = 0; j < count; j++)
                step->inputs[j] = l->input_tensors[j];
            status = ref_create_workload(l->description, &step->workload, message, sizeof message);
            if (status != BACKEND_STATUS_OK)
                goto failed;
            /* the description as the workload holds it: infos copied, the descriptor read only
               as far as its struct_size and completed with defaults, which the bytes keep */
            ref_workload_description(step->workload, &made);
            step->input_infos = malloc((count ? count : 1) * sizeof *step->input_infos);
            if (step->input_infos == NULL)
                goto out_of_memory;
            memcpy(step->input_infos, made.inputs, count * sizeof *step->input_infos);
            step->record.output_info = made.outputs[0];
            if (made.descriptor != NULL)
                memcpy(&step->record.descriptor, made.descriptor, sizeof step->record.descriptor);
        }
    }
    /* execution order: by the position of each step's last layer (insertion sort, stable) */
    for (uint32_t a = 1; a < p->num_steps; a++)
        for (uint32_t b = a; b > 0 && p->steps[b - 1].record.layer_id > p->steps[b].record.layer_id; b--) {
            Step tmp = p->steps[b];
            p->steps[b] = p->steps[b - 1];
            p->steps[b - 1] = tmp;
        }
    for (uint32_t s = 0; s < p->num_steps; s++) {
        StepRecord *r = &p->steps[s].record;
        uint32_t layer = (uint32_t)r->layer_id;
        r->layer_id = r->kind == STEP_LAYER ? g->layers[layer]->id : 0;
        uint32_t *inputs = p->steps[s].inputs;
        for (uint32_t j = 0; j < r->num_inputs; j++) {
            inputs[j] = slot_of(p, slot_of_tensor, g, inputs[j], boundary_out, boundary_in);
            last[inputs[j]] = s;
        }
        r->output = slot_of(p, slot_of_tensor, g, r->output, boundary_out, boundary_in);
        first[r->output] = s;
        if (last[r->output] < s)
            last[r->output] = s;
    }
    ref_plan_relayouts(p, last);
    ref_plan_pipelines(p, last);
    p->arena_bytes = ref_plan_arena(p, first, last);
    if (p->arena_bytes == UINT64_MAX)
        goto out_of_memory;
    status = ref_program_finish(p, message, sizeof message);
    if (status != BACKEND_STATUS_OK)
        goto failed;
    free(slot_of_tensor); free(boundary_in); free(boundary_out); free(taken); free(produced);
    free(read_elsewhere); free(first); free(last);
    /* Ownership of p passes to the runtime with this call. */
    views->add_substitution(views, ids, num_ids, in_list, num_in, out_list, num_out, &p->base);
    free(ids); free(in_list); free(out_list);
    return BACKEND_STATUS_OK;

out_of_memory:
    status = BACKEND_STATUS_OUT_OF_MEMORY;
failed:
    if (p != NULL)
        ref_program_destroy(&p->base);
    free(slot_of_tensor); free(boundary_in); free(boundary_out); free(in_list); free(out_list);
    free(ids); free(taken); free(produced); free(read_elsewhere); free(first); free(last);
    return status;
}

/* Whether every tensor index the sub-graph's layers and outputs name is one of its tensors. */
static int tensor_indices_valid(const BackendSubgraph *g)
{
    for (uint32_t o = 0; o < g->num_outputs; o++)
        if (g->outputs[o] >= g->num_tensors)
            return 0;
    for (uint32_t i = 0; i < g->num_layers; i++) {
        const BackendSubgraphLayer *l = g->layers[i];
        if (l->output_tensors[0] >= g->num_tensors)
            return 0;
        for (uint32_t j = 0; j < l->description->num_inputs; j++)
            if (l->input_tensors[j] >= g->num_tensors)
                return 0;
    }
    return 1;
}

BackendStatus ref_optimize_subgraph(const BackendInstance *self, const BackendSubgraph *subgraph,
                                    BackendOptimizationViews *views, char *message, size_t message_size)
{
    const BackendSubgraph *g = subgraph;
    const uint32_t n = subgraph != NULL ? subgraph->num_layers : 0;
    int32_t *group, *levels, *producer, *chunks, levels_used = 0, groups = 0;
    BackendStatus status = BACKEND_STATUS_OK;
    (void)self;
    if (subgraph == NULL || views == NULL || subgraph->struct_size < BACKEND_SUBGRAPH_SIZE_1_2 ||
        views->struct_size < BACKEND_OPTIMIZATION_VIEWS_SIZE_1_2)
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "malformed sub-graph or views");
    if (subgraph->num_tensors >= MAX_SLOTS)
        return ref_fail(message, message_size, BACKEND_STATUS_UNSUPPORTED,
                        "sub-graphs of more than %u tensors", MAX_SLOTS - 1);
    if (!tensor_indices_valid(g))
        return ref_fail(message, message_size, BACKEND_STATUS_INVALID_ARGUMENT,
                        "a layer or output names a tensor the sub-graph does not have");
    group = calloc(n ? n : 1, sizeof *group);
    levels = calloc(n ? n : 1, sizeof *levels);
    chunks = calloc((size_t)n + 1, sizeof *chunks);
    producer = malloc((g->num_tensors ? g->num_tensors : 1) * sizeof *producer);
    if (group == NULL || levels == NULL || chunks == NULL || producer == NULL) {
        free(group);
        free(levels);
        free(chunks);
        free(producer);
        return ref_fail(message, message_size, BACKEND_STATUS_OUT_OF_MEMORY, "out of memory");
    }
    for (uint32_t t = 0; t < g->num_tensors; t++)
        producer[t] = -1;
    /* A layer ref_check_layer() refuses is failed (group -1). The others are grouped by how many
       failed layers lie on the longest path to them (their level): paths never lead to a lower
       level, so every level is convex and no two levels need each other. Usually there is one. */
    for (uint32_t i = 0; i < n; i++) {
        const BackendSubgraphLayer *layer = g->layers[i];
        char reason[256];
        int32_t level = 0;
        for (uint32_t j = 0; j < layer->description->num_inputs; j++) {
            const int32_t q = producer[layer->input_tensors[j]];
            if (q >= 0 && levels[q] + (group[q] < 0) > level)
                level = levels[q] + (group[q] < 0);
        }
        levels[i] = level;
        producer[layer->output_tensors[0]] = (int32_t)i;
        if (ref_check_layer(layer->description, reason, sizeof reason) != BACKEND_STATUS_OK) {
            views->add_failed(views, layer->id, reason);
            group[i] = -1;
        } else {
            group[i] = level;
            if (level + 1 > levels_used)
                levels_used = level + 1;
        }
    }
    /* A level of more than MAX_LAYERS layers is cut, in layer order, into programs of at most
       that many: the layers are in topological order, so a path from one part to another only
       leads forward and each part stays convex. Groups are numbered by (level, part), an order
       in which no group needs a later one. */
    for (uint32_t i = 0; i < n; i++)
        if (group[i] >= 0)
            chunks[group[i]]++;
    for (int32_t k = 0; k < levels_used; k++) {
        const int32_t parts = (chunks[k] + MAX_LAYERS - 1) / MAX_LAYERS;
        chunks[k] = groups;                  /* the first group of level k */
        groups += parts;
    }
    {
        int32_t *count = levels;             /* reused: layers of each level met so far */
        memset(count, 0, (n ? n : 1) * sizeof *count);
        for (uint32_t i = 0; i < n; i++)
            if (group[i] >= 0) {
                const int32_t k = group[i];
                group[i] = chunks[k] + count[k]++ / MAX_LAYERS;
            }
    }
    ReaderTable readers;
    status = ref_readers_init(&readers, g);
    for (int32_t k = 0; k < groups && status == BACKEND_STATUS_OK; k++) {
        int any = 0;
        for (uint32_t i = 0; i < n; i++)
            any |= group[i] == k;
        if (any)
            status = compile_group(g, &readers, group, k, views);
    }
    ref_readers_free(&readers);
    free(levels);
    free(group);
    free(chunks);
    free(producer);
    if (status != BACKEND_STATUS_OK)
        return ref_fail(message, message_size, status, "could not compile a sub-graph");
    return BACKEND_STATUS_OK;
}
