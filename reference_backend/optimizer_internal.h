/*
 * Shared by the sub-graph optimizer's files (see optimizer.c for what it does):
 *   optimizer.c           grouping the layers, building each group's program, planning its arena
 *   optimizer_fusion.c    which layers fuse, and the fused kernel that replaces them
 *   optimizer_execute.c   the compiled sub-graphs at run time: programs and fused kernels
 *   optimizer_format.c    their serialized form, written and checked on load
 *   optimizer_profiling.c the profiling context their steps report to
 */
#ifndef REFERENCE_BACKEND_OPTIMIZER_INTERNAL_H
#define REFERENCE_BACKEND_OPTIMIZER_INTERNAL_H

#include <stdint.h>

#include "kernels.h"
#include "layers_internal.h"

#define MAX_LAYERS 4096
/* Most tensors (slots) one program has: its layers' inputs and outputs, Concatenation's many. */
#define MAX_SLOTS ((uint32_t)1 << 20)

/* Where a fused kernel finds an operand: a constant (kept valid by the runtime while the
   compiled sub-graph lives) or one of its boundary input buffers. */
typedef struct Operand {
    const float *constant;
    int32_t input;                      /* index into the boundary inputs, or -1 */
    uint64_t bytes;                     /* what the operand must hold */
} Operand;

enum { OPERAND_X, OPERAND_W, OPERAND_BIAS, OPERAND_RESIDUAL, OPERAND_SCALE, OPERAND_COUNT };

/* ---- profiling (optimizer_profiling.c) ------------------------------------------------------ */

/* Most layers one fused kernel replaces: the Multiplication that scales its input, a layer, a
   BatchNormalization folded into it, a residual Addition, and an Activation or the two layers
   of a swish. */
#define MAX_FUSED_LAYERS 6

/* Most layers one event covers: three fused kernels run as one pipeline (ref_plan_pipelines). */
#define MAX_EVENT_LAYERS (3 * MAX_FUSED_LAYERS)

typedef struct RefEvent {
    const char *name;
    uint64_t layer_ids[MAX_EVENT_LAYERS];
    uint32_t num_layer_ids;
    int64_t start_ns, end_ns;
} RefEvent;

/* One per loaded network: the executions of one network never overlap, so no lock. */
struct RefProfiling {
    BackendProfilingContext base;       /* first */
    int enabled;
    RefEvent *events;
    size_t count, capacity;
    double macs;
};

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t ref_now_ns(void);

/* Records one event (and its multiply-accumulates) of an execution being profiled. */
void ref_record_event(RefProfiling *p, const char *name, const uint64_t *ids, uint32_t n,
                      int64_t start, int64_t end, double macs);

/* ---- the fused kernel ----------------------------------------------------------------------- */

/* A Convolution2d (any groups), DepthwiseConvolution2d or FullyConnected layer with a folded
   BatchNormalization, a residual Addition and an Activation (or swish) in its epilogue, and
   (a pointwise Convolution2d, rk_conv_takes_scale) the Multiplication of its input by a
   per-channel scale before it (a squeeze-and-excitation's, rk_conv2d_scaled); or
   (layer_type Activation) a swish pattern alone, x * sigmoid(x). optimizer_fusion.c makes it,
   optimizer_execute.c runs it, optimizer_format.c writes and reads it. */
typedef struct FusedKernel {
    BackendCompiledSubgraph base;       /* first: the runtime sees a BackendCompiledSubgraph */
    BackendLayerType layer_type;
    Operand operands[OPERAND_COUNT];
    int has_bias, has_residual;
    int has_scale;                      /* OPERAND_SCALE multiplies the input's channels */
    int64_t scale_stride;               /* 0: one scale for all images; window.c: one per image */
    uint32_t num_inputs;
    uint64_t output_bytes;
    int64_t n, k, m;                    /* FullyConnected; n: the elements of a swish alone */
    int transpose_weights;
    rk_conv_params window;              /* convolutions */
    int64_t channels_out;
    int64_t groups;                     /* Convolution2d; 1 for the others */
    rk_epilogue epilogue;
    uint64_t layer_ids[MAX_FUSED_LAYERS]; /* debug handles of the layers replaced */
    uint32_t num_layer_ids;
    RefProfiling *profiling;            /* borrowed, NULL when not profiled */
    void *owned;                        /* constants it holds itself (folded weights and bias,
                                           or read from serialized bytes), or NULL */
    float *packed;                      /* constant weights as the kernel reads them (GEMM or
                                           Winograd), owned, packed when compiled or loaded
                                           (never serialized), or NULL */
    /* set by ref_fused_plan when compiled or loaded, for this process's threads (never
       serialized): the threads its execute passes to the kernel, and the name of its
       profiling events, which says the thread count where it is above one */
    int threads;
    char event_name[64];
} FusedKernel;

