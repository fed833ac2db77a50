"""Backends out of process (CONTRACT-models 16.3, 16.4): a backend that crashes, aborts, exits
or hangs in any kind of call raises BackendCrashedError (BackendTimeoutError) naming the call,
and the runtime goes on; the next use starts a fresh host, objects from before say they were
lost, networks are loaded again; a backend that keeps crashing becomes unavailable.

The fault backends (mock_backends/faults) strike in the call MOCK_FAULT_IN names, every
MOCK_FAULT_EVERY-th time; each test sets both before its host starts."""
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import loader
import mock_backends
from helpers import install, install_reference

F = np.float32
X = np.array([-1, 2, -3, 4], F)
RELU = {"function": "relu"}
TIMEOUT = 0.5           # call_timeout where a call hangs


def relu_network():
    net = loader.Network()
    t = net.add_input("x", (4,))
    t = net.add_layer("Activation", [t], RELU, name="relu")
    net.add_output(t, "y")
    return net


def _workload(backend):
    return backend.create_workload_factory().create_workload("Activation", [(4,)], RELU)


def _destroy_then_use(runtime, backend_id):
    backend = runtime.create_backend(backend_id)
    _workload(backend).close()                  # DESTROY gets no reply: the next call sees it
    backend.get_id()


# call -> (what reaches it, the call the error names)
CALLS = {
    "BackendFactory": (lambda rt, b: rt.create_backend(b), "the BackendFactory probe"),
    "get_capabilities": (lambda rt, b: rt.create_backend(b).capabilities, "get_capabilities"),
    "is_layer_supported": (lambda rt, b: rt.create_backend(b).is_layer_supported(
        "Activation", [(4,)], RELU), "is_layer_supported"),
    "create_memory_manager": (lambda rt, b: rt.create_backend(b).create_memory_manager(),
                              "create_memory_manager"),
    "acquire": (lambda rt, b: rt.create_backend(b).create_memory_manager().acquire(), "acquire"),
    "create_workload_factory": (lambda rt, b: rt.create_backend(b).create_workload_factory(),
                                "create_workload_factory"),
    "create_workload": (lambda rt, b: _workload(rt.create_backend(b)), "create_workload"),
    "execute": (lambda rt, b: _workload(rt.create_backend(b)).execute([X]), "execute"),
    "create_backend_context": (lambda rt, b: rt.create_backend(b).create_backend_context(),
                               "create_backend_context"),
    "before_load_network": (lambda rt, b: rt.load_network(relu_network()),
                            "before_load_network"),
    "optimize_subgraph": (lambda rt, b: rt.load_network(relu_network()), "optimize_subgraph"),
    "compiled_execute": (lambda rt, b: rt.load_network(relu_network()).execute({"x": X}),
                         "execute (compiled sub-graph)"),
    "destroy_workload": (_destroy_then_use, "destroy (workload)"),
}

# fault -> (the calls it is tried in, what the error says of how the host ended)
FAULTS = {
    "crash": (list(CALLS), {"signal": "SIGSEGV"}),
    "abort": (["BackendFactory", "create_workload", "execute", "optimize_subgraph"],
              {"signal": "SIGABRT"}),
    "exit": (["get_capabilities", "acquire", "execute", "compiled_execute"],
             {"exit_status": 3}),
    "hang": (["BackendFactory", "is_layer_supported", "execute", "optimize_subgraph"], {}),
}


@pytest.fixture
def fault_runtime(backend_dir, monkeypatch):
    """A runtime with one fault backend in a host, striking in ``call`` every ``every``-th
    time."""
    opened = []

    def make(fault, call, every=1, **options):
        install(mock_backends.fault_path(fault), backend_dir)
        options.setdefault("call_timeout", TIMEOUT if fault == "hang" else 30)
        runtime = loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process",
                                 **options)
        opened.append(runtime)
        # Registration ran the factory here; hosts start later, with the fault armed.
        monkeypatch.setenv("MOCK_FAULT_IN", call)
        monkeypatch.setenv("MOCK_FAULT_EVERY", str(every))
        return runtime
    yield make
    for runtime in opened:
        runtime.close()


