"""Registration, independent runtimes and lifetimes."""
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import threading

import pytest

import loader
import mock_backends
import reference_backend
from helpers import install, install_mock, install_reference, mapped, run_module


@pytest.fixture
def reference_dir(backend_dir):
    install_reference(backend_dir)
    return backend_dir


def test_a_fresh_install_registers_the_reference_backend():
    with loader.Runtime() as runtime:
        assert runtime.backend_ids == [reference_backend.BACKEND_ID]
        backend = runtime.create_backend("CpuRef")
        assert backend.id == "CpuRef"
        assert backend.version == loader.BACKEND_API_VERSION
        assert backend.file == os.path.realpath(reference_backend.LIBRARY_PATH)


def test_registration_follows_scan_order_across_paths(monkeypatch, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    install_mock("beta", first, "Z_Beta_backend.so")
    install_mock("alpha", second, "A_Alpha_backend.so")
    install_reference(second, "M_Ref_backend.so")
    monkeypatch.setenv(loader.ENVIRONMENT_VARIABLE, f"{first}:{second}")
    with loader.Runtime() as runtime:
        assert runtime.backend_ids == ["MockBeta", "MockAlpha", "CpuRef"]


def test_a_mixed_directory_loads_every_valid_backend(backend_dir):
    for name, path in mock_backends.available().items():
        install(path, backend_dir, name)
    install_reference(backend_dir)
    (backend_dir / "Junk_Text_backend.so").write_text("junk")
    os.symlink("nowhere", backend_dir / "Junk_Dangling_backend.so")
    os.mkfifo(backend_dir / "Junk_Fifo_backend.so")
    (backend_dir / "README.md").write_text("not a backend")
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
        assert sorted(runtime.backend_ids) == [
            "CpuRef", "MockAlpha", "MockAvailabilityFlips", "MockBeta", "MockBlobNotRoundTrip",
            "MockCompiledDiesWithInstance", "MockCompiledWrongResult", "MockMinor12SaysYes",
            "MockMinorOlder",
            "MockMinorPrevious", "MockMissingRequired", "MockPartial", "MockProbedOnce",
            "MockProfilingBadEvents", "MockSubstitutionWrongBoundary",
            "MockViewsClaimALayerTwice", "MockViewsMissALayer", "MockViewsNameALayerNotOffered"]
        for backend_id in runtime.backend_ids:
            assert runtime.create_backend(backend_id).id == backend_id


def test_two_runtimes_are_independent(reference_dir):
    path = str(reference_dir / "Reference_CpuRef_backend.so")
    first = loader.Runtime(dynamic_backends_path=str(reference_dir))
    second = loader.Runtime(dynamic_backends_path=str(reference_dir))
    assert first.backend_ids == second.backend_ids == ["CpuRef"]
    first.close()
    assert first.backend_ids == []
    assert second.create_backend("CpuRef").id == "CpuRef"
    assert mapped(path)
    second.close()
    gc.collect()
    assert not mapped(path)


def test_a_backend_outlives_its_runtime(reference_dir):
    path = str(reference_dir / "Reference_CpuRef_backend.so")
    with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
        backend = runtime.create_backend("CpuRef")
    assert runtime.closed
    assert mapped(path), "the library was unmapped under a live backend"
    assert backend.id == "CpuRef" and not backend.closed
    assert backend.version == loader.BACKEND_API_VERSION
    del backend
    gc.collect()
    assert not mapped(path)


def test_closing_a_backend_is_idempotent(reference_dir):
    with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
        backend = runtime.create_backend("CpuRef")
        backend.close()
        backend.close()
        assert backend.closed
        with runtime.create_backend("CpuRef") as other:
            assert not other.closed
        assert other.closed


def test_a_closed_runtime_creates_nothing(reference_dir):
    runtime = loader.Runtime(dynamic_backends_path=str(reference_dir))
    runtime.close()
    runtime.close()
    with pytest.raises(loader.RuntimeClosedError):
        runtime.create_backend("CpuRef")


def test_an_unknown_backend_is_a_key_error_naming_what_is_registered(reference_dir):
    with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
        with pytest.raises(loader.BackendNotFoundError) as raised:
            runtime.create_backend("NoSuchBackend")
    assert isinstance(raised.value, KeyError) and isinstance(raised.value, loader.BackendError)
    assert "NoSuchBackend" in str(raised.value) and "CpuRef" in str(raised.value)


def test_asking_for_a_skipped_backend_says_why_it_was_skipped(backend_dir):
    install_mock("alpha", backend_dir, "A_Alpha_backend.so")
    install_mock("duplicate_of_alpha", backend_dir, "B_Dup_backend.so")
    install_mock("major_too_new", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
        with pytest.raises(loader.BackendNotFoundError, match="incompatible-version"):
            runtime.create_backend("MockMajorTooNew")


def test_each_skip_is_a_warning_and_each_registration_is_info(backend_dir, caplog):
    install_mock("alpha", backend_dir)
    install_mock("null_id", backend_dir)
    (backend_dir / "notes.txt").write_text("x")
    with caplog.at_level(logging.DEBUG, logger="loader"):
        loader.Runtime(dynamic_backends_path=str(backend_dir)).close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(warnings) == 1 and "invalid-backend-id" in warnings[0] and "NullId" in warnings[0]
    assert len(infos) == 1 and "MockAlpha" in infos[0]


def test_the_report_matches_the_scan_command(reference_dir):
    install_mock("null_id", reference_dir)
    with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
        report = runtime.report
    result = subprocess.run(["backend-loader", "scan", "--path", str(reference_dir), "--json"],
                            capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == report
    assert json.loads(json.dumps(report)) == report


def test_the_report_has_the_documented_shape(reference_dir):
    install_mock("null_id", reference_dir)
    with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
        report = runtime.report
    assert report["api_version"] == str(loader.BACKEND_API_VERSION)
    assert report["search_paths"] == [
        {"path": str(reference_dir), "valid": True, "reason": None, "detail": "",
         "source": "override"}]
    assert report["registered"] == ["CpuRef"]
    keys = {"file", "canonical", "status", "reason", "detail", "backend_id", "version"}
    for entry in report["entries"]:
        assert set(entry) >= keys
        assert entry["status"] in ("registered", "skipped")
        assert (entry["reason"] is None) == (entry["status"] == "registered")
    registered = [e for e in report["entries"] if e["status"] == "registered"]
    assert registered[0]["backend_id"] == "CpuRef"
    assert registered[0]["version"] == str(loader.BACKEND_API_VERSION)


def test_runtimes_in_many_threads(reference_dir):
    install_mock("alpha", reference_dir)
    errors, ids = [], []

    def work():
        try:
            for _ in range(20):
                with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
                    ids.append(tuple(runtime.backend_ids))
                    runtime.create_backend("CpuRef").close()
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert set(ids) == {("MockAlpha", "CpuRef")} and len(ids) == 160


def test_one_backend_from_many_threads(reference_dir):
    with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
        backends = []
        lock = threading.Lock()

        def work():
            for _ in range(50):
                backend = runtime.create_backend("CpuRef")
                with lock:
                    backends.append(backend)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(backends) == 200 and all(b.id == "CpuRef" for b in backends)


def test_the_module_entry_point_runs_the_same_command(reference_dir):
    result = run_module("scan", "--path", str(reference_dir))
    assert result.returncode == 0, result.stderr
    assert "Reference_CpuRef_backend.so" in result.stdout and "registered" in result.stdout


# -- the log goes out as the scan goes ------------------------------------------------------------

def test_each_entry_is_logged_as_soon_as_it_is_decided(backend_dir):
    first = install_mock("null_id", backend_dir, "A_Null_backend.so")
    second = install_reference(backend_dir, "B_Ref_backend.so")
    events = []

    class Recorder(logging.Handler):
        def emit(self, record):
            events.append(("log", record.getMessage()))

    handler = Recorder(logging.DEBUG)
    logger = logging.getLogger("loader")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        loader.Runtime(dynamic_backends_path=str(backend_dir)).close()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    # "loading X" is logged just before X is opened: the first file's skip comes between the loads.
    loads = [i for i, e in enumerate(events) if e[1].startswith("loading ")]
    skip_of_first = next(i for i, e in enumerate(events)
                         if e[0] == "log" and "skipped" in e[1] and "A_Null" in e[1])
    assert loads[0] < skip_of_first < loads[1], events
    loading = [e[1] for e in events if e[0] == "log" and e[1].startswith("loading ")]
    assert loading == [f"loading {first}", f"loading {second}"]


# -- bad arguments ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, error", [
    (float("inf"), ValueError), (float("nan"), ValueError), (-1, ValueError), (0, ValueError),
    ("5", TypeError), (True, TypeError), ([5], TypeError),
])
def test_a_bad_probe_timeout_is_a_clean_error(value, error):
    with pytest.raises(error, match="probe_timeout"):
        loader.Runtime(probe="isolated", probe_timeout=value)


def test_a_probe_timeout_may_be_an_int_or_a_float(reference_dir):
    for value in (1, 2.5):
        with loader.Runtime(dynamic_backends_path=str(reference_dir), probe="isolated",
                            probe_timeout=value) as runtime:
            assert runtime.report["settings"]["probe_timeout"] == value


def test_one_required_backend_may_be_given_as_a_string(reference_dir):
    with loader.Runtime(dynamic_backends_path=str(reference_dir), required_backends="CpuRef") as rt:
        assert rt.backend_ids == ["CpuRef"]
    with pytest.raises(loader.MissingBackendsError) as raised:
        loader.Runtime(dynamic_backends_path=str(reference_dir), required_backends="AcmeNpu")
    assert raised.value.missing == ["AcmeNpu"]


@pytest.mark.parametrize("bad", [5, [b"CpuRef"], ["CpuRef", None]])
def test_required_backends_of_the_wrong_type_are_a_type_error(reference_dir, bad):
    with pytest.raises(TypeError, match="required_backends"):
        loader.Runtime(dynamic_backends_path=str(reference_dir), required_backends=bad)


def test_a_closed_runtime_holds_no_backends_and_says_so(reference_dir):
    runtime = loader.Runtime(dynamic_backends_path=str(reference_dir))
    runtime.close()
    assert runtime.backend_ids == [] and "CpuRef" not in runtime
    with pytest.raises(loader.RuntimeClosedError, match="closed and holds no backends"):
        runtime.create_backend("CpuRef")
    assert runtime.report["registered"] == ["CpuRef"]  # the record of the scan stays


# -- environment equivalents of the options --------------------------------------------------------

def test_the_probe_variables_turn_on_isolated_probing(reference_dir, monkeypatch):
    monkeypatch.setenv("DYNAMIC_BACKEND_PROBE", "isolated")
    monkeypatch.setenv("DYNAMIC_BACKEND_PROBE_TIMEOUT", "3")
    with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
        settings = runtime.report["settings"]
    assert (settings["probe"], settings["probe_timeout"]) == ("isolated", 3.0)
    assert settings["sources"]["probe"] == "DYNAMIC_BACKEND_PROBE"
    assert settings["sources"]["probe_timeout"] == "DYNAMIC_BACKEND_PROBE_TIMEOUT"
    with loader.Runtime(dynamic_backends_path=str(reference_dir), probe="in-process") as runtime:
        assert runtime.report["settings"]["probe"] == "in-process"  # the argument wins


def test_the_probe_variable_keeps_a_host_alive(backend_dir):
    install_mock("crash_at_load", backend_dir)
    install_reference(backend_dir)
    code = ("import loader, sys; rt = loader.Runtime(sys.argv[1]); print(rt.backend_ids); "
            "print(rt.report['entries'][0]['reason'])")
    env = {**os.environ, "DYNAMIC_BACKEND_PROBE": "isolated"}
    result = subprocess.run([sys.executable, "-c", code, str(backend_dir)], capture_output=True,
                            text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["['CpuRef']", "probe-crashed"]


def test_a_crash_in_a_host_names_the_file(backend_dir):
    crashing = install_mock("crash_at_load", backend_dir)
    code = "import loader, sys; loader.Runtime(sys.argv[1])"
    result = subprocess.run([sys.executable, "-c", code, str(backend_dir)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == -signal.SIGSEGV
    assert f"crashed (SIGSEGV) while loading {crashing} (in dlopen" in result.stderr
    assert "DYNAMIC_BACKEND_PROBE=isolated" in result.stderr


def test_the_strict_permissions_variable(backend_dir, monkeypatch):
    path = install_reference(backend_dir)
    os.chmod(path, 0o666)
    monkeypatch.setenv("DYNAMIC_BACKEND_STRICT_PERMISSIONS", "1")
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
        assert runtime.backend_ids == []
        assert runtime.report["entries"][0]["reason"] == "untrusted-permissions"
        assert runtime.report["settings"]["sources"]["strict_permissions"] == \
            "DYNAMIC_BACKEND_STRICT_PERMISSIONS"
    with loader.Runtime(dynamic_backends_path=str(backend_dir),
                        strict_permissions=False) as runtime:
        assert runtime.backend_ids == ["CpuRef"]  # the argument wins


@pytest.mark.parametrize("variable, value", [
    ("DYNAMIC_BACKEND_PROBE", "sandbox"), ("DYNAMIC_BACKEND_PROBE_TIMEOUT", "inf"),
    ("DYNAMIC_BACKEND_PROBE_TIMEOUT", "-2"), ("DYNAMIC_BACKEND_PROBE_TIMEOUT", "soon"),
    ("DYNAMIC_BACKEND_STRICT_PERMISSIONS", "maybe"),
])
def test_a_bad_variable_is_a_warning_not_a_crash(reference_dir, monkeypatch, caplog, variable,
                                                 value):
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with loader.Runtime(dynamic_backends_path=str(reference_dir)) as runtime:
            assert runtime.backend_ids == ["CpuRef"]
            settings = runtime.report["settings"]
    assert any(variable in r.getMessage() and repr(value) in r.getMessage()
               for r in caplog.records)
    assert set(settings["sources"].values()) == {"default"}


# -- the debug variable ----------------------------------------------------------------------------

def _host(directory, debug):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_BACKEND_")}
    env["DYNAMIC_BACKEND_DEBUG"] = debug
    return subprocess.run([sys.executable, "-c", "import loader, sys; loader.Runtime(sys.argv[1])",
                           str(directory)], capture_output=True, text=True, timeout=60, env=env)


def test_the_debug_variable_turns_on_the_log_in_any_host(reference_dir):
    install_mock("null_id", reference_dir)
    everything = _host(reference_dir, "1").stderr
    assert "loader DEBUG: loading" in everything
    assert "loader INFO: registered backend 'CpuRef'" in everything
    assert "loader WARNING: skipped" in everything
    warnings = _host(reference_dir, "warning").stderr
    assert "loader WARNING: skipped" in warnings and "registered" not in warnings
    off = _host(reference_dir, "0").stderr  # Python's own last resort still shows warnings
    assert "loading" not in off and "registered" not in off
    bad = _host(reference_dir, "loud")
    assert bad.returncode == 0 and "DYNAMIC_BACKEND_DEBUG='loud' ignored" in bad.stderr


_CRASHING_SOURCES = {
    "GetBackendId": ("const char *GetBackendId(void) { return *(const char *volatile *)0; }\n"
                     "void GetVersion(unsigned *a, unsigned *b) { *a = 1; *b = 0; }\n"
                     "void *BackendFactory(void) { return 0; }\n", signal.SIGSEGV),
    "GetVersion": ("#include <signal.h>\n"
                   "const char *GetBackendId(void) { return \"Boom\"; }\n"
                   "void GetVersion(unsigned *a, unsigned *b) { raise(SIGBUS); }\n"
                   "void *BackendFactory(void) { return 0; }\n", signal.SIGBUS),
    "the BackendFactory probe": ("#include <stdlib.h>\n"
                                 "const char *GetBackendId(void) { return \"Boom\"; }\n"
                                 "void GetVersion(unsigned *a, unsigned *b) { *a = %d; *b = 0; }\n"
                                 "void *BackendFactory(void) { abort(); }\n", signal.SIGABRT),
}


@pytest.mark.parametrize("stage", sorted(_CRASHING_SOURCES))
def test_a_crash_names_the_backend_call_that_crashed(backend_dir, tmp_path, stage):
    import shutil
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    source, number = _CRASHING_SOURCES[stage]
    if "%d" in source:
        source = source % loader.BACKEND_API_VERSION.major
    (tmp_path / "boom.c").write_text(source)
    library = backend_dir / "Boom_Crash_backend.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(tmp_path / "boom.c"), "-o", str(library)],
                   check=True)
    code = "import loader, sys; loader.Runtime(sys.argv[1])"
    result = subprocess.run([sys.executable, "-c", code, str(backend_dir)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == -number
    name = signal.Signals(number).name
    assert f"crashed ({name}) while loading {library} (in {stage})" in result.stderr


def test_the_crash_note_is_gone_once_loading_is_over(reference_dir):
    # The handler is installed only around loading: a later crash of the host is its own.
    code = ("import loader, os, signal, sys; loader.Runtime(sys.argv[1]).close(); "
            "print(signal.getsignal(signal.SIGSEGV), flush=True); os.kill(os.getpid(), signal.SIGSEGV)")
    result = subprocess.run([sys.executable, "-c", code, str(reference_dir)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == -signal.SIGSEGV
    assert result.stdout.strip() == str(signal.SIG_DFL)
    assert "crashed" not in result.stderr


def test_an_exit_while_loading_names_the_file(backend_dir, tmp_path):
    import shutil
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    (tmp_path / "exits.c").write_text(
        "#include <stdlib.h>\n__attribute__((constructor)) static void go(void) { exit(3); }\n")
    library = backend_dir / "Evil_Exit_backend.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(tmp_path / "exits.c"), "-o", str(library)],
                   check=True)
    code = "import loader, sys; loader.Runtime(sys.argv[1]); print('survived')"
    result = subprocess.run([sys.executable, "-c", code, str(backend_dir)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 3 and "survived" not in result.stdout
    assert f"backend-loader: the process exited while loading {library} (in dlopen" in result.stderr
    # a process that ends normally after loading says nothing
    clean = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                           text=True, timeout=60)
    assert clean.returncode == 0 and "exited" not in clean.stderr


# -- arguments of the wrong type are TypeErrors that say what is expected ------------------------

@pytest.mark.parametrize("make", [
    lambda: loader.Runtime(select=5), lambda: loader.Runtime(disable=5),
    lambda: loader.Runtime(backends=5), lambda: loader.Runtime(required_backends=5),
])
def test_a_runtime_argument_of_the_wrong_type_says_what_it_takes(make):
    with pytest.raises(TypeError) as raised:
        make()
    assert "not iterable" not in str(raised.value)


def test_create_backend_and_load_network_refuse_a_non_string_id():
    net = loader.Network()
    x = net.add_input("x", (1, 4))
    net.add_output(net.add_layer("Activation", [x], {"function": "relu"}), "y")
    with loader.Runtime() as runtime:
        with pytest.raises(TypeError, match="backend id"):
            runtime.create_backend(5)
        with pytest.raises(TypeError, match="backend id"):
            runtime.load_network(net, backends=5)
        with pytest.raises(TypeError, match="backend id"):
            runtime.load_network(net, backends=["CpuRef", 5])
        with runtime.load_network(net, backends=(b for b in ["CpuRef"])) as loaded:
            assert repr(loaded) == f"<LoadedNetwork {loaded.id}: 1 layer in 1 step on CpuRef>"
        assert repr(loaded).endswith(" unloaded>")


def test_dir_of_the_package_lists_what_it_provides_lazily():
    assert {"Network", "LoadedNetwork", "LAYERS", "Runtime"} <= set(dir(loader))


def _hanging_scan(command, backend_dir):
    """A child loading a backend that hangs in BackendFactory, once it is inside the hang."""
    import time
    install_mock("hang_in_factory", backend_dir)
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    # -vvv and the host script both say when loading starts; the hang follows at once
    line = child.stderr.readline()
    assert "Mock_HangInFactory_backend.so" in line, line
    time.sleep(0.5)
    return child


def test_the_first_ctrl_c_ends_a_scan_that_hangs_in_a_backend_naming_the_file(backend_dir):
    child = _hanging_scan([sys.executable, "-m", "loader", "scan", "-vvv", "--path",
                           str(backend_dir)], backend_dir)
    child.send_signal(signal.SIGINT)
    try:
        _, stderr = child.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("the scan did not end at the first SIGINT")
    assert child.returncode == -signal.SIGINT
    assert (f"backend-loader: interrupted while loading {backend_dir}/Mock_HangInFactory_"
            f"backend.so (in the BackendFactory probe): the backend did not return") in stderr


def test_in_a_host_the_first_ctrl_c_names_the_file_and_a_second_ends_the_process(backend_dir):
    code = ("import loader, sys; print('loading Mock_HangInFactory_backend.so', file=sys.stderr, "
            "flush=True); loader.Runtime(sys.argv[1])")
    child = _hanging_scan([sys.executable, "-c", code, str(backend_dir)], backend_dir)
    child.send_signal(signal.SIGINT)
    import time
    time.sleep(1.0)
    assert child.poll() is None                 # the host keeps its KeyboardInterrupt for later
    child.send_signal(signal.SIGINT)
    try:
        _, stderr = child.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("the host did not end at the second SIGINT")
    assert child.returncode == -signal.SIGINT
    assert "interrupt received while loading" in stderr and "interrupt again" in stderr
    assert "interrupted while loading" in stderr and "Mock_HangInFactory_backend.so" in stderr
