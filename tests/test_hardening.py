"""Hostile files and libraries, operator filters, required backends and trust."""
import json
import os
import stat

import pytest

import loader
import mock_backends
import reference_backend
from helpers import entry_for, install_mock, install_reference, mapped, run_module, scan

HOSTILE = mock_backends.HOSTILE_DIR


# -- isolated probing --------------------------------------------------------------------------

@pytest.mark.parametrize("stem, reason, words", [
    ("crash_at_load", "probe-crashed", ["SIGSEGV", "stage load"]),
    ("hang_in_factory", "probe-timeout", ["1 s", "stage factory"]),
])
def test_isolated_probing_skips_what_would_take_the_host_down(backend_dir, stem, reason, words):
    path = install_mock(stem, backend_dir)
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), probe="isolated",
                        probe_timeout=1) as runtime:
        entry = entry_for(runtime.report, path)
        assert runtime.backend_ids == ["CpuRef"]
    assert entry["reason"] == reason
    for word in words:
        assert word in entry["detail"]
    assert not mapped(os.path.realpath(path)), "the hostile library reached the host"


def test_isolated_probing_reports_an_exit_in_a_constructor(backend_dir, tmp_path):
    source = tmp_path / "exits.c"
    source.write_text('#include <stdlib.h>\n__attribute__((constructor)) static void go(void) '
                      '{ exit(0); }\nconst char *GetBackendId(void) { return "X"; }\n')
    import shutil
    import subprocess
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    subprocess.run(["cc", "-shared", "-fPIC", str(source), "-o",
                    str(backend_dir / "Evil_Exit_backend.so")], check=True)
    report = json.loads(run_module("scan", "--isolated", "--json", "--path", str(backend_dir)).stdout)
    [entry] = report["entries"]
    assert entry["reason"] == "probe-crashed" and "exited with status 0" in entry["detail"]


def test_scanning_every_hostile_mock_in_isolation_keeps_the_scanner_alive():
    result = run_module("scan", "--isolated", "--probe-timeout", "1", "--json", "--path", HOSTILE)
    assert result.returncode == 0, result.stderr
    by_name = {os.path.basename(e["file"]): e for e in json.loads(result.stdout)["entries"]}
    assert by_name[mock_backends.library_name("crash_at_load")]["reason"] == "probe-crashed"
    assert by_name[mock_backends.library_name("hang_in_factory")]["reason"] == "probe-timeout"
    assert by_name[mock_backends.library_name("wrong_convolution")]["status"] == "registered"


def test_isolated_probing_keeps_the_precise_reason_of_harmless_files(backend_dir):
    (backend_dir / "Text_File_backend.so").write_text("not a library")
    install_mock("null_id", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), probe="isolated") as runtime:
        reasons = sorted(e["reason"] for e in runtime.report["entries"])
    assert reasons == ["invalid-backend-id", "not-a-shared-object"]


def test_probe_options_are_checked():
    with pytest.raises(ValueError, match="probe"):
        loader.Runtime(probe="sandboxed")
    with pytest.raises(ValueError, match="greater than 0"):
        loader.Runtime(probe="isolated", probe_timeout=0)
    assert run_module("scan", "--isolated", "--probe-timeout", "-1").returncode == 2


# Waiting APIs refuse timeouts beyond about 2^31 ms (OverflowError): every timeout is bounded.
@pytest.mark.parametrize("huge", [3e6, 1e300, 2**70])
def test_a_huge_probe_timeout_is_refused_as_an_argument_and_an_option(huge):
    with pytest.raises(ValueError, match="at most 86400"):
        loader.Runtime(probe="isolated", probe_timeout=huge)
    result = run_module("scan", "--probe-timeout", str(huge))
    assert result.returncode == 2 and "at most 86400" in result.stderr