def _backend_id(fault):
    return "Fault" + "".join(part.capitalize() for part in fault.split("_"))


@pytest.mark.parametrize("fault, call", [(f, c) for f, (calls, _) in FAULTS.items()
                                         for c in calls])
def test_a_fault_in_any_call_raises_naming_the_call_and_the_runtime_goes_on(fault_runtime, fault,
                                                                           call):
    runtime = fault_runtime(fault, call)
    backend_id = _backend_id(fault)
    reach, named = CALLS[call]
    expected = loader.BackendTimeoutError if fault == "hang" else loader.BackendCrashedError
    with pytest.raises(expected) as raised:
        reach(runtime, backend_id)
    error = raised.value
    assert isinstance(error, loader.BackendError)
    assert (error.backend, error.call) == (backend_id, named)
    assert backend_id in str(error) and named in str(error)
    for key, value in FAULTS[fault][1].items():
        assert getattr(error, key) == value and str(value) in str(error)
    if fault == "hang":
        assert error.signal == "SIGKILL" and f"within {TIMEOUT:g} s" in str(error)
    if fault == "abort":
        assert "fault: giving up in" in error.output and error.output in str(error)
    # The runtime, and this backend's next host, keep working.
    assert runtime.backend_ids == [backend_id]
    if call not in ("BackendFactory",):
        assert runtime.create_backend(backend_id).get_id() == backend_id


@pytest.mark.parametrize("call", ["BackendFactory", "create_workload", "execute",
                                  "optimize_subgraph", "compiled_execute"])
def test_a_thread_leaked_in_a_call_stays_in_the_host_and_ends_with_it(fault_runtime, call):
    runtime = fault_runtime("leak_thread", call)
    threads = threading.active_count()
    loaded = runtime.load_network(relu_network())
    backend = runtime.create_backend("FaultLeakThread")
    workload = _workload(backend)
    for _ in range(3):
        np.testing.assert_array_equal(workload.execute([X])[0], [0, 2, 0, 4])
        np.testing.assert_array_equal(loaded.execute({"x": X})["y"], [0, 2, 0, 4])
    pid = backend.host.pid
    assert len(os.listdir(f"/proc/{pid}/task")) > 1           # the loop and what leaked
    assert threading.active_count() == threads
    runtime.close()
    assert not os.path.exists(f"/proc/{pid}")


def test_objects_from_before_a_crash_say_they_were_lost_and_new_ones_work(fault_runtime):
    runtime = fault_runtime("crash", "execute", every=2)
    backend = runtime.create_backend("FaultCrash")
    manager = backend.create_memory_manager()
    factory = backend.create_workload_factory(manager)
    workload = factory.create_workload("Activation", [(4,)], RELU)
    context = backend.create_backend_context()
    first = backend.host.pid
    workload.execute([X])
    with pytest.raises(loader.BackendCrashedError, match="SIGSEGV in execute"):
        workload.execute([X])
    assert not os.path.exists(f"/proc/{first}")               # reaped
    for call in (lambda: workload.execute([X]), backend.get_id, manager.acquire,
                 lambda: factory.create_workload("Activation", [(4,)], RELU),
                 lambda: context.before_load_network(1), lambda: backend.capabilities):
        with pytest.raises(loader.BackendCrashedError,
                           match="was lost when its host process was killed by SIGSEGV in "
                                 "execute; create it again") as raised:
            call()
        assert raised.value.signal == "SIGSEGV"
    for thing in (workload, factory, manager, context, backend):
        thing.close()                                        # closing what was lost is quiet
    again = runtime.create_backend("FaultCrash")
    np.testing.assert_array_equal(_workload(again).execute([X])[0], [0, 2, 0, 4])
    assert again.host.pid not in (None, first)


