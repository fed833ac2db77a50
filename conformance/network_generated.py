"""Generated whole networks on a backend with a sub-graph optimizer (NET-8 to NET-10): seeded
networks built from the layers it claims (conformance/network_builder.py), loaded onto it alone
as an application loads them, and compared with the float64 reference
(conformance/network_runs.py):

- ``net.generated-long-runs``: runs of 1 to 300 layers in one sub-graph, longer than any fixed
  table of steps or tensors a compiled sub-graph might keep;
- ``net.generated-side-outputs``: tensors read both inside a substitution and outside it, read
  again many layers later, fanned out and joined;
- ``net.generated-broadcast``: every binary layer with an operand of every lower rank, on either
  side, constant or a network input;
- ``net.weights-as-inputs``: weights, scales and matrices that are network inputs, new at every
  execute;
- ``net.concurrent-execute``: several loaded networks (different compiled sub-graphs, and the
  same network loaded twice) executed from several threads at once, bit for bit as serially.
"""
import threading

import numpy as np

from conformance import network_builder as nb
from conformance.network_runs import (SubjectRuntime, compare, execute, load,
                                      optimizing_backend, random_inputs, run_and_compare,
                                      supported)
from conformance.registry import Failed, NotSupported, case

LONG_RUNS = ((1, (7,)), (3, (2, 5)), (40, (3, 3, 3)), (300, (2, 3, 4, 5)))
SIDE_OUTPUT_SHAPES = ((2, 3, 8), (1, 5, 6, 4))
BROADCAST_SHAPES = ((4, 3), (3, 3, 3), (2, 3, 4, 5), (3, 3, 3, 3), (2, 1, 3, 2, 3),
                    (2, 2, 2, 2, 2, 2))
THREADS = 4
ROUNDS = 10


def _built(subject, make):
    backend = optimizing_backend(subject)
    try:
        networks = [(label, net) for label, net in make(backend) if net is not None]
    finally:
        backend.close()
    if not networks:
        raise NotSupported("the backend runs none of the layers these networks are made of")
    return networks


@case("net.generated-long-runs", "NET-8", tier="full")
def _long_runs(subject):
    networks = _built(subject, lambda backend: [
        (f"a run of {n} layers on {list(shape)}", nb.chain(backend, n, shape, 100 + n))
        for n, shape in LONG_RUNS])
    run_and_compare(subject, networks, subject.seed)


@case("net.generated-side-outputs", "NET-8", tier="full")
def _side_outputs(subject):
    networks = _built(subject, lambda backend: [
        (f"side outputs on {list(shape)}", nb.side_outputs(backend, shape, 200 + k))
        for k, shape in enumerate(SIDE_OUTPUT_SHAPES)])
    run_and_compare(subject, networks, subject.seed)


@case("net.generated-broadcast", "NET-8", tier="full")
def _broadcast(subject):
    networks = _built(subject, lambda backend: [
        (f"operands of every lower rank broadcast to {list(shape)}",
         nb.broadcasts(backend, shape, 300 + k)) for k, shape in enumerate(BROADCAST_SHAPES)])
    run_and_compare(subject, networks, subject.seed)


# -- weights that are network inputs ---------------------------------------------------------

def weights_networks(backend):
    """(label, network, names of the inputs that are weights): FullyConnected, Convolution2d,
    DepthwiseConvolution2d and MatMul whose weights, and a Multiplication whose scale, are
    network inputs, each followed by a layer the optimizer may fuse with it."""
    import loader
    built = []
    for label, x_shape, layers in (
            ("FullyConnected and MatMul", (3, 8),
             [("FullyConnected", (6, 8), {}), ("MatMul", (6, 5), None)]),
            ("Convolution2d and DepthwiseConvolution2d", (1, 5, 6, 3),
             [("Convolution2d", (4, 3, 3, 3), {"padding": 1}),
              ("DepthwiseConvolution2d", (1, 3, 3, 4), {"padding": 1})])):
        net = loader.Network()
        t = net.add_input("x", x_shape)
        weights = []
        for k, (layer, w_shape, descriptor) in enumerate(layers):
            shape = net.tensor(t.name).shape
            if not supported(backend, layer, [shape, w_shape], descriptor):
                continue
            w = net.add_input(f"w{k}", w_shape)
            t = net.add_layer(layer, [t, w], descriptor, name=f"{layer.lower()}{k}")
            weights.append(w.name)
            if supported(backend, "Activation", [net.tensor(t.name).shape], {"function": "relu"}):
                t = net.add_layer("Activation", [t], {"function": "relu"}, name=f"relu{k}")
        shape = net.tensor(t.name).shape
        if supported(backend, "Multiplication", [shape, shape[-1:]]):
            s = net.add_input("scale", shape[-1:])
            t = net.add_layer("Multiplication", [t, s], name="scaled")
            weights.append("scale")
        if weights:
            net.add_output(t, "y")
            built.append((label, net, weights))
    return built


