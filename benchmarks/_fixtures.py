"""What the benchmarks build for themselves: the floor programs, discovery trees and many
distinct backends."""
import os
import random
import shutil
import subprocess

import loader

HERE = os.path.dirname(os.path.abspath(__file__))


def build_floor(name, directory):
    """Compile floors/<name>.c into ``directory``; returns the program's path."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("the floors need a C compiler (cc)")
    program = os.path.join(directory, name)
    subprocess.run([cc, "-O2", "-I", loader.get_include(), os.path.join(HERE, "floors", name + ".c"),
                    "-o", program, "-ldl"], check=True)
    return program


def run_floor(program, arguments):
    """(count, seconds) as the floor program measured itself."""
    out = subprocess.run([program, *arguments], capture_output=True, text=True, check=True).stdout
    count, nanoseconds = out.split()
    return int(count), int(nanoseconds) / 1e9


def make_tree(root, directories, per_directory, seed=1):
    """The standard discovery tree: in each directory, per ten entries two files with valid
    names, two version links to them, one dangling link and five files with other names."""
    random.seed(seed)
    paths = []
    for d in range(directories):
        directory = os.path.join(root, f"p{d}")
        os.makedirs(directory)
        paths.append(directory)
        for i in range(per_directory):
            kind = i % 10
            if kind < 2:
                open(os.path.join(directory, f"V{d}_B{i}_backend.so.1.2.3"), "w").close()
            elif kind < 4:
                os.symlink(f"V{d}_B{i - 2}_backend.so.1.2.3",
                           os.path.join(directory, f"V{d}_B{i - 2}_backend.so.{kind}"))
            elif kind == 4:
                os.symlink("missing", os.path.join(directory, f"V{d}_N{i}_backend.so"))
            else:
                open(os.path.join(directory, f"lib{d}_{i}_other.so"), "w").close()
    return paths


BACKEND_SOURCE = r"""
#include <stdlib.h>
#include "backend_api.h"
static const char ID[] = "BenchXXXXXXXX";
static const char *get_id(const BackendInstance *self) { (void)self; return ID; }
static void destroy(BackendInstance *self) { free(self); }
static BackendStatus capabilities(const BackendInstance *s, const BackendCapability **c, uint32_t *n)
{ (void)s; *c = NULL; *n = 0; return BACKEND_STATUS_OK; }
static BackendStatus supported(const BackendInstance *s, const BackendLayerDescription *l, char *m, size_t n)
{ (void)s; (void)l; (void)m; (void)n; return BACKEND_STATUS_UNSUPPORTED; }
static BackendStatus factory(const BackendInstance *s, BackendMemoryManager *mm, BackendWorkloadFactory **f,
                             char *m, size_t n)
{ (void)s; (void)mm; (void)m; (void)n; *f = NULL; return BACKEND_STATUS_UNSUPPORTED; }
BACKEND_EXPORT const char *GetBackendId(void) { return ID; }
BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{ *major = BACKEND_API_VERSION_MAJOR; *minor = BACKEND_API_VERSION_MINOR; }
BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *i = calloc(1, sizeof *i);
    if (!i) return NULL;
    i->struct_size = sizeof *i; i->api_major = BACKEND_API_VERSION_MAJOR;
    i->api_minor = BACKEND_API_VERSION_MINOR; i->get_id = get_id; i->destroy = destroy;
    i->get_capabilities = capabilities; i->is_layer_supported = supported;
    i->create_workload_factory = factory;
    return i;
}
"""


def make_backends(directory, count):
    """``count`` distinct valid backends with distinct ids: one is compiled, the others are
    copies whose id string is rewritten in place (same length)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    source = os.path.join(directory, "bench.c")
    with open(source, "w") as f:
        f.write(BACKEND_SOURCE)
    template = os.path.join(directory, "template.so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-I", loader.get_include(),
                    source, "-o", template], check=True)
    with open(template, "rb") as f:
        image = f.read()
    os.unlink(source)
    os.unlink(template)
    assert image.count(b"BenchXXXXXXXX") == 1
    paths = []
    for i in range(count):
        path = os.path.join(directory, f"Bench_B{i:08d}_backend.so")
        with open(path, "wb") as f:
            f.write(image.replace(b"BenchXXXXXXXX", f"Bench{i:08d}".encode()))
        os.chmod(path, 0o755)
        paths.append(path)
    return paths


DEPENDENCY_SOURCE = r"""
#include <time.h>
/* A driver-like dependency: its constructor takes about 1 ms. */
__attribute__((constructor)) static void warm_up(void)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do
        clock_gettime(CLOCK_MONOTONIC, &now);
    while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 1000000L);
}
int dependency_value(void) { return 1; }
"""


def make_backends_with_dependencies(directory, count):
    """``count`` distinct valid backends, each needing its own library (in ``deps/``, found
    through the backend's $ORIGIN run path) whose constructor spins for about 1 ms. Returns the
    backend paths."""
    cc = shutil.which("cc") or shutil.which("gcc")
    deps = os.path.join(directory, "deps")
    os.makedirs(deps)
    source = os.path.join(directory, "dep.c")
    with open(source, "w") as f:
        f.write(DEPENDENCY_SOURCE)
    template_dep = os.path.join(deps, "libdepXXXXXXXX.so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", source, "-o", template_dep], check=True)
    source = os.path.join(directory, "bench.c")
    with open(source, "w") as f:
        f.write(BACKEND_SOURCE.replace("{ *major = BACKEND_API_VERSION_MAJOR;",
                                       "{ *major = BACKEND_API_VERSION_MAJOR + dependency_value() - 1;")
                .replace('static const char ID[]', 'int dependency_value(void);\nstatic const char ID[]'))
    template = os.path.join(directory, "template.so")
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-I", loader.get_include(),
                    source, "-o", template, "-L", deps, "-ldepXXXXXXXX",
                    "-Wl,-rpath,$ORIGIN/deps"], check=True)
    with open(template, "rb") as f:
        image = f.read()
    with open(template_dep, "rb") as f:
        dep_image = f.read()
    for leftover in (source, os.path.join(directory, "dep.c"), template, template_dep):
        os.unlink(leftover)
    assert image.count(b"BenchXXXXXXXX") == 1 and image.count(b"libdepXXXXXXXX.so") == 1
    paths = []
    for i in range(count):
        with open(os.path.join(deps, f"libdep{i:08d}.so"), "wb") as f:
            f.write(dep_image)
        path = os.path.join(directory, f"Bench_B{i:08d}_backend.so")
        with open(path, "wb") as f:
            f.write(image.replace(b"BenchXXXXXXXX", f"Bench{i:08d}".encode())
                    .replace(b"libdepXXXXXXXX.so", f"libdep{i:08d}.so".encode()))
        os.chmod(path, 0o755)
        paths.append(path)
    return paths
