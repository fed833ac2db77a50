/* Not a defect: built against Backend API 1.2, the minor version before 1.3, and it answers yes
   to every support query (it cannot read what 1.3 added, so it cannot know better). The runtime
   must never offer it a 1.3 layer type, nor a descriptor whose 1.3 members differ from their
   defaults (CHANGELOG 1.3): it answers "not supported by this backend's API version" for those
   without asking. It runs Activation relu. */
#define MOCK_BACKEND_ID "MockMinor12SaysYes"
#define MOCK_VERSION_MINOR 2
#define MOCK_RUNS_RELU
#define MOCK_NO_BACKEND_FACTORY
#include "skeleton.h"

static BackendStatus says_yes(const BackendInstance *self, const BackendLayerDescription *layer,
                              char *message, size_t message_size)
{
    (void)self; (void)layer; (void)message; (void)message_size;
    return BACKEND_STATUS_OK;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    if (instance != NULL) {
        instance->struct_size = (uint32_t)BACKEND_INSTANCE_SIZE_1_2;
        instance->is_layer_supported = says_yes;
    }
    return instance;
}