def test_a_huge_probe_timeout_in_the_environment_is_ignored_with_a_warning(backend_dir):
    install_reference(backend_dir)
    env = {"DYNAMIC_BACKEND_PROBE_TIMEOUT": "3e6", "DYNAMIC_BACKEND_PROBE": "isolated"}
    result = run_module("scan", "--json", "--path", str(backend_dir), env_extra=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["registered"] == [reference_backend.BACKEND_ID]
    assert report["settings"]["probe_timeout"] == 5.0
    assert any("DYNAMIC_BACKEND_PROBE_TIMEOUT='3e6' ignored" in n for n in report["notes"])


@pytest.mark.parametrize("variable, value", [
    ("DYNAMIC_BACKEND_PROBE", "isolatd"), ("DYNAMIC_BACKEND_LOAD", "lazy"),
    ("DYNAMIC_BACKEND_PROBE_TIMEOUT", "abc"), ("DYNAMIC_BACKEND_STRICT_PERMISSIONS", "yess"),
    ("DYNAMIC_BACKEND_DEBUG", "2"),
])
def test_an_ignored_setting_is_on_stderr_without_verbose_and_in_the_notes(variable, value):
    result = run_module("scan", env_extra={variable: value})
    assert result.returncode == 0
    line = f"{variable}={value!r} ignored"
    assert result.stderr.count(line) == 1, result.stderr       # once, and without -v
    report = json.loads(run_module("scan", "--json", env_extra={variable: value}).stdout)
    assert [n for n in report["notes"] if line in n]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(variable, value)
        with loader.Runtime() as runtime:
            assert [n for n in runtime.report["notes"] if line in n]


# -- filters ----------------------------------------------------------------------------------

@pytest.fixture
def three(backend_dir):
    install_mock("alpha", backend_dir, "Acme_Alpha_backend.so")
    install_mock("beta", backend_dir, "Acme_Beta_backend.so")
    install_reference(backend_dir, "Other_Ref_backend.so")
    return backend_dir


@pytest.mark.parametrize("select, disable, expected", [
    (None, None, ["MockAlpha", "MockBeta", "CpuRef"]),
    ("Acme_*", None, ["MockAlpha", "MockBeta"]),
    ("Acme_Beta, Other_*", None, ["MockBeta", "CpuRef"]),
    (None, "Acme_Alpha", ["MockBeta", "CpuRef"]),
    ("Acme_*", "*_Beta", ["MockAlpha"]),
    ("", "", ["MockAlpha", "MockBeta", "CpuRef"]),
    ("Nobody_*", None, []),
])
def test_select_and_disable_from_the_environment(monkeypatch, three, select, disable, expected):
    for variable, value in (("DYNAMIC_BACKEND_SELECT", select), ("DYNAMIC_BACKEND_DISABLE", disable)):
        if value is not None:
            monkeypatch.setenv(variable, value)
    with loader.Runtime(dynamic_backends_path=str(three)) as runtime:
        assert runtime.backend_ids == expected
        filtered = [e for e in runtime.report["entries"] if e["reason"] == "filtered-out"]
    assert len(filtered) == 3 - len(expected)
    assert all(e["canonical"] is None for e in filtered)  # decided before anything was resolved


def test_a_filtered_file_does_not_shadow_its_duplicate(backend_dir):
    install_mock("alpha", backend_dir, "A_Hidden_backend.so")
    os.link(backend_dir / "A_Hidden_backend.so", backend_dir / "B_Shown_backend.so")
    with loader.Runtime(dynamic_backends_path=str(backend_dir), disable=["A_Hidden"]) as runtime:
        assert runtime.backend_ids == ["MockAlpha"]
        assert entry_for(runtime.report, backend_dir / "B_Shown_backend.so")["status"] == "registered"


def test_filter_arguments_replace_the_environment(monkeypatch, three):
    monkeypatch.setenv("DYNAMIC_BACKEND_SELECT", "Acme_Alpha")
    with loader.Runtime(dynamic_backends_path=str(three), select=["Other_*"]) as runtime:
        assert runtime.backend_ids == ["CpuRef"]


# -- required backends ------------------------------------------------------------------------

def test_required_backends_that_did_not_load_are_named_with_the_reason(backend_dir):
    install_reference(backend_dir)
    install_mock("major_too_new", backend_dir)
    with pytest.raises(loader.MissingBackendsError) as raised:
        loader.Runtime(dynamic_backends_path=str(backend_dir),
                       required_backends=["CpuRef", "MockMajorTooNew", "NpuX"])
    error = raised.value
    assert isinstance(error, loader.BackendError) and isinstance(error, LookupError)
    assert error.missing == ["MockMajorTooNew", "NpuX"]
    assert "incompatible-version" in error.reasons["MockMajorTooNew"]
    assert "no file on the search paths" in error.reasons["NpuX"]
    assert "MockMajorTooNew" in str(error) and "NpuX" in str(error)


def test_required_backends_that_loaded(backend_dir):
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), required_backends=["CpuRef"]) as rt:
        assert rt.backend_ids == ["CpuRef"]


# -- trust ------------------------------------------------------------------------------------

def test_strict_mode_refuses_files_others_can_write(backend_dir):
    path = install_reference(backend_dir, "Ref_Open_backend.so")
    os.chmod(path, 0o666)
    safe = install_mock("alpha", backend_dir)
    os.chmod(safe, 0o755)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), strict_permissions=True) as runtime:
        entry = entry_for(runtime.report, path)
        assert runtime.backend_ids == ["MockAlpha"]
    assert entry["reason"] == "untrusted-permissions" and "0666" in entry["detail"]
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:  # not strict: loads
        assert sorted(runtime.backend_ids) == ["CpuRef", "MockAlpha"]