@case("net.weights-as-inputs", "NET-9", tier="full")
def _weights_as_inputs(subject):
    backend = optimizing_backend(subject)
    try:
        networks = weights_networks(backend)
    finally:
        backend.close()
    if not networks:
        raise NotSupported("the backend runs none of the layers with weights these networks use")
    runtime = SubjectRuntime(subject)
    ran = 0
    try:
        for label, net, weights in networks:
            try:
                loaded = load(runtime, net, f"{label} with weights as network inputs")
            except NotSupported:
                continue
            with loaded:
                first = random_inputs(net, (subject.seed or 0) + 1)
                second = random_inputs(net, (subject.seed or 0) + 2)
                second["x"] = first["x"]            # only the weights change
                for k, inputs in enumerate((first, second, first)):
                    outputs = execute(runtime, loaded, inputs, label)
                    compare(net, inputs, outputs,
                            f"{label}: execute {k + 1} of 3, the weights ({', '.join(weights)}) "
                            f"{'new' if k else 'as first given'}")
            ran += 1
    finally:
        runtime.close()
    if not ran:
        raise NotSupported("the backend's optimizer declines weights that are network inputs")


# -- several networks from several threads ---------------------------------------------------

def concurrent_networks(backend, seed):
    """Two networks of one architecture with different constants, and one of another."""
    shape = (4, 16, 32)      # large enough that executes on different threads overlap
    return [net for net in (nb.chain(backend, 60, shape, seed), nb.chain(backend, 60, shape, seed + 1),
                            nb.side_outputs(backend, (1, 12, 12, 8), seed + 2)) if net is not None]


@case("net.concurrent-execute", "NET-10", tier="full")
def _concurrent(subject):
    backend = optimizing_backend(subject)
    try:
        networks = concurrent_networks(backend, 400)
    finally:
        backend.close()
    if not networks:
        raise NotSupported("the backend runs none of the layers these networks are made of")
    runtime = SubjectRuntime(subject)
    try:
        # Every network loaded once per thread's turn: the same network loaded twice is two
        # loaded networks, which may run at once (rule 12.9).
        chosen = [networks[k % len(networks)] for k in range(THREADS)]
        loaded = [load(runtime, net, f"network {k % len(networks)}") for k, net in enumerate(chosen)]
        inputs = [[random_inputs(net, 500 + 10 * k + r) for r in range(2)]
                  for k, net in enumerate(chosen)]
        serial = [[execute(runtime, loaded[k], x, f"network {k}, serially") for x in inputs[k]]
                  for k in range(THREADS)]
        for k, net in enumerate(chosen):    # serial results are right to begin with
            compare(net, inputs[k][0], serial[k][0], f"network {k % len(networks)}, serially")
        problems = []
        barrier = threading.Barrier(THREADS)

        def worker(k):
            try:
                barrier.wait()
                for r in range(ROUNDS):
                    got = loaded[k].execute(inputs[k][r % 2])
                    for name, want in serial[k][r % 2].items():
                        if not np.array_equal(got[name], want, equal_nan=True):
                            bad = int(np.sum(got[name] != want))
                            problems.append(f"thread {k} (network {k % len(networks)}), round "
                                            f"{r + 1}: output {name!r} differs from the serial "
                                            f"result in {bad} of {want.size} values")
                            return
            except Exception as error:           # noqa: BLE001 - reported as the finding
                problems.append(f"thread {k}: {type(error).__name__}: {error}")

        subject.note(f"{THREADS} threads execute {len(networks)} networks at once")
        subject.record.note(f"execute (loaded networks, from {THREADS} threads at once)")
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for network in loaded:
            network.unload()
    finally:
        runtime.close()
    if problems:
        raise Failed(f"{len(problems)} of {THREADS} threads executing loaded networks at once "
                     f"got other results than serial execution; first: {problems[0]}")
