"""What a backend host gets and what it leaves (CONTRACT-models 16.5): no descriptor but its own,
a process group of its own, the limits an operator sets, death with its parent; closing the
runtime reaps every host and leaves no descriptor, segment or process behind, even while four
threads call through a host that is killed at random moments. The host checks every request
like untrusted input and refuses what does not fit, without dying."""
import os
import random
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import loader
import mock_backends
from helpers import install, install_reference
from loader.host import channel as wire

F = np.float32


@pytest.fixture
def runtime(backend_dir):
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process",
                        call_timeout=30) as rt:
        yield rt


def children():
    """Processes whose parent is this one (zombies included)."""
    mine, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == mine:
                found.append(int(entry))
    return sorted(found)


def counts():
    return {"fds": len(os.listdir("/proc/self/fd")), "shm": len(os.listdir("/dev/shm")),
            "children": len(children()), "threads": threading.active_count()}


def test_the_host_keeps_no_descriptor_but_its_own_and_leads_its_own_group(runtime):
    inherited = os.open(os.devnull, os.O_RDONLY)          # inheritable: an exec would pass it on
    os.set_inheritable(inherited, True)
    try:
        backend = runtime.create_backend("CpuRef")
        pid = backend.host.pid
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) == [0, 1, 2, 3]
        assert os.getpgid(pid) == pid and os.getsid(pid) == pid
        assert os.getpgid(pid) != os.getpgid(0)
    finally:
        os.close(inherited)


def test_operator_limits_reach_the_host(backend_dir):
    install_reference(backend_dir)
    limits = {"address_space": 8 << 30, "cpu_time": 600}
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process",
                        host_limits=limits) as rt:
        pid = rt.create_backend("CpuRef").host.pid
        with open(f"/proc/{pid}/limits") as f:
            table = {line[:26].strip(): line[26:].split() for line in f}
        assert table["Max address space"][:2] == [str(8 << 30), str(8 << 30)]
        assert table["Max cpu time"][:2] == ["600", "601"]
        assert table["Max core file size"][:2] == ["0", "0"]
        assert rt.report["settings"]["host_limits"] == limits


@pytest.mark.parametrize("limits, error", [
    ({"memory": 1}, ValueError), ({"cpu_time": 0}, ValueError), ({"cpu_time": 1.5}, TypeError),
    ({"address_space": True}, TypeError), ([("cpu_time", 1)], TypeError)])
def test_bad_limits_are_refused(limits, error):
    with pytest.raises(error, match="host_limits"):
        loader.Runtime(backend_host="process", host_limits=limits)