def test_strict_mode_refuses_files_of_a_third_user(backend_dir):
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    path = install_reference(backend_dir)
    os.chown(path, 65534, 65534)
    assert entry_for(scan(backend_dir), path)["status"] == "registered"
    with loader.Runtime(dynamic_backends_path=str(backend_dir), strict_permissions=True) as runtime:
        entry = entry_for(runtime.report, path)
    assert entry["reason"] == "untrusted-permissions" and "uid 65534" in entry["detail"]


def test_strict_mode_refuses_world_writable_search_directories(backend_dir):
    install_reference(backend_dir)
    os.chmod(backend_dir, 0o777)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), strict_permissions=True) as runtime:
        [path] = runtime.report["search_paths"]
        assert runtime.backend_ids == []
    assert path["reason"] == "untrusted-permissions"
    report = json.loads(run_module("scan", "--strict-permissions", "--json", "--path",
                                   str(backend_dir)).stdout)
    assert report["search_paths"][0]["reason"] == "untrusted-permissions"


def test_strict_mode_accepts_a_private_tree(backend_dir):
    os.chmod(backend_dir, 0o755)
    path = install_reference(backend_dir)
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), strict_permissions=True) as runtime:
        assert runtime.backend_ids == ["CpuRef"]


def test_new_reason_codes_are_in_the_schema():
    codes = {r.value for r in loader.Reason}
    assert {"filtered-out", "untrusted-permissions", "probe-crashed", "probe-timeout"} <= codes
    assert "untrusted-permissions" in {r.value for r in loader.PathReason}


# -- dependencies ------------------------------------------------------------------------------

CC = __import__("shutil").which("cc")


def _build(directory, name, source, *flags):
    import subprocess
    src = os.path.join(str(directory), name + ".c")
    with open(src, "w") as f:
        f.write(source)
    subprocess.run([CC, "-shared", "-fPIC", src, "-o", os.path.join(str(directory), name), *flags],
                   check=True, capture_output=True)
    os.unlink(src)


@pytest.fixture
def stubs(tmp_path):
    """Two small libraries, libdbk_one.so and libdbk_two.so, in their own directory."""
    if CC is None:
        pytest.skip("no C compiler")
    directory = tmp_path / "stubs"
    directory.mkdir()
    _build(directory, "libdbk_one.so", "int dbk_one(void) { return 1; }\n")
    _build(directory, "libdbk_two.so", "int dbk_two(void) { return 2; }\n")
    return directory


BACKEND_USING_STUBS = (
    '#include <stddef.h>\nint dbk_one(void); int dbk_two(void);\n'
    'const char *GetBackendId(void) { return dbk_one() + dbk_two() ? "Stubby" : NULL; }\n')


def test_every_missing_dependency_is_named_before_dlopen(backend_dir, stubs):
    _build(backend_dir, "Dep_Two_backend.so", BACKEND_USING_STUBS, f"-L{stubs}", "-ldbk_one",
           "-ldbk_two")
    for stub in ("libdbk_one.so", "libdbk_two.so"):
        os.unlink(stubs / stub)
    entry = entry_for(scan(backend_dir), backend_dir / "Dep_Two_backend.so")
    assert entry["reason"] == "missing-dependency"
    assert "libdbk_one.so" in entry["detail"] and "libdbk_two.so" in entry["detail"]


def test_origin_relative_runpath_is_followed(backend_dir, stubs):
    for stub in ("libdbk_one.so", "libdbk_two.so"):
        os.rename(stubs / stub, backend_dir / stub)
    _build(backend_dir, "Dep_Origin_backend.so", BACKEND_USING_STUBS, f"-L{backend_dir}",
           "-ldbk_one", "-ldbk_two", "-Wl,-rpath,$ORIGIN")
    entry = entry_for(scan(backend_dir), backend_dir / "Dep_Origin_backend.so")
    assert entry["reason"] == "missing-symbol"  # it loaded: only its entry points are missing
    os.unlink(backend_dir / "libdbk_two.so")
    entry = entry_for(scan(backend_dir), backend_dir / "Dep_Origin_backend.so")
    assert entry["reason"] == "missing-dependency" and entry["detail"].count("libdbk") == 1


def test_the_library_path_of_the_process_start_is_followed(backend_dir, stubs):
    _build(backend_dir, "Dep_Env_backend.so", BACKEND_USING_STUBS, f"-L{stubs}", "-ldbk_one",
           "-ldbk_two")
    env = {**os.environ, "LD_LIBRARY_PATH": str(stubs)}
    report = json.loads(run_module("scan", "--json", "--path", str(backend_dir), env=env).stdout)
    assert report["entries"][0]["reason"] == "missing-symbol"
    env.pop("LD_LIBRARY_PATH")
    report = json.loads(run_module("scan", "--json", "--path", str(backend_dir), env=env).stdout)
    assert report["entries"][0]["reason"] == "missing-dependency"


# -- secure execution --------------------------------------------------------------------------

