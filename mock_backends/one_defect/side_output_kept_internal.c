/* Defect: a tensor that a sub-graph both reads again and hands out (a side output across its
   boundary) is kept in the program's own buffer: the program reads it correctly, but never
   writes the boundary output it was given for it.
   Requirement: NET-8 */
#define OD_BACKEND_ID "DefectSideOutputInternal"
#define OD_OWN_SLOT_IS_OUTPUT
#include "base.h"

static int od_slot_is_output(const BackendSubgraph *g, uint32_t t)
{
    int listed = 0;
    for (uint32_t k = 0; k < g->num_outputs; k++)
        listed |= g->outputs[k] == t;
    for (uint32_t i = 0; i < g->num_layers; i++)      /* the defect: read inside, so internal */
        for (uint32_t j = 0; j < g->layers[i]->description->num_inputs; j++)
            if (g->layers[i]->input_tensors[j] == t)
                return 0;
    return listed;
}
