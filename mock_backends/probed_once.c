/* Valid, but only if the runtime probes the factory once at load (rule 5.5): is_available()
   says yes on the first instance the factory ever made and no on any later one, so a loader
   that made one instance for the header check and another to ask about availability would
   skip it as backend-unavailable. */
#define MOCK_BACKEND_ID "MockProbedOnce"
#define MOCK_NO_BACKEND_FACTORY
#include <string.h>

#include "skeleton.h"

typedef struct Numbered {
    BackendInstance base;               /* first: mock_instance_destroy frees it */
    int number;                         /* 1 for the first instance the factory made */
} Numbered;

static int made;

static BackendStatus first_only(const BackendInstance *self, char *message, size_t message_size)
{
    if (((const Numbered *)self)->number == 1)
        return BACKEND_STATUS_OK;
    snprintf(message, message_size, "asked on instance %d: the factory was called again",
             ((const Numbered *)self)->number);
    return BACKEND_STATUS_UNSUPPORTED;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    Numbered *n = instance != NULL ? calloc(1, sizeof *n) : NULL;
    if (n == NULL) {
        free(instance);
        return NULL;
    }
    memcpy(&n->base, instance, sizeof n->base);
    free(instance);
    n->base.is_available = first_only;
    n->number = __atomic_add_fetch(&made, 1, __ATOMIC_RELAXED);
    return &n->base;
}