def _state(pid):
    """The state letter of process ``pid`` (Z: a zombie), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_a_host_ends_when_its_parent_dies_even_in_a_hung_call(backend_dir):
    install_reference(backend_dir)
    install(mock_backends.fault_path("hang"), backend_dir)
    script = textwrap.dedent(f"""
        import os, threading, time, numpy as np, loader
        rt = loader.Runtime({str(backend_dir)!r}, backend_host="process")
        os.environ["MOCK_FAULT_IN"] = "execute"
        # Each host started from a thread that ends at once: the hosts must outlive it.
        made = []
        for backend_id in ("CpuRef", "FaultHang"):
            thread = threading.Thread(target=lambda: made.append(rt.create_backend(backend_id)))
            thread.start(); thread.join()
        reference, hanging = made
        reference.get_id()
        workload = hanging.create_workload_factory().create_workload(
            "Activation", [(4,)], {{"function": "relu"}})
        threading.Thread(target=workload.execute, args=([np.ones(4, np.float32)],),
                         daemon=True).start()
        time.sleep(0.3)                      # the call hangs in the host now
        print(reference.host.pid, hanging.host.pid, flush=True)
        os.kill(os.getpid(), 9)
    """)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=60)
    assert child.returncode == -9, child.stderr
    pids = [int(pid) for pid in child.stdout.split()]
    deadline = time.monotonic() + 10
    while any(_state(pid) not in (None, "Z") for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [_state(pid) in (None, "Z") for pid in pids] == [True, True], \
        "a host outlived its parent"


def test_closing_the_runtime_leaves_nothing_behind(backend_dir):
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process") as rt:
        rt.create_backend("CpuRef").get_id()           # the launcher thread exists from here
    before = counts()
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process") as rt:
        backend = rt.create_backend("CpuRef")
        pid = backend.host.pid
        workload = backend.create_workload_factory().create_workload("Softmax", [(2, 8)])
        workload.execute([np.ones((2, 8), F)])
        net = loader.Network()
        t = net.add_input("x", (1, 4, 4, 2))
        t = net.add_layer("Pooling2d", [t], {"pool": "max", "kernel": 2, "stride": 2})
        net.add_output(t, "y")
        rt.load_network(net).execute({"x": np.ones((1, 4, 4, 2), F)})
        assert counts() != before
    assert counts() == before
    assert not os.path.exists(f"/proc/{pid}")
    with pytest.raises(loader.BackendError, match="the runtime that hosted it was closed"):
        workload.execute([np.ones((2, 8), F)])


def test_four_threads_through_one_host_killed_at_random_moments(backend_dir):
    install_reference(backend_dir)
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(F)
    expected = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process") as rt:
        rt.create_backend("CpuRef").get_id()
    before = counts()
    tally = {"ok": 0, "crashed": 0, "kills": 0}
    lock = threading.Lock()
    stop = threading.Event()
    failures = []
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backend_host="process",
                        call_timeout=20, max_restarts=10_000) as rt:
        host = rt.create_backend("CpuRef").host

        def caller():
            workload = None
            while not stop.is_set():
                try:
                    if workload is None:
                        workload = rt.create_backend("CpuRef").create_workload_factory() \
                            .create_workload("Softmax", [(2, 8)])
                    [y] = workload.execute([x])
                    np.testing.assert_allclose(y, expected, rtol=1e-5)
                    outcome = "ok"
                except loader.BackendCrashedError:
                    workload, outcome = None, "crashed"
                except BaseException as error:          # anything else is a failure
                    failures.append(error)
                    return
                with lock:
                    tally[outcome] += 1

        def killer():
            rng = random.Random(3)
            while not stop.is_set():
                time.sleep(rng.uniform(0.002, 0.03))
                pid = host.pid
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        tally["kills"] += 1
                    except ProcessLookupError:
                        pass

        threads = [threading.Thread(target=caller) for _ in range(4)]
        threads.append(threading.Thread(target=killer))
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in threads), "a call hung"
    assert failures == []
    assert tally["ok"] > 20 and tally["crashed"] > 2 and tally["kills"] > 5, tally
    assert counts() == before


# -- the host checks every request ---------------------------------------------------------

def _layer(infos=1, descriptor=None, dimensions=2):
    info = struct.pack("<4I8q", 80, 0, dimensions, 0, *([2] * 8))
    body = struct.pack("<4I", 0, infos - 1, 1, 0 if descriptor is None else len(descriptor))
    return body + info * infos + (descriptor or b"")


def _buffer(segment, offset, size):
    return struct.pack("<4Q", segment, offset, size, 0)


# op, the object it names, its payload (from the handles of a live instance, workload and I/O
# segment), what the refusal says
MALFORMED = [
    ("layer_support", lambda h: 12345, lambda h: _layer(2), "no live object"),
    ("layer_support", "instance", lambda h: _layer(2)[:10], "shorter than its contents"),
    ("layer_support", "instance", lambda h: _layer(2, dimensions=9), "too many dimensions"),
    ("layer_support", "instance", lambda h: _layer(2, descriptor=struct.pack("<4I", 99, 0, 0, 0)),
     "struct_size is not its size"),
    ("layer_support", "instance", lambda h: struct.pack("<4I", 0, 0xFFFFFFFF, 1, 0),
     "more than 65535"),
    ("create_workload_factory", "instance", lambda h: struct.pack("<Q", 99), "no live object"),
    ("execute", lambda h: 7, lambda h: struct.pack("<2I", 1, 1), "no live workload"),
    ("execute", "workload", lambda h: struct.pack("<2I", 0x40000000, 0x40000000),
     "more buffers"),
    ("execute", "workload", lambda h: struct.pack("<2I", 1, 0) + _buffer(h["workload"], 0, 16),
     "no live segment"),
    ("execute", "workload", lambda h: struct.pack("<2I", 1, 0) + _buffer(h["io"], 1 << 40, 16),
     "outside its segment"),
    ("execute", "workload", lambda h: struct.pack("<2I", 1, 0) + _buffer(h["io"], 2**64 - 8, 16),
     "outside its segment"),
    ("execute", "workload", lambda h: struct.pack("<2I", 0, 1) + _buffer(h["io"], 0, 2**64 - 1),
     "outside its segment"),
    ("add_sequence", "instance", lambda h: struct.pack("<I", 0), "no steps"),
    ("add_sequence", "instance", lambda h: struct.pack("<IQ2I", 1, 5, 0, 0), "no live workload"),
    ("add_sequence", "instance", lambda h: struct.pack("<IQ2I", 1, h["workload"], 3, 0),
     "run past the request"),
    ("optimize", "instance", lambda h: struct.pack("<QI", 0, 0xFFFFFF), "larger than the request"),
    ("add_segment", "instance", lambda h: struct.pack("<Q", 4096), "without its descriptor"),
    ("run_sequence", lambda h: 3, lambda h: b"", "no live sequence"),
    ("unknown", "instance", lambda h: b"", "no such request"),
]


@pytest.mark.parametrize("op, target, payload, refusal", MALFORMED,
                         ids=[f"{m[0]}-{m[3]}" for m in MALFORMED])
def test_requests_that_do_not_fit_are_refused_and_the_host_lives_on(runtime, monkeypatch, op,
                                                                    target, payload, refusal):
    backend = runtime.create_backend("CpuRef")
    workload = backend.create_workload_factory().create_workload("Activation", [(4,)],
                                                                 {"function": "relu"})
    workload.execute([np.ones(4, F)])                  # the I/O segment exists from here
    handles = {"instance": backend._handle, "workload": workload._handle,
               "io": backend.host._io[1]}
    handle = handles[target] if isinstance(target, str) else target(handles)
    monkeypatch.setitem(wire.OP, "unknown", 250)
    _, _, outcome, reply = backend.host.call(None, op, handle, 0, payload(handles))
    assert outcome == wire.OUTCOME_REFUSED, (outcome, reply)
    assert refusal in wire.text(wire.message(reply))
    pid = backend.host.pid
    np.testing.assert_array_equal(workload.execute([np.array([-1, 1, -1, 1], F)])[0],
                                  [0, 1, 0, 1])
    assert backend.host.pid == pid
