/* Defect: a compiled program lines a lower-rank operand of a broadcasting layer up with the
   output's first axes (padding its shape with ones at the end) wherever that shape still
   broadcasts, instead of with the last axes as NumPy does. Workloads broadcast correctly.
   Requirement: NET-8 */
#define OD_BACKEND_ID "DefectBroadcastLeftAligned"
#define OD_OWN_OPERAND_INFO
#include "base.h"

static BackendTensorInfo od_operand_info(const BackendTensorInfo *t, const BackendTensorInfo *out)
{
    BackendTensorInfo left = *t;
    if (t->num_dimensions >= out->num_dimensions)
        return *t;
    for (uint32_t d = t->num_dimensions; d < out->num_dimensions; d++)  /* the defect */
        left.dimensions[d] = 1;
    left.num_dimensions = out->num_dimensions;
    for (uint32_t d = 0; d < out->num_dimensions; d++)
        if (left.dimensions[d] != 1 && left.dimensions[d] != out->dimensions[d])
            return *t;
    return left;
}
