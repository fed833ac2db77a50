"""An application that keeps running a two-backend network while one of its backends crashes:
a fault backend (FaultCrash, from mock_backends/faults) runs the ReLU between the reference
backend's convolution and pooling, and segfaults in every tenth execute. Both backends run in
backend host processes (docs/backend-host.md): each crash is an exception naming the call and
the signal, the network is loaded again at its next execute, and every other result is right.
Counts the application's descriptors, child processes, threads and /dev/shm entries before and
after.

    python examples/crashing_backend.py [--executes 100]
"""
import argparse
import os
import shutil
import tempfile
import threading

import numpy as np

import loader
import mock_backends
import reference_backend


def build(rng):
    net = loader.Network()
    x = net.add_input("image", (1, 16, 16, 3))
    w1 = net.add_constant("w1", rng.standard_normal((8, 3, 3, 3), dtype=np.float32) * 0.3)
    w2 = net.add_constant("w2", rng.standard_normal((4, 3, 3, 8), dtype=np.float32) * 0.3)
    y = net.add_layer("Convolution2d", [x, w1], {"padding": 1}, name="conv1")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    y = net.add_layer("Pooling2d", [y], {"pool": "max", "kernel": 2, "stride": 2}, name="pool")
    y = net.add_layer("Convolution2d", [y, w2], {"padding": 1}, name="conv2")
    net.add_output(y, "features")
    return net


def children():
    mine, count = os.getpid(), 0
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                count += int(f.read().rsplit(")", 1)[1].split()[1]) == mine
        except OSError:
            pass
    return count


def counts():
    return {"descriptors": len(os.listdir("/proc/self/fd")), "children": children(),
            "threads": threading.active_count(), "/dev/shm": len(os.listdir("/dev/shm"))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executes", type=int, default=100)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    net = build(rng)
    images = [rng.standard_normal((1, 16, 16, 3), dtype=np.float32) for _ in range(10)]
    directory = tempfile.mkdtemp()
    try:
        shutil.copy(reference_backend.LIBRARY_PATH, directory)
        shutil.copy(mock_backends.fault_path("crash"), directory)
        with loader.Runtime(directory, backends=["CpuRef"]) as local, \
                local.load_network(net) as reference:
            expected = [reference.execute({"image": image})["features"] for image in images]
        # Once, so that what lives as long as the process (the hosts' launcher thread) is there
        # before counting.
        with loader.Runtime(directory, backend_host="process") as warm:
            warm.create_backend("CpuRef").get_id()
        before = counts()
        right = wrong = 0
        crashes = []
        with loader.Runtime(directory, backend_host="process", call_timeout=30) as runtime:
            # Registration has run; the hosts start from here, with the fault armed.
            os.environ.update(MOCK_FAULT_IN="compiled_execute", MOCK_FAULT_EVERY="10")
            loaded = runtime.load_network(net, backends=["FaultCrash", "CpuRef"])
            print("plan:", ", ".join(f"{'+'.join(s.layers)} on {s.backend}" for s in loaded.plan))
            for i in range(args.executes):
                try:
                    result = loaded.execute({"image": images[i % 10]})["features"]
                except loader.BackendCrashedError as error:
                    crashes.append(error)
                    if len(crashes) == 1:
                        print(f"execute {i}: {error}")
                    continue
                if np.allclose(result, expected[i % 10], rtol=1e-5, atol=1e-5):
                    right += 1
                else:
                    wrong += 1
            loaded.unload()
        after = counts()
        kinds = sorted({f"{e.backend}: {e.signal or e.exit_status} in {e.call}" for e in crashes})
        print(f"{args.executes} executes: {right} right, {wrong} wrong, {len(crashes)} crashed "
              f"({'; '.join(kinds)})")
        print(f"before: {before}")
        print(f"after:  {after}")
        print("nothing leaked" if before == after else "LEAKED")
        return 0 if wrong == 0 and before == after and right + len(crashes) == args.executes \
            else 1
    finally:
        os.environ.pop("MOCK_FAULT_IN", None)
        os.environ.pop("MOCK_FAULT_EVERY", None)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
