/* Defect: is_layer_supported writes its reason into a local buffer and returns the status
   without copying it: every refusal comes with an empty message.
   Requirement: SUP-2 */
#define OD_BACKEND_ID "DefectEmptyReason"
#define OD_OWN_IS_LAYER_SUPPORTED
#include "base.h"

static BackendStatus od_is_layer_supported(const BackendInstance *self, const BackendLayerDescription *layer,
                                           char *message, size_t message_size)
{
    char reason[256];
    (void)self;
    if (message != NULL && message_size > 0)
        message[0] = '\0';
    return od_check_layer(layer, reason, sizeof reason); /* the defect: reason never copied */
}
