/* Defect: the rank check of the layer types of 1.3 admits every rank up to
   BACKEND_MAX_DIMENSIONS, and is_layer_supported plans a Transpose with a planner chosen by
   rank from a table that holds ranks 1 to 6 only: a rank-7 Transpose calls a NULL planner and
   crashes. A runtime never sends one; the raw interface does.
   Requirement: SUP-4 */
#define OD_BACKEND_ID "DefectTransposeRank7"
#define OD_RANK_KNOWN(r) ((r) >= 1 && (r) <= BACKEND_MAX_DIMENSIONS) /* the defect */
#define OD_OWN_IS_LAYER_SUPPORTED
#include "base.h"

typedef void Planner(const uint32_t *perm, uint32_t *inverse);

static void plan(const uint32_t *perm, uint32_t *inverse)
{
    for (uint32_t d = 0; d < BACKEND_MAX_LAYER_RANK; d++)
        inverse[perm[d] % BACKEND_MAX_LAYER_RANK] = d;
}

static Planner *const PLANNERS[BACKEND_MAX_DIMENSIONS + 1] = {NULL, plan, plan, plan, plan, plan, plan};

static BackendStatus od_is_layer_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                           char *message, size_t message_size)
{
    BackendStatus status = od_check_layer(layer, message, message_size);
    (void)self;
    if (status == BACKEND_STATUS_OK && layer->layer_type == BACKEND_LAYER_TRANSPOSE) {
        uint32_t inverse[BACKEND_MAX_DIMENSIONS];
        PLANNERS[layer->inputs[0].num_dimensions](((const BackendTransposeDescriptor *)layer->descriptor)->perm,
                                                  inverse);
    }
    return status;
}