SECURE_PROBE = ("import json, loader; "
                "print(json.dumps([loader._core.is_secure_execution(), loader.get_backend_paths()]))")


def test_a_setgid_process_ignores_the_environment_for_real(tmp_path, backend_dir):
    # A setgid helper (group nogroup) executed by root: the kernel marks it and the Python it
    # runs for secure execution (AT_SECURE), exactly as for a setuid program.
    import subprocess
    import sys
    if CC is None or os.geteuid() != 0:
        pytest.skip("needs a C compiler and root to make a setgid helper")
    source = tmp_path / "helper.c"
    source.write_text("#include <unistd.h>\nint main(int argc, char **argv)"
                      "{ (void)argc; execv(argv[1], argv + 1); return 127; }\n")
    helper = tmp_path / "helper"
    subprocess.run([CC, str(source), "-o", str(helper)], check=True)
    os.chown(helper, 0, 65534)
    os.chmod(helper, 0o2755)
    env = {**os.environ, "DYNAMIC_BACKEND_PATHS": str(backend_dir)}
    result = subprocess.run([str(helper), sys.executable, "-c", SECURE_PROBE], capture_output=True,
                            text=True, env=env, cwd="/", timeout=60)
    assert result.returncode == 0, result.stderr
    secure, paths = json.loads(result.stdout)
    if not secure:
        pytest.skip("the kernel did not mark the setgid helper (filesystem mounted nosuid?)")
    assert str(backend_dir) not in paths
    assert paths == [__import__("reference_backend").LIBRARY_DIR]
    assert "ignored-secure-execution" in result.stderr
    plain = subprocess.run([sys.executable, "-c", SECURE_PROBE], capture_output=True, text=True,
                           env=env, cwd="/", timeout=60)
    assert json.loads(plain.stdout) == [False, [str(backend_dir)]]


# -- lifecycle --------------------------------------------------------------------------------

RECORDING_BACKEND = r"""
#include <stdio.h>
#include <stdlib.h>
#include "backend_api.h"
#define ID "@ID@"
static const char *get_id(const BackendInstance *s) { (void)s; return ID; }
static void destroy(BackendInstance *s) { free(s); }
static BackendStatus caps(const BackendInstance *s, const BackendCapability **c, uint32_t *n)
{ (void)s; *c = NULL; *n = 0; return BACKEND_STATUS_OK; }
static BackendStatus sup(const BackendInstance *s, const BackendLayerDescription *l, char *m, size_t n)
{ (void)s; (void)l; (void)m; (void)n; return BACKEND_STATUS_UNSUPPORTED; }
static BackendStatus fac(const BackendInstance *s, BackendMemoryManager *mm, BackendWorkloadFactory **f,
                         char *m, size_t n)
{ (void)s; (void)mm; (void)m; (void)n; *f = NULL; return BACKEND_STATUS_UNSUPPORTED; }
__attribute__((destructor)) static void unloaded(void)
{
    FILE *log = fopen(getenv("DBK_UNLOAD_LOG"), "a");
    if (log) { fputs(ID "\n", log); fclose(log); }
}
BACKEND_EXPORT const char *GetBackendId(void) { return ID; }
BACKEND_EXPORT void GetVersion(uint32_t *a, uint32_t *b)
{ *a = BACKEND_API_VERSION_MAJOR; *b = BACKEND_API_VERSION_MINOR; }
BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *i = calloc(1, sizeof *i);
    if (!i) return NULL;
    i->struct_size = sizeof *i; i->api_major = BACKEND_API_VERSION_MAJOR;
    i->api_minor = BACKEND_API_VERSION_MINOR; i->get_id = get_id; i->destroy = destroy;
    i->get_capabilities = caps; i->is_layer_supported = sup; i->create_workload_factory = fac;
    return i;
}
"""


def test_libraries_are_unloaded_in_reverse_load_order_when_the_last_user_is_gone(
        backend_dir, tmp_path, monkeypatch):
    if CC is None:
        pytest.skip("no C compiler")
    for backend_id in ("First", "Second", "Third"):
        _build(backend_dir, f"A{len(backend_id)}{backend_id}_{backend_id}_backend.so",
               RECORDING_BACKEND.replace("@ID@", backend_id), f"-I{loader.get_include()}")
    log = tmp_path / "unloaded.txt"
    monkeypatch.setenv("DBK_UNLOAD_LOG", str(log))
    runtime = loader.Runtime(dynamic_backends_path=str(backend_dir))
    order = runtime.backend_ids
    assert sorted(order) == ["First", "Second", "Third"]
    kept = runtime.create_backend(order[0])  # keeps the first library alive past close()
    runtime.close()
    assert log.read_text().split() == [order[2], order[1]]
    del kept
    import gc
    gc.collect()
    assert log.read_text().split() == [order[2], order[1], order[0]]