def test_a_backend_that_crashes_max_restarts_times_in_a_row_becomes_unavailable(fault_runtime):
    runtime = fault_runtime("crash", "execute", max_restarts=2)
    with pytest.raises(loader.BackendCrashedError, match="the next use starts a new one"):
        CALLS["execute"][0](runtime, "FaultCrash")
    with pytest.raises(loader.BackendCrashedError, match=r"now unavailable \(2 crashes in a row"):
        CALLS["execute"][0](runtime, "FaultCrash")
    with pytest.raises(loader.BackendCrashedError) as raised:
        runtime.create_backend("FaultCrash")
    assert str(raised.value) == (
        "backend 'FaultCrash' is unavailable: its host crashed 2 times in a row (the last one "
        "was killed by SIGSEGV in execute)")
    assert any("FaultCrash" in note and "unavailable" in note
               for note in runtime.report["notes"])


def test_crashes_with_successes_between_them_are_not_in_a_row(fault_runtime):
    runtime = fault_runtime("crash", "execute", every=2, max_restarts=2)
    crashes = 0
    for _ in range(6):
        workload = _workload(runtime.create_backend("FaultCrash"))
        workload.execute([X])
        try:
            workload.execute([X])
        except loader.BackendCrashedError:
            crashes += 1
    assert crashes == 6
    assert runtime.create_backend("FaultCrash").get_id() == "FaultCrash"


def test_a_network_is_loaded_again_after_its_host_crashed(fault_runtime, backend_dir):
    install_reference(backend_dir)
    runtime = fault_runtime("crash", "compiled_execute", every=3)
    net = loader.Network()
    x = net.add_input("x", (1, 4, 4, 2))
    w = net.add_constant("w", np.random.default_rng(3).standard_normal((2, 3, 3, 2)).astype(F))
    y = net.add_layer("Convolution2d", [x, w], {"padding": 1}, name="conv")
    y = net.add_layer("Activation", [y], RELU, name="relu")
    net.add_output(y, "y")
    data = np.random.default_rng(4).standard_normal((1, 4, 4, 2)).astype(F)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backends=["CpuRef"]) as local:
        expected = local.load_network(net).execute({"x": data})["y"]
    loaded = runtime.load_network(net, backends=["FaultCrash", "CpuRef"])
    assert [step.backend for step in loaded.plan] == ["CpuRef", "FaultCrash"]
    outcomes = []
    for _ in range(9):
        try:
            np.testing.assert_allclose(loaded.execute({"x": data})["y"], expected, rtol=1e-6)
            outcomes.append("ok")
        except loader.BackendCrashedError as error:
            assert error.call == "execute (compiled sub-graph)" and error.signal == "SIGSEGV"
            assert f"network {loaded.id} is loaded again at its next execute" in str(error)
            outcomes.append("crash")
    assert outcomes == ["ok", "ok", "crash"] * 3
    loaded.unload()


def test_a_file_that_changed_since_registration_is_not_served(backend_dir):
    path = install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process") as rt:
        with open(path, "ab") as f:
            f.write(b"\0")
        with pytest.raises(loader.BackendCreationError,
                           match="the backend host will not serve the file: the file changed "
                                 "since it was registered"):
            rt.create_backend("CpuRef")
        with pytest.raises(loader.BackendCrashedError, match="is unavailable: the backend host "
                                                             "will not serve"):
            rt.create_backend("CpuRef")


def test_a_host_killed_from_outside_is_reported_by_its_signal(backend_dir):
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process") as rt:
        backend = rt.create_backend("CpuRef")
        os.kill(backend.host.pid, signal.SIGTERM)
        with pytest.raises(loader.BackendCrashedError, match="killed by SIGTERM") as raised:
            backend.is_layer_supported("Softmax", [(2, 3)])
        assert raised.value.call == "is_layer_supported"
        assert rt.create_backend("CpuRef").is_layer_supported("Softmax", [(2, 3)])


