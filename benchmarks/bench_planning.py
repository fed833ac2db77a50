"""How planning scales with the length of a network: chains of 1k, 10k and 100k Activation
layers, built, planned (assignment, grouping, the optimizer's answer and its check, steps,
buffers) and loaded, on the reference backend (one sub-graph, compiled by its optimizer) and on a
Backend API 1.1 backend (no optimizer: one workload per layer). Prints seconds per phase and
microseconds per layer; linear planning keeps the last column flat.

    python benchmarks/bench_planning.py [--lengths 1000,10000,100000]
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

import loader
from loader.networks import planning

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def chain(length):
    net = loader.Network()
    t = net.add_input("x", (1, 16))
    for _ in range(length):
        t = net.add_layer("Activation", [t], {"function": "relu"})
    net.add_output(t, "y")
    return net


def measure(runtime, backend_id, length):
    start = time.perf_counter()
    net = chain(length)
    built = time.perf_counter()
    instances = {backend_id: runtime.create_backend(backend_id)}
    plan = planning.plan_network(net, instances)
    planned = time.perf_counter()
    planning.close_units([planning.Unit([], s.backend, s.kind, s.compiled) for s in plan.steps])
    with runtime.load_network(net, backends=[backend_id]) as loaded:
        loaded_at = time.perf_counter()
        x = np.ones((1, 16), np.float32)
        assert np.array_equal(loaded.execute({"x": x})["y"], x)
        steps = len(loaded.plan)
    return built - start, planned - built, loaded_at - planned, steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="1000,10000,100000")
    args = parser.parse_args(argv)
    import mock_backends
    import shutil
    with tempfile.TemporaryDirectory() as directory:
        shutil.copy(mock_backends.path("minor_previous"), directory)
        import reference_backend
        shutil.copy(reference_backend.LIBRARY_PATH, directory)
        with loader.Runtime(dynamic_backends_path=directory) as runtime:
            print(f"{'backend':<20} {'layers':>8} {'steps':>7} {'build s':>9} {'plan s':>9} "
                  f"{'load s':>9} {'plan us/layer':>14}")
            for backend_id in ("CpuRef", "MockMinorPrevious"):
                for length in (int(v) for v in args.lengths.split(",")):
                    try:
                        build, plan, load, steps = measure(runtime, backend_id, length)
                    except loader.BackendError as error:
                        print(f"{backend_id:<20} {length:>8}  failed: {str(error)[:90]}")
                        continue
                    print(f"{backend_id:<20} {length:>8} {steps:>7} {build:>9.3f} {plan:>9.3f} "
                          f"{load:>9.3f} {plan / length * 1e6:>14.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
