/*
 * The least a loader can do per backend: dlopen(RTLD_NOW | RTLD_LOCAL), three dlsym() and a
 * call of each entry point (the factory's instance is destroyed again).
 *
 *     dlopen_floor FILE...    prints "<loaded> <nanoseconds>"
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "backend_api.h"

int main(int argc, char **argv)
{
    struct timespec t0, t1;
    int loaded = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 1; i < argc; i++) {
        void *handle = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
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
        loaded++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d %lld\n", loaded, (long long)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)));
    return 0;
}
