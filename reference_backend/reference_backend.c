/*
 * The reference CPU backend, id "CpuRef".
 *
 * Instances are stateless: every instance is an independent allocation holding only the
 * function table, so any number may exist at once and each may be destroyed at any time.
 */
#include <stdlib.h>

#include "backend_api.h"

static const char BACKEND_ID[] = "CpuRef";

static const char *instance_get_id(const BackendInstance *self)
{
    (void)self;
    return BACKEND_ID;
}

static void instance_destroy(BackendInstance *self)
{
    free(self);
}

BACKEND_EXPORT const char *GetBackendId(void)
{
    return BACKEND_ID;
}

BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{
    *major = BACKEND_API_VERSION_MAJOR;
    *minor = BACKEND_API_VERSION_MINOR;
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *instance = calloc(1, sizeof *instance);
    if (instance == NULL)
        return NULL;
    instance->struct_size = (uint32_t)sizeof *instance;
    instance->api_major = BACKEND_API_VERSION_MAJOR;
    instance->api_minor = BACKEND_API_VERSION_MINOR;
    instance->get_id = instance_get_id;
    instance->destroy = instance_destroy;
    return instance;
}