/* ---- the program: every layer of one group, run in one call ----------------------------------
 * A compiled sub-graph that runs its steps (fused kernels and single layers) in order. Every
 * tensor a step reads or writes is a slot: a boundary input or output of the substitution, a
 * constant, or a place in one arena allocated once, at compile time (or load time), whose
 * offsets were planned from the tensors' lifetimes so that tensors never live at once share
 * bytes. Slots are handed to the steps as buffers of exactly their size, so every step's own
 * checks bound what it reads and writes. */

enum { SLOT_INPUT = 0, SLOT_OUTPUT = 1, SLOT_ARENA = 2, SLOT_CONSTANT = 3 };
enum { STEP_FUSED = 0, STEP_LAYER = 1 };

/* Most boundary inputs of a fused kernel (x, w, bias, residual, scale). */
#define MAX_FUSED_INPUTS 5
#define ARENA_ALIGNMENT 64
#define MAX_ARENA_BYTES ((uint64_t)1 << 40)

typedef struct Slot {
    uint32_t kind;                      /* SLOT_* */
    uint32_t index;                     /* SLOT_INPUT / SLOT_OUTPUT: boundary position */
    uint64_t offset;                    /* SLOT_ARENA: into the arena; SLOT_CONSTANT: into the
                                           serialized constants */
    uint64_t bytes;
} Slot;

/* What a step is, as serialized (no pointers). In the bytes it is followed by its num_inputs
   input slots (uint32_t each), then for STEP_LAYER the num_inputs tensor infos of its
   description, for STEP_FUSED the payload_bytes of its fused kernel. */
typedef struct StepRecord {
    uint32_t kind;                      /* STEP_* */
    uint32_t num_inputs;
    uint32_t output;                    /* slot */
    uint32_t layer_type;                /* STEP_LAYER */
    uint64_t layer_id;                  /* STEP_LAYER */
    uint64_t payload_bytes;             /* STEP_FUSED: bytes of the fused kernel that follow */
    BackendTensorInfo output_info;      /* STEP_LAYER: the layer's description */
    RefDescriptor descriptor;           /* STEP_LAYER: the workload's copy, defaults applied */
} StepRecord;

typedef struct Step {
    StepRecord record;
    uint32_t *inputs;                   /* record.num_inputs slots, owned */
    BackendTensorInfo *input_infos;     /* STEP_LAYER: record.num_inputs, owned; else NULL */
    BackendCompiledSubgraph *fused;     /* STEP_FUSED */
    BackendWorkload *workload;          /* STEP_LAYER */
    /* never serialized, decided by ref_plan_pipelines in each process: this step and the
       pipeline - 1 after it run as one pipeline (rk_pointwise_depthwise: an expansion, a
       depthwise convolution and a projection, or two of them) on pipeline_threads threads,
       profiled as one event of all their layers */
    int pipeline, pipeline_expands, pipeline_projects, pipeline_threads;
    char pipeline_name[128];
    uint64_t pipeline_layers[MAX_EVENT_LAYERS];
    uint32_t pipeline_num_layers;
    /* never serialized, decided by ref_plan_relayouts in each process: this step, a Transpose
       of an image's planes to channels last, is not run; the convolution after it, the only
       reader of its output, makes its padded copy from the planes (rk_conv2d_channels_first).
       Both are profiled as one event of their layers. */
    int relayout;
    char relayout_name[96];
    uint64_t relayout_layers[MAX_EVENT_LAYERS];
    uint32_t relayout_num_layers;
} Step;

typedef struct Program {
    BackendCompiledSubgraph base;       /* first */
    uint32_t num_inputs, num_outputs, num_slots, num_steps;
    Slot *slots;
    const void **constants;             /* per slot: SLOT_CONSTANT data, else NULL */
    Step *steps;
    uint64_t arena_bytes;
    void *arena;
    void *owned;                        /* constants read from serialized bytes, or NULL */
    uint64_t owned_bytes;
    RefProfiling *profiling;
    BackendBuffer *scratch;             /* per-call buffers: num_slots entries */
    BackendBuffer *step_inputs;         /* per-call buffers of one step: its most inputs */
    int threads;                        /* the most any fused step runs on (held while it runs) */
    float *pipeline_scratch;            /* in the arena, after the planned tensors: the band
                                           buffers of the largest pipeline */
} Program;

