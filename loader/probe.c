/*
 * dynamic-backend-probe FILE
 *
 * Loads FILE the way the loader does, in a process of its own, so that a library that crashes,
 * hangs or exits while loading never takes the host process with it. It calls the three entry
 * points, creates and destroys one instance, closes the library, and reports its progress on
 * stdout, one line per stage:
 *
 *     stage load | stage entry-points | stage factory | stage unload | done
 *
 * A line "refused <message>" means the dynamic linker refused the file, with its message: the
 * host then reports that and never loads the file itself, because this program is not the host
 * (it lacks the host's exported symbols and preloads), so a load that failed here proves nothing
 * about a load there. A line "missing-entry-points" means the library loaded and unloaded
 * cleanly but lacks an entry point: the host's own load reports which. The host judges the probe
 * by how it ended: "done" and exit status 0 is a pass; a signal, another exit or silence past
 * its deadline is not.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "backend_api.h"

static void stage(const char *name)
{
    printf("stage %s\n", name);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    void *handle;
    GetBackendIdFunction get_id;
    GetVersionFunction get_version;
    BackendFactoryFunction factory;
    uint32_t major = 0, minor = 0;
    BackendInstance *instance;

    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    stage("load");
    handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *error = dlerror();
        /* One line: the message itself never contains a newline that matters. */
        printf("refused ");
        for (const char *c = error ? error : "dlopen failed"; *c; c++)
            putchar(*c == '\n' ? ' ' : *c);
        printf("\ndone\n");
        fflush(stdout);
        return 0;
    }
    stage("entry-points");
    get_id = (GetBackendIdFunction)dlsym(handle, "GetBackendId");
    get_version = (GetVersionFunction)dlsym(handle, "GetVersion");
    factory = (BackendFactoryFunction)dlsym(handle, "BackendFactory");
    if (get_id == NULL || get_version == NULL || factory == NULL) {
        printf("missing-entry-points\n");
        stage("unload");
        dlclose(handle);
        printf("done\n");
        fflush(stdout);
        return 0;
    }
    (void)get_id();
    get_version(&major, &minor);
    stage("factory");
    instance = (BackendInstance *)factory();
    if (instance != NULL && major == BACKEND_API_VERSION_MAJOR &&
        instance->struct_size >= BACKEND_INSTANCE_SIZE_1_0 && instance->destroy != NULL)
        instance->destroy(instance);
    stage("unload");
    dlclose(handle);
    printf("done\n");
    fflush(stdout);
    return 0;
}
