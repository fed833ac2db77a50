/* Defect: execute checks the size of every input buffer but not the output's: an output
   buffer smaller than the tensor is accepted and written past its end.
   Requirement: EXEC-1 */
#define OD_BACKEND_ID "DefectOutputUnchecked"
#define OD_OWN_CHECK_BUFFERS
#include "base.h"

static BackendStatus od_check_buffers(OdWorkload *w, const BackendBuffer *inputs, uint32_t num_inputs,
                                      const BackendBuffer *outputs, uint32_t num_outputs, char *message,
                                      size_t message_size)
{
    if (num_inputs != w->num_inputs || num_outputs != 1 || inputs == NULL || outputs == NULL)
        return OD_INVALID("expected %u inputs and 1 output", w->num_inputs);
    for (uint32_t i = 0; i < num_inputs; i++) { /* the defect: the output is not checked */
        if (inputs[i].struct_size < BACKEND_BUFFER_SIZE_1_1 || inputs[i].data == NULL)
            return OD_INVALID("buffer %u is malformed", i);
        if (inputs[i].size_bytes < (uint64_t)od_count(&w->in[i]) * sizeof(float))
            return OD_INVALID("buffer %u is too small", i);
    }
    return outputs[0].data == NULL ? OD_INVALID("no output buffer") : BACKEND_STATUS_OK;
}
