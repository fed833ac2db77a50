"""What running backends out of process costs (docs/backend-host.md), against the same calls in
process, on the reference backend.

    python benchmarks/bench_backend_host.py [--repeats 9] [--onnx MODEL.onnx] [--kit]

- round trip: one request to a host and its reply (``HostProcess.ping``), and a tiny
  ``Workload.execute`` (ReLU of 4 floats) through a host and in process (goal: <= 20 us);
- convolution: a 1x56x56x64 3x3 convolution with 64 outputs, ``Workload.execute`` through a host
  against in process, with its tensors copied through the host's I/O segment and with them in
  shared arrays (``loader.shared_array``, read and written in place; goal: <= 1.1x);
- whole network: a MobileNetV2-like network (inverted residual blocks: 1x1 expansion + ReLU6,
  3x3 depthwise + ReLU6, 1x1 projection, residual additions; 224x224 input, 1000 classes) built
  with loader.Network, ``LoadedNetwork.execute`` through a host against in process; with
  ``--onnx`` a model imported by loader.onnx instead (for example torchvision's mobilenet_v2
  exported with torch.onnx.export);
- with ``--kit``: the conformance kit's whole run on the reference backend through a host
  (``--backend-host process``) against in process (one run each: minutes).

Interleaved rounds, medians (benchmarks/_timing.py); each network's host and in-process results
are compared first.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, per_call  # noqa: E402

import loader  # noqa: E402
import reference_backend  # noqa: E402

F = np.float32


def mobilenet_v2(size=224, classes=1000, width=1.0, seed=0):
    """A MobileNetV2-like loader.Network (NHWC), input "x" 1 x size x size x 3."""
    rng = np.random.default_rng(seed)
    net = loader.Network()
    counter = [0]

    def constant(shape, scale):
        counter[0] += 1
        return net.add_constant(f"c{counter[0]}", (rng.standard_normal(shape) * scale).astype(F))

    def conv(t, cin, cout, kernel, stride, depthwise=False, act=True):
        counter[0] += 1
        name = f"l{counter[0]}"
        pad = kernel // 2
        if depthwise:
            w = constant((1, kernel, kernel, cin), 1.0 / kernel)
            y = net.add_layer("DepthwiseConvolution2d", [t, w, constant((cin,), 0.05)],
                              {"stride": stride, "padding": pad}, name=name)
        else:
            w = constant((cout, kernel, kernel, cin), 1.0 / np.sqrt(kernel * kernel * cin))
            y = net.add_layer("Convolution2d", [t, w, constant((cout,), 0.05)],
                              {"stride": stride, "padding": pad}, name=name)
        if act:
            y = net.add_layer("Activation", [y], {"function": "bounded_relu", "a": 6.0},
                              name=name + "_relu6")
        return y

    def channels(c):
        return max(8, int(c * width + 4) // 8 * 8)

    t = net.add_input("x", (1, size, size, 3))
    cin = channels(32)
    t = conv(t, 3, cin, 3, 2)
    for expand, cout, repeats, stride in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2),
                                          (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                                          (6, 320, 1, 1)]:
        cout = channels(cout)
        for i in range(repeats):
            s = stride if i == 0 else 1
            y = t
            if expand != 1:
                y = conv(y, cin, cin * expand, 1, 1)
            y = conv(y, cin * expand, cin * expand, 3, s, depthwise=True)
            y = conv(y, cin * expand, cout, 1, 1, act=False)
            if s == 1 and cin == cout:
                counter[0] += 1
                y = net.add_layer("Addition", [y, t], {}, name=f"add{counter[0]}")
            t, cin = y, cout
    t = conv(t, cin, 1280, 1, 1)
    side = net.tensor(t).shape[1]
    t = net.add_layer("Pooling2d", [t], {"pool": "average", "kernel": side, "stride": side},
                      name="pool")
    t = net.add_layer("Reshape", [t], {"shape": [1, 1280]}, name="flatten")
    w = constant((classes, 1280), 1.0 / np.sqrt(1280))
    t = net.add_layer("FullyConnected", [t, w, constant((classes,), 0.05)], {}, name="fc")
    t = net.add_layer("Softmax", [t], {}, name="softmax")
    net.add_output(t, "y")
    return net


def runtimes(directory):
    return (loader.Runtime(directory, backend_host="in-process"),
            loader.Runtime(directory, backend_host="process"))


def round_trip(local, hosted, repeats):
    print("round trip (one request and its reply; a tiny execute)")
    relu = {"function": "relu"}
    x = np.array([-1, 2, -3, 4], F)
    b_local, b_host = local.create_backend("CpuRef"), hosted.create_backend("CpuRef")
    w_local = b_local.create_workload_factory().create_workload("Activation", [(4,)], relu)
    w_host = b_host.create_workload_factory().create_workload("Activation", [(4,)], relu)
    np.testing.assert_array_equal(w_local.execute([x])[0], w_host.execute([x])[0])
    calls = 5000
    times = interleaved({"ping": per_call(b_host.host.ping, calls),
                         "in process": per_call(lambda: w_local.execute([x]), calls),
                         "host": per_call(lambda: w_host.execute([x]), calls)}, repeats)
    for name, label in (("ping", "HostProcess.ping"), ("in process", "execute, in process"),
                        ("host", "execute, through a host")):
        print(f"  {label:28s} {times[name] / calls * 1e6:7.2f} us")
    added = (times["host"] - times["in process"]) / calls * 1e6
    print(f"  the host adds {added:.2f} us per tiny execute "
          f"({times['host'] / calls * 1e6:.2f} us in all; goal <= 20 us)")


def convolution(local, hosted, repeats):
    print("convolution 1x56x56x64, 3x3, 64 outputs, padding 1")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 56, 56, 64)).astype(F)
    w = rng.standard_normal((64, 3, 3, 64)).astype(F)
    descriptor = {"padding": 1}
    workloads = {}
    for name, runtime in (("in process", local), ("host", hosted)):
        factory = runtime.create_backend("CpuRef").create_workload_factory()
        workloads[name] = factory.create_workload("Convolution2d", [x.shape, w.shape], descriptor)
    # The host's inputs and output: copied through its I/O segment, or shared arrays
    # (loader.shared_array) it reads and writes in place.
    workloads["host, shared arrays"] = workloads["host"]
    shared = [loader.shared_array(x.shape), loader.shared_array(w.shape)]
    shared[0][...], shared[1][...] = x, w
    args = {name: [x, w] for name in workloads}
    args["host, shared arrays"] = shared
    out = {name: np.empty((1, 56, 56, 64), F) for name in workloads}
    out["host, shared arrays"] = loader.shared_array((1, 56, 56, 64))
    for name, workload in workloads.items():
        workload.execute(args[name], [out[name]])
    for name in ("host", "host, shared arrays"):
        np.testing.assert_allclose(out[name], out["in process"], rtol=1e-5, atol=1e-5)
    times = interleaved({name: per_call(lambda w_=workload, a=args[name], o=out[name]:
                                        w_.execute(a, [o]), 10)
                         for name, workload in workloads.items()}, repeats, settle=0.05)
    for name in workloads:
        print(f"  {name:28s} {times[name] / 10 * 1e3:7.3f} ms")
    for name in ("host", "host, shared arrays"):
        print(f"  ratio {name} / in process: {times[name] / times['in process']:.3f}"
              + (" (goal <= 1.1)" if name != "host" else ""))


def whole_network(local, hosted, net, inputs, repeats, label):
    print(f"whole network: {label}, {len(net.layers)} layers")
    loaded = {"in process": local.load_network(net), "host": hosted.load_network(net)}
    results = {name: ln.execute(inputs) for name, ln in loaded.items()}
    for key in results["host"]:
        np.testing.assert_allclose(results["host"][key], results["in process"][key], rtol=1e-4,
                                   atol=1e-5)
    steps = [(s.backend, s.kind) for s in loaded["host"].plan]
    print(f"  plan: {len(steps)} step(s) {sorted(set(steps))}; host requests per execute: "
          f"{1 + sum(1 for a, b in zip(steps, steps[1:]) if a[0] != b[0])}")
    times = interleaved({name: per_call(lambda ln=ln: ln.execute(inputs), 3)
                         for name, ln in loaded.items()}, repeats, settle=0.05)
    for name in loaded:
        print(f"  {name:28s} {times[name] / 3 * 1e3:7.2f} ms")
    print(f"  ratio host / in process: {times['host'] / times['in process']:.3f}")
    for ln in loaded.values():
        ln.unload()


def kit():
    print("conformance kit, whole run on the reference backend")
    for mode in ("in-process", "process"):
        start = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "conformance", "run", "--backend",
                                 reference_backend.LIBRARY_PATH, "--backend-host", mode, "-q"],
                                capture_output=True, text=True)
        elapsed = time.monotonic() - start
        verdict = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "?"
        print(f"  --backend-host {mode:10s} {elapsed:7.1f} s  exit {result.returncode}: "
              f"{verdict}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--onnx", metavar="MODEL.onnx", help="a model for loader.onnx instead "
                        "of the MobileNetV2-like network")
    parser.add_argument("--kit", action="store_true", help="also time the conformance kit")
    args = parser.parse_args()
    directory = os.path.dirname(reference_backend.LIBRARY_PATH)
    local, hosted = runtimes(directory)
    with local, hosted:
        round_trip(local, hosted, args.repeats)
        convolution(local, hosted, args.repeats)
        if args.onnx:
            import loader.onnx
            net = loader.onnx.load_model(args.onnx)
            name = net.inputs[0] if isinstance(net.inputs, list) else list(net.inputs)[0]
            shape = net.tensor(name).shape
            inputs = {name: np.random.default_rng(2).standard_normal(shape).astype(F)}
            whole_network(local, hosted, net, inputs, args.repeats, os.path.basename(args.onnx))
        else:
            x = np.random.default_rng(2).standard_normal((1, 224, 224, 3)).astype(F)
            whole_network(local, hosted, mobilenet_v2(), {"x": x}, args.repeats,
                          "MobileNetV2-like (loader.Network)")
    if args.kit:
        kit()


if __name__ == "__main__":
    main()
