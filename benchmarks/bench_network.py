"""The runtime's own time per layer in ``LoadedNetwork.execute``: time outside backend calls.

    python benchmarks/bench_network.py [--layers 30] [--repeats 7]

A chain of LAYERS Activation layers (alternately relu and leaky_relu, which the reference
optimizer leaves untouched: one workload step each) on a 1x16 float32 tensor, on CpuRef. The
backend's share is the sum of the step spans the executor records (CLOCK_MONOTONIC around each
backend call); everything else in ``execute`` (input checks, output allocation, binding, the
loop) is the runtime's. Baseline: the same workloads driven from a Python loop through
``Workload.execute``, as a runtime without a planned executor would.
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, per_call  # noqa: E402

import loader  # noqa: E402


def chain(layers):
    net = loader.Network()
    t = net.add_input("x", (1, 16))
    for i in range(layers):
        d = {"function": "relu"} if i % 2 == 0 else {"function": "leaky_relu", "a": 0.5}
        t = net.add_layer("Activation", [t], d, name=f"act{i}")
    net.add_output(t, "y")
    return net


def own_time(loaded, x, calls, repeats):
    """(execute ns, backend ns) per call, medians."""
    seconds = interleaved({"execute": per_call(lambda: loaded.execute({"x": x}), calls)},
                          repeats=repeats)["execute"]
    spans = []
    for _ in range(calls):
        loaded.execute({"x": x}, profile=True)
        spans.append(sum(e.end_ns - e.start_ns for e in loaded.last_profile[1:]))
    return seconds / calls * 1e9, statistics.median(spans)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n = args.layers
    net = chain(n)
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    calls = 2000
    runtime = loader.Runtime()          # closing it would unload the network
    loaded = runtime.load_network(net, backends=["CpuRef"])
    backend = runtime.create_backend("CpuRef")
    assert [s.kind for s in loaded.plan] == ["workload"] * n
    factory = backend.create_workload_factory()
    workloads = [factory.create_workload_prepared(layer.prepared) for layer in net.layers]
    buffers = [np.empty((1, 16), np.float32) for _ in range(2)]

    def python_loop():
        value = x
        for k, workload in enumerate(workloads):
            out = buffers[k % 2]
            workload.execute([value], [out])
            value = out
        return value.copy()

    expected = loaded.execute({"x": x})["y"]
    assert np.array_equal(python_loop(), expected)

    times = interleaved({
        "execute": per_call(lambda: loaded.execute({"x": x}), calls),
        "python loop": per_call(python_loop, calls),
    }, repeats=args.repeats)
    backend_spans = []
    for _ in range(calls):
        loaded.execute({"x": x}, profile=True)
        steps = loaded.last_profile[1:]
        backend_spans.append(sum(e.end_ns - e.start_ns for e in steps))
    backend_ns = statistics.median(backend_spans)
    execute_ns = times["execute"] / calls * 1e9
    loop_ns = times["python loop"] / calls * 1e9
    runtime_ns = execute_ns - backend_ns
    print(f"{n} layers, 1x16 float32, CpuRef workloads")
    print(f"execute              {execute_ns / 1e3:8.2f} us per call")
    print(f"  in backend calls   {backend_ns / 1e3:8.2f} us ({backend_ns / n:6.0f} ns per layer)")
    print(f"  runtime's own      {runtime_ns / 1e3:8.2f} us ({runtime_ns / n:6.0f} ns per layer)")
    print(f"python workload loop {loop_ns / 1e3:8.2f} us per call "
          f"({(loop_ns - backend_ns) / n:6.0f} ns per layer outside backend calls)")
    print(f"ratio runtime-own / python-loop-own per layer: "
          f"{runtime_ns / max(loop_ns - backend_ns, 1):.3f}")
    single = runtime.load_network(chain(1), backends=["CpuRef"])
    one_execute, one_backend = own_time(single, x, calls, args.repeats)
    fixed = one_execute - one_backend
    print(f"1-layer network: runtime's own {fixed / 1e3:.2f} us per call; marginal runtime time "
          f"per extra layer {(runtime_ns - fixed) / (n - 1):.0f} ns")
    runtime.close()


if __name__ == "__main__":
    main()
