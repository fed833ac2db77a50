/*
 * Layers that move data without arithmetic: Reshape, Concatenation, Slice, Transpose, Pad.
 */
#include <string.h>

#include "layers_internal.h"

/* ---- Reshape ------------------------------------------------------------------------------ */

static BackendStatus check_reshape(const BackendLayerDescription *layer, const RefDescriptor *d,
                                   char *message, size_t message_size)
{
    (void)d;
    if (ref_elements(&layer->inputs[0]) != ref_elements(&layer->outputs[0]))
        return INVALID("Reshape from %lld to %lld elements",
                       (long long)ref_elements(&layer->inputs[0]),
                       (long long)ref_elements(&layer->outputs[0]));
    return BACKEND_STATUS_OK;
}

static int run_reshape(const RefWorkload *w, const float *const *in, float *out)
{
    memmove(out, in[0], (size_t)ref_elements(&w->output) * sizeof(float));
    return 0;
}

const RefLayerEntry ref_layer_reshape = {
    .name = "Reshape", .min_inputs = 1, .max_inputs = 1,
    .check = check_reshape, .run = run_reshape,
};

/* ---- Concatenation, Slice, Transpose, Pad ------------------------------------------------- */

const RefLayerEntry ref_layer_concatenation = {
    .name = "Concatenation", .min_inputs = 1, .max_inputs = REF_MAX_INPUTS,
    .descriptor_min_size = BACKEND_CONCATENATION_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendConcatenationDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};

const RefLayerEntry ref_layer_slice = {
    .name = "Slice", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_SLICE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendSliceDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};

const RefLayerEntry ref_layer_transpose = {
    .name = "Transpose", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_TRANSPOSE_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendTransposeDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};

const RefLayerEntry ref_layer_pad = {
    .name = "Pad", .min_inputs = 1, .max_inputs = 1,
    .descriptor_min_size = BACKEND_PAD_DESCRIPTOR_SIZE_1_3,
    .descriptor_size = sizeof(BackendPadDescriptor), .since_1_3 = 1,
    .check = ref_check_unsupported,
};
