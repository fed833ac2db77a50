"""The installed ABI header: vendors compile against loader.get_include() and the loader
loads what they build."""
import os
import re
import shutil
import subprocess
import sys

import pytest

import loader
from helpers import scan

HEADER = os.path.join(loader.get_include(), "backend_api.h")
CC = shutil.which("cc") or shutil.which("gcc")
CXX = shutil.which("c++") or shutil.which("g++")

needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler")


def compile_backend(source, directory, name, *flags, compiler=None):
    compiler = compiler or CC
    src = os.path.join(str(directory), name + (".cpp" if compiler == CXX else ".c"))
    with open(src, "w") as f:
        f.write(source)
    out = os.path.join(str(directory), name)
    subprocess.run([compiler, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                    "-I", loader.get_include(), src, "-o", out, *flags], check=True,
                   capture_output=True, text=True)
    os.unlink(src)
    return out


MINIMAL = r"""
#include <stdlib.h>
#include "backend_api.h"

static const char *get_id(const BackendInstance *self) { (void)self; return "VendorX"; }
static void destroy(BackendInstance *self) { free(self); }
static BackendStatus capabilities(const BackendInstance *self, const BackendCapability **c, uint32_t *n)
{ (void)self; *c = NULL; *n = 0; return BACKEND_STATUS_OK; }
static BackendStatus supported(const BackendInstance *self, const BackendLayerDescription *layer,
                               char *message, size_t size)
{ (void)self; (void)layer; if (size) message[0] = 0; return BACKEND_STATUS_UNSUPPORTED; }
static BackendStatus factory(const BackendInstance *self, BackendMemoryManager *m,
                             BackendWorkloadFactory **out, char *message, size_t size)
{ (void)self; (void)m; (void)message; (void)size; *out = NULL; return BACKEND_STATUS_UNSUPPORTED; }

BACKEND_EXPORT const char *GetBackendId(void) { return "VendorX"; }
BACKEND_EXPORT void GetVersion(uint32_t *major, uint32_t *minor)
{ *major = BACKEND_API_VERSION_MAJOR; *minor = BACKEND_API_VERSION_MINOR; }
BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *i = calloc(1, sizeof *i);
    if (!i) return NULL;
    i->struct_size = sizeof *i;
    i->api_major = BACKEND_API_VERSION_MAJOR;
    i->api_minor = BACKEND_API_VERSION_MINOR;
    i->get_id = get_id;
    i->destroy = destroy;
    i->get_capabilities = capabilities;
    i->is_layer_supported = supported;
    i->create_workload_factory = factory;
    return i;
}
"""


def test_the_header_is_installed_and_declares_the_runtime_version():
    with open(HEADER) as f:
        text = f.read()
    major = int(re.search(r"#define BACKEND_API_VERSION_MAJOR (\d+)", text).group(1))
    minor = int(re.search(r"#define BACKEND_API_VERSION_MINOR (\d+)", text).group(1))
    assert loader.BACKEND_API_VERSION == (major, minor)


@needs_cc
def test_a_backend_built_against_the_installed_header_registers(backend_dir):
    compile_backend(MINIMAL, backend_dir, "Vendor_X_backend.so", "-fvisibility=hidden")
    report = scan(backend_dir)
    assert report["registered"] == ["VendorX"]
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
        backend = runtime.create_backend("VendorX")
    assert backend.capabilities == {} and backend.features["MemoryManager"] is False
    assert not backend.is_layer_supported("Softmax", [(3,)])


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
def test_the_header_compiles_as_cpp_with_c_linkage(backend_dir):
    compile_backend(MINIMAL.replace("calloc(1, sizeof *i)", "(BackendInstance *)calloc(1, sizeof *i)"),
                    backend_dir, "Vendor_X_backend.so", compiler=CXX)
    assert scan(backend_dir)["registered"] == ["VendorX"]


def test_the_embedding_example_runs():
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "examples", "layer_by_layer.py")
    if not os.path.exists(example):
        pytest.skip("examples/ is not beside the tests")
    result = subprocess.run([sys.executable, example], capture_output=True, text=True, cwd="/",
                            timeout=120, env={k: v for k, v in os.environ.items()
                                              if k != loader.ENVIRONMENT_VARIABLE})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Softmax" in result.stdout and "max difference from NumPy" in result.stdout


def _guide_blocks(language):
    """The ``language`` code blocks of docs/writing-a-backend.md."""
    guide = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                         "writing-a-backend.md")
    if not os.path.exists(guide):
        pytest.skip("docs/ is not beside the tests")
    with open(guide) as f:
        return re.findall(rf"```{language}\n(.*?)```", f.read(), re.S)


@needs_cc
def test_the_guide_backend_compiles_warning_free_and_registers(backend_dir):
    [source] = _guide_blocks("c")
    compile_backend(source, backend_dir, "Acme_Npu_backend.so", "-fvisibility=hidden",
                    "-std=c11", "-pedantic")
    report = scan(backend_dir)
    assert report["registered"] == ["AcmeNpu"], report["entries"]
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
        backend = runtime.create_backend("AcmeNpu")
    assert backend.is_layer_supported("Softmax", [(3,)]) == (False, "no layer is implemented yet")
    factory = backend.create_workload_factory()
    with pytest.raises(loader.BackendUnsupportedError, match="no layer is implemented yet"):
        factory.create_workload("Softmax", [(3,)])
    assert backend.capabilities == {}


@needs_cc
def test_the_guide_backend_passes_the_conformance_kit(backend_dir):
    [source] = _guide_blocks("c")
    path = compile_backend(source, backend_dir, "Acme_Npu_backend.so", "-fvisibility=hidden")
    result = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend", path],
                            capture_output=True, text=True, cwd="/", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr     # exit 0: conformant


@needs_cc
def test_the_guide_build_command_builds_the_guide_backend(tmp_path):
    [source] = _guide_blocks("c")
    commands = "".join(_guide_blocks("sh"))
    build = [line for line in commands.replace("\\\n", " ").splitlines() if line.startswith("cc ")]
    assert len(build) == 1 and "-Wall -Wextra" in build[0]
    (tmp_path / "acme.c").write_text(source)
    environment = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
                       + os.environ.get("PATH", ""))
    subprocess.run(["sh", "-ec", build[0] + " -Werror"], cwd=str(tmp_path), env=environment,
                   check=True, capture_output=True, timeout=120)
    assert scan(tmp_path)["registered"] == ["AcmeNpu"]
