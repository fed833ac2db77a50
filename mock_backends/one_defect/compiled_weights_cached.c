/* Defect: a compiled program copies the weights it is given as boundary inputs (operand 1 of a
   FullyConnected, a convolution or a MatMul) at its first execute and keeps using that copy:
   weights that are network inputs and change between executes are ignored.
   Requirement: NET-9 */
#define OD_BACKEND_ID "DefectCompiledWeightsCached"
#define OD_OWN_BIND_INPUT
#define OD_CACHED 64
#define OD_PROGRAM_STATE float *cached[OD_CACHED];
#define OD_FREE_PROGRAM_STATE(p) do { for (int k_ = 0; k_ < OD_CACHED; k_++) free((p)->cached[k_]); } while (0)
#include "base.h"

static int od_read_as_weights(const OdProgram *p, uint32_t index)
{
    for (uint32_t i = 0; i < p->num_steps; i++) {
        const OdStep *step = &p->steps[i];
        const OdSlot *slot = &p->slots[step->inputs[step->num_inputs > 1 ? 1 : 0]];
        if (step->num_inputs > 1 && slot->kind == OD_SLOT_INPUT && slot->index == index &&
            (step->type == BACKEND_LAYER_FULLY_CONNECTED || step->type == BACKEND_LAYER_CONVOLUTION2D ||
             step->type == BACKEND_LAYER_DEPTHWISE_CONVOLUTION2D || step->type == BACKEND_LAYER_MAT_MUL))
            return 1;
    }
    return 0;
}

static float *od_bind_input(OdProgram *p, uint32_t index, const BackendBuffer *buffer)
{
    if (index >= OD_CACHED || !od_read_as_weights(p, index))
        return buffer->data;
    if (p->cached[index] == NULL) {     /* the defect: packed once, never refreshed */
        p->cached[index] = malloc(buffer->size_bytes ? buffer->size_bytes : 1);
        if (p->cached[index] == NULL)
            return buffer->data;
        memcpy(p->cached[index], buffer->data, buffer->size_bytes);
    }
    return p->cached[index];
}