def test_the_application_of_the_docs_keeps_running_and_leaks_nothing():
    """examples/crashing_backend.py: a two-backend network, one backend segfaulting in every
    tenth execute."""
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "examples", "crashing_backend.py")
    if not os.path.exists(example):
        pytest.skip("examples/ is not beside the tests")
    result = subprocess.run([sys.executable, example, "--executes", "30"], capture_output=True,
                            text=True, cwd="/", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "30 executes: 27 right, 0 wrong, 3 crashed (FaultCrash: SIGSEGV in execute " \
           "(compiled sub-graph))" in result.stdout
    assert "nothing leaked" in result.stdout


# -- settings ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value, error", [(0, ValueError), (-1, ValueError),
                                          (float("inf"), ValueError), (1e6, ValueError),
                                          ("5", TypeError), (True, TypeError)])
def test_a_bad_call_timeout_is_a_clean_error(value, error):
    with pytest.raises(error, match="call_timeout"):
        loader.Runtime(backend_host="process", call_timeout=value)


@pytest.mark.parametrize("arguments, error", [
    ({"backend_host": "subprocess"}, ValueError), ({"max_restarts": -1}, ValueError),
    ({"max_restarts": 2.0}, TypeError)])
def test_bad_host_arguments_are_clean_errors(arguments, error):
    with pytest.raises(error):
        loader.Runtime(**arguments)


def test_the_environment_chooses_hosts_and_the_argument_wins(monkeypatch, backend_dir):
    install_reference(backend_dir)
    monkeypatch.setenv("DYNAMIC_BACKEND_HOST", " Process ")
    monkeypatch.setenv("DYNAMIC_BACKEND_CALL_TIMEOUT", "none")
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        settings = rt.report["settings"]
        assert (settings["backend_host"], settings["call_timeout"]) == ("process", None)
        assert settings["sources"]["backend_host"] == "DYNAMIC_BACKEND_HOST"
        assert settings["sources"]["call_timeout"] == "DYNAMIC_BACKEND_CALL_TIMEOUT"
        assert rt.create_backend("CpuRef").host.pid is not None
    monkeypatch.setenv("DYNAMIC_BACKEND_CALL_TIMEOUT", "2.5")
    with loader.Runtime(dynamic_backends_path=str(backend_dir), call_timeout=None) as rt:
        assert rt.report["settings"]["call_timeout"] is None
        assert rt.report["settings"]["sources"]["call_timeout"] == "argument"
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        assert rt.report["settings"]["call_timeout"] == 2.5
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="in-process") as rt:
        assert isinstance(rt.create_backend("CpuRef"), loader.Backend)
        assert rt.report["settings"]["call_timeout"] is None


@pytest.mark.parametrize("variable, value", [("DYNAMIC_BACKEND_HOST", "yes"),
                                             ("DYNAMIC_BACKEND_CALL_TIMEOUT", "0"),
                                             ("DYNAMIC_BACKEND_CALL_TIMEOUT", "soon")])
def test_bad_values_in_the_environment_are_ignored_with_a_note(monkeypatch, caplog, variable,
                                                               value):
    monkeypatch.setenv(variable, value)
    with loader.Runtime() as rt:
        settings = rt.report["settings"]
        assert settings["backend_host"] == "in-process"
        assert settings["sources"]["backend_host"] == "default"
        assert settings["sources"]["call_timeout"] == "default"
        assert any(variable in note and repr(value) in note for note in rt.report["notes"])
    assert any(variable in r.getMessage() for r in caplog.records)


def test_closing_the_runtime_ends_a_call_that_hangs_without_a_timeout(fault_runtime):
    runtime = fault_runtime("hang", "execute", call_timeout=None)
    workload = _workload(runtime.create_backend("FaultHang"))
    pid = workload._host.pid
    raised = []
    caller = threading.Thread(target=lambda: raised.append(pytest.raises(
        loader.BackendCrashedError, workload.execute, [X])))
    caller.start()
    time.sleep(0.2)                                   # the call hangs in the host now
    runtime.close()
    caller.join(timeout=10)
    assert not caller.is_alive() and not os.path.exists(f"/proc/{pid}")
    assert raised and raised[0].value.signal == "SIGKILL" and raised[0].value.call == "execute"
