/* Defect: is_available() changes its answer between calls: each instance says yes the first
   time and no after, so the backend loads (the runtime asks a fresh instance once) but cannot
   be relied on. The conformance kit's availability case (the same answer on every call)
   catches it. */
#define MOCK_BACKEND_ID "MockAvailabilityFlips"
#define MOCK_NO_BACKEND_FACTORY
#include <string.h>

#include "skeleton.h"

typedef struct Flipping {
    BackendInstance base;               /* first: mock_instance_destroy frees it */
    int calls;
} Flipping;

static BackendStatus flipping(const BackendInstance *self, char *message, size_t message_size)
{
    Flipping *f = (Flipping *)self;
    if (__atomic_fetch_add(&f->calls, 1, __ATOMIC_RELAXED) == 0)
        return BACKEND_STATUS_OK;
    snprintf(message, message_size, "the device went away");
    return BACKEND_STATUS_UNSUPPORTED;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = mock_new_instance();
    Flipping *f = instance != NULL ? calloc(1, sizeof *f) : NULL;
    if (f == NULL) {
        free(instance);
        return NULL;
    }
    memcpy(&f->base, instance, sizeof f->base);
    free(instance);
    f->base.is_available = flipping;
    return &f->base;
}
