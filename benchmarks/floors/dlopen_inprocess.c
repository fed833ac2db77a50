/*
 * The dlopen floor: dlopen(RTLD_NOW | RTLD_LOCAL), three dlsym() and a call of each entry point
 * per backend, as a function. dlopen_floor.c runs it as a bare C program; a benchmark also
 * loads it as a library and calls it once, through ctypes, with every path, to measure the same
 * loop inside a Python process.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>

#include "backend_api.h"

int64_t load_all(const char *const *paths, int count, int *loaded)
{
    struct timespec t0, t1;
    *loaded = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < count; i++) {
        void *handle = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        GetBackendIdFunction id;
        GetVersionFunction version;
        BackendFactoryFunction factory;
        uint32_t major = 0, minor = 0;
        BackendInstance *instance;
        if (handle == NULL)
            continue;
        id = (GetBackendIdFunction)dlsym(handle, "GetBackendId");
        version = (GetVersionFunction)dlsym(handle, "GetVersion");
        factory = (BackendFactoryFunction)dlsym(handle, "BackendFactory");
        if (id == NULL || version == NULL || factory == NULL || id() == NULL)
            continue;
        version(&major, &minor);
        instance = factory();
        if (instance == NULL || major != BACKEND_API_VERSION_MAJOR)
            continue;
        instance->destroy(instance);
        (*loaded)++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
}