static inline int64_t elements(const BackendTensorInfo *info)
{
    int64_t count = 1;
    for (uint32_t d = 0; d < info->num_dimensions; d++)
        count *= info->dimensions[d];
    return count;
}

/* ---- optimizer_fusion.c --------------------------------------------------------------------- */

/* Who reads each tensor of a sub-graph, found in one pass (the fusion rules ask for the readers
   of a tensor at every candidate layer: a scan each time made compiling quadratic). */
typedef struct ReaderTable {
    uint8_t *count;           /* operand slots reading the tensor, saturating at 3 */
    int64_t (*first)[2];      /* the layers of the first two of them */
    uint8_t *is_output;       /* among the sub-graph's outputs */
} ReaderTable;

/* BACKEND_STATUS_OUT_OF_MEMORY or OK; ref_readers_free() either way. */
BackendStatus ref_readers_init(ReaderTable *r, const BackendSubgraph *g);
void ref_readers_free(ReaderTable *r);

/* Tries to fuse layer `head` (in program group `group`) with the layers after it that are not
   `taken_in` yet; on success returns the fused kernel, its boundary inputs in `inputs` (at most
   MAX_FUSED_INPUTS), the tensor it writes in *output and the index of its last layer in *last (the caller marks
   its layers taken). NULL with *status OK: nothing to fuse. */
FusedKernel *ref_fuse(const BackendSubgraph *g, const ReaderTable *readers, uint32_t head,
                      const char *taken_in, const int32_t *group, uint32_t *inputs, uint32_t *output, uint32_t *last,
                      BackendStatus *status);

/* ---- optimizer_execute.c -------------------------------------------------------------------- */

/* Sets the header and the methods of a fused kernel. */
void ref_fused_init(FusedKernel *k);

/* Packs the constant weights of a Convolution2d (one group) or FullyConnected fused kernel
   once, for every execution (k->packed); OUT_OF_MEMORY or OK (also when there is nothing to
   pack). */
BackendStatus ref_fused_pack(FusedKernel *k);

/* Decides the threads a fused kernel runs on (rk_conv2d_step_threads and the like) and names
   its profiling events; after its layers (num_layer_ids) are known. */
void ref_fused_plan(FusedKernel *k);

/* Marks the steps that run as one pipeline (see rk_pointwise_depthwise) and extends the
   lifetimes `last` of their inputs to the pipeline's last step (its output must not be placed
   over them); before the arena is planned. */
void ref_plan_pipelines(Program *p, uint32_t *last);

/* Marks the Transposes of an image's planes whose convolution reads the planes itself (see
   Step.relayout) and extends the lifetime `last` of each one's input to that convolution;
   before the arena is planned. */
void ref_plan_relayouts(Program *p, uint32_t *last);

/* Allocates a program's per-call buffers and arena (arena_bytes, planned; then the pipelines'
   band buffers) and sets its header and methods. */
BackendStatus ref_program_finish(Program *p, char *message, size_t message_size);

/* Frees a program and every step it owns, however far it was built. */
void ref_program_destroy(BackendCompiledSubgraph *self);

/* ---- optimizer.c ---------------------------------------------------------------------------- */

/* Places the arena slots (offsets) from the lifetimes [first, last] of their tensors (step
   indices): a Reshape's output in its input's bytes, a convolution's output over the residual
   it alone still reads where its kernel allows (rk_conv_residual_in_place); after
   ref_plan_pipelines. Returns the arena size, UINT64_MAX when out of memory. */
uint64_t ref_plan_arena(Program *p, const uint32_t *first, const uint32_t *last);

/* ---- optimizer_format.c --------------------------------------------------------------------- */

BackendStatus ref_fused_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                  uint64_t *size, char *message, size_t message_size);
BackendStatus ref_program_serialize(BackendCompiledSubgraph *self, void *buffer, uint64_t capacity,
                                    uint64_t *size, char *message, size_t message_size);

#endif /* REFERENCE_BACKEND_OPTIMIZER_INTERNAL_H */
