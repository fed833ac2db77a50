"""A MobileNet-style network through the runtime against what one would use instead, and the
runtime's own time per layer.

    python benchmarks/bench_network.py [--blocks 4] [--size 112] [--channels 32] [--repeats 5]
                                       [--layers 30]

The network (NHWC float32): input 1 x SIZE x SIZE x CHANNELS, 3x3 convolution + ReLU, then
BLOCKS blocks of depthwise 3x3 + ReLU and pointwise 1x1 + ReLU (the second block of each pair
strided 2), average pooling over what is left, FullyConnected to 1000 classes, Softmax. Run:

  (a) load_network on CpuRef: the optimizer compiles the whole network into one program (one
      call), each convolution fused with its ReLU, intermediates in one planned arena
  (b) the same layers without fusion: every convolution's output is also a network output, so
      nothing can fuse; still one program, each layer a step of its own
  (c) one Workload per layer driven from a Python loop through backend.execute
  (d) ONNX Runtime (CPU) on the same network exported as ONNX (needs the optional extra
      ``bench``: pip install '.[bench]'; skipped with a message without it)
  (e) NumPy (float32, im2col-free: einsum over shifted views)

and print each one's time and its throughput relative to (a). Then the cost per layer: a chain
of LAYERS cheap Activation layers on a 1x16 tensor (one program on CpuRef) against a chain of
one, and the runtime's own time, everything outside the backend call (CLOCK_MONOTONIC spans
the executor records).
"""
import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, per_call  # noqa: E402

import loader  # noqa: E402

F = np.float32


def mobilenet(size, channels, blocks, classes=1000, expose=False):
    """The network, and a description of its layers for the other implementations."""
    rng = np.random.default_rng(0)
    net = loader.Network()
    spec = []
    t = net.add_input("x", (1, size, size, channels))

    def constant(name, shape, scale):
        return net.add_constant(name, (rng.standard_normal(shape) * scale).astype(F))

    def conv(kind, t, w_shape, stride, pad, name):
        w = constant(f"{name}_w", w_shape, 1.0 / np.sqrt(np.prod(w_shape[1:])))
        b = constant(f"{name}_b", (w_shape[0] if kind == "Convolution2d" else w_shape[3],), 0.1)
        y = net.add_layer(kind, [t, w, b], {"padding": pad, "stride": stride}, name=name)
        if expose:
            net.add_output(y, f"{name}_out")
        spec.append((kind, name, stride, pad))
        y = net.add_layer("Activation", [y], {"function": "relu"}, name=f"{name}_relu")
        spec.append(("Relu", f"{name}_relu"))
        return y

    t = conv("Convolution2d", t, (channels, 3, 3, channels), 1, 1, "conv0")
    c = channels
    for k in range(blocks):
        stride = 2 if k % 2 == 1 else 1
        t = conv("DepthwiseConvolution2d", t, (1, 3, 3, c), stride, 1, f"dw{k}")
        out = c * 2 if k % 2 == 1 else c
        t = conv("Convolution2d", t, (out, 1, 1, c), 1, 0, f"pw{k}")
        c = out
    h = net.tensor(t.name).shape[1]
    t = net.add_layer("Pooling2d", [t], {"pool": "average", "kernel": h, "stride": 1}, name="pool")
    spec.append(("Pool", "pool", h))
    t = net.add_layer("Reshape", [t], {"shape": [1, c]}, name="flatten")
    spec.append(("Flatten", "flatten"))
    w = constant("fc_w", (classes, c), 1.0 / np.sqrt(c))
    b = constant("fc_b", (classes,), 0.1)
    t = net.add_layer("FullyConnected", [t, w, b], {}, name="fc")
    spec.append(("FC", "fc"))
    t = net.add_layer("Softmax", [t], {"beta": 1.0}, name="softmax")
    spec.append(("Softmax", "softmax"))
    net.add_output(t, "y")
    return net, spec


# -- (e) NumPy -----------------------------------------------------------------------------------

def numpy_forward(net, spec):
    consts = net.constants

    def run(x):
        y = x
        for entry in spec:
            kind, name = entry[0], entry[1]
            if kind in ("Convolution2d", "DepthwiseConvolution2d"):
                stride, pad = entry[2], entry[3]
                w, b = consts[f"{name}_w"], consts[f"{name}_b"]
                kh, kw = w.shape[1], w.shape[2]
                p = np.pad(y, ((0, 0), (pad, pad), (pad, pad), (0, 0))) if pad else y
                oh = (p.shape[1] - kh) // stride + 1
                ow = (p.shape[2] - kw) // stride + 1
                if kind == "Convolution2d" and kh == 1:
                    out = p[:, ::stride, ::stride, :] @ w[:, 0, 0, :].T
                else:
                    out = np.zeros((1, oh, ow, w.shape[0] if kind == "Convolution2d"
                                    else w.shape[3]), F)
                    for i in range(kh):
                        for j in range(kw):
                            patch = p[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :]
                            if kind == "Convolution2d":
                                out += patch @ w[:, i, j, :].T
                            else:
                                out += patch * w[0, i, j, :]
                y = out + b
            elif kind == "Relu":
                np.maximum(y, 0, out=y)
            elif kind == "Pool":
                y = y.mean(axis=(1, 2), keepdims=True, dtype=F)
            elif kind == "Flatten":
                y = y.reshape(1, -1)
            elif kind == "FC":
                y = y @ consts["fc_w"].T + consts["fc_b"]
            else:
                e = np.exp(y - y.max(axis=1, keepdims=True))
                y = e / e.sum(axis=1, keepdims=True)
        return y
    return run


# -- (d) ONNX Runtime ----------------------------------------------------------------------------

def onnx_session(net, spec, threads):
    """An ONNX Runtime CPU session on the network in NCHW (the layout ONNX convolutions take),
    or (None, why) when onnx or onnxruntime is missing."""
    try:
        import onnx
        import onnxruntime
        from onnx import helper, numpy_helper, TensorProto
    except ImportError as error:
        return None, f"{error.name} is not installed (pip install '.[bench]')"
    consts = net.constants
    shape = net.tensor("x").shape
    classes = consts["fc_w"].shape[0]
    nodes, inits = [], []
    current = "x_nchw"
    nodes.append(helper.make_node("Transpose", ["x"], [current], perm=[0, 3, 1, 2]))
    for entry in spec:
        kind, name = entry[0], entry[1]
        out = f"{name}_o"
        if kind in ("Convolution2d", "DepthwiseConvolution2d"):
            stride, pad = entry[2], entry[3]
            w = consts[f"{name}_w"]
            if kind == "Convolution2d":
                w_oihw, group = w.transpose(0, 3, 1, 2), 1
            else:
                w_oihw, group = w.transpose(3, 0, 1, 2), w.shape[3]
            inits += [numpy_helper.from_array(np.ascontiguousarray(w_oihw), f"{name}_w"),
                      numpy_helper.from_array(consts[f"{name}_b"], f"{name}_b")]
            nodes.append(helper.make_node("Conv", [current, f"{name}_w", f"{name}_b"], [out],
                                          strides=[stride, stride], pads=[pad] * 4, group=group,
                                          kernel_shape=list(w_oihw.shape[2:])))
        elif kind == "Relu":
            nodes.append(helper.make_node("Relu", [current], [out]))
        elif kind == "Pool":
            nodes.append(helper.make_node("GlobalAveragePool", [current], [out]))
        elif kind == "Flatten":
            nodes.append(helper.make_node("Flatten", [current], [out]))
        elif kind == "FC":
            inits += [numpy_helper.from_array(consts["fc_w"], "fc_w"),
                      numpy_helper.from_array(consts["fc_b"], "fc_b")]
            nodes.append(helper.make_node("Gemm", [current, "fc_w", "fc_b"], [out], transB=1))
        else:
            nodes.append(helper.make_node("Softmax", [current], [out], axis=1))
        current = out
    graph = helper.make_graph(
        nodes, "mobilenet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, [1, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return (lambda x: session.run(None, {"x": x})[0]), f"onnxruntime {onnxruntime.__version__}"


# -- the runtime's own time per layer ------------------------------------------------------------

def overhead_per_layer(runtime, layers, repeats):
    net = loader.Network()
    t = net.add_input("x", (1, 16))
    for i in range(layers):
        d = {"function": "relu"} if i % 2 == 0 else {"function": "leaky_relu", "a": 0.5}
        t = net.add_layer("Activation", [t], d, name=f"act{i}")
    net.add_output(t, "y")
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(F)
    calls = 2000
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [s.kind for s in loaded.plan] == ["compiled"]
        seconds = interleaved({"execute": per_call(lambda: loaded.execute({"x": x}), calls)},
                              repeats=repeats)["execute"]
        spans = []
        for _ in range(calls):
            loaded.execute({"x": x}, profile=True)
            spans.append(sum(e.end_ns - e.start_ns for e in loaded.last_profile[1:]
                             if e.source == "runtime"))
    execute_ns = seconds / calls * 1e9
    backend_ns = statistics.median(spans)
    return execute_ns, backend_ns


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--size", type=int, default=112)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", type=int, default=30)
    args = parser.parse_args()
    threads = int(os.environ.get("REFERENCE_BACKEND_THREADS", "0")) or min(os.cpu_count() or 1, 8)

    net, spec = mobilenet(args.size, args.channels, args.blocks)
    plain_net, _ = mobilenet(args.size, args.channels, args.blocks, expose=True)
    x = np.random.default_rng(1).standard_normal(net.tensor("x").shape).astype(F)
    runtime = loader.Runtime()
    fused = runtime.load_network(net, backends=["CpuRef"])
    plain = runtime.load_network(plain_net, backends=["CpuRef"])
    assert [s.kind for s in plain.plan] == ["compiled"]
    kinds = [s.kind for s in fused.plan]

    backend = runtime.create_backend("CpuRef")
    factory = backend.create_workload_factory()
    workloads = [(factory.create_workload_prepared(layer.prepared), layer)
                 for layer in net.layers]
    consts = net.constants
    shapes = {layer.name: net.tensor(layer.name).shape for layer in net.layers}
    scratch = {name: np.empty(shape, F) for name, shape in shapes.items()}

    def python_loop():
        values = {"x": x}
        for workload, layer in workloads:
            out = scratch[layer.name]
            workload.execute([values[n] if n in values else consts[n] for n in layer.inputs],
                             [out])
            values[layer.name] = out
        return values["softmax"].copy()

    reference = numpy_forward(net, spec)
    expected = fused.execute({"x": x})["y"]
    for name, result in (("unfused", plain.execute({"x": x})["y"]), ("python loop", python_loop()),
                         ("numpy", reference(x))):
        assert np.allclose(result, expected, rtol=1e-3, atol=1e-5), name
    candidates = {
        "(a) load_network, fused": lambda: fused.execute({"x": x}),
        "(b) load_network, unfused": lambda: plain.execute({"x": x}),
        "(c) python loop of workloads": python_loop,
        "(e) numpy": lambda: reference(x),
    }
    onnx_run, onnx_note = onnx_session(net, spec, threads)
    if onnx_run is not None:
        assert np.allclose(onnx_run(x), expected, rtol=1e-3, atol=1e-5)
        candidates["(d) onnxruntime cpu"] = lambda: onnx_run(x)
    times = interleaved(candidates, repeats=args.repeats, inner=3, settle=0.05)
    base = times["(a) load_network, fused"]
    print(f"MobileNet-style: 1x{args.size}x{args.size}x{args.channels}, {args.blocks} dw/pw "
          f"blocks, {len(net.layers)} layers -> {len(fused.plan)} steps "
          f"({kinds.count('compiled')} compiled); {threads} threads")
    for name in sorted(candidates):
        print(f"  {name:32} {times[name] * 1e3:8.2f} ms   throughput vs (a) "
              f"{base / times[name]:6.2f}x")
    if onnx_run is None:
        print(f"  (d) onnxruntime cpu              skipped: {onnx_note}")
    else:
        print(f"  (a) / (d) throughput: {times['(d) onnxruntime cpu'] / base:.2f}x of {onnx_note}")
    print(f"  fused vs unfused: {times['(b) load_network, unfused'] / base:.2f}x faster")

    execute_ns, backend_ns = overhead_per_layer(runtime, args.layers, args.repeats)
    one_execute, one_backend = overhead_per_layer(runtime, 1, args.repeats)
    own, fixed = execute_ns - backend_ns, one_execute - one_backend
    print(f"{args.layers} cheap layers: execute {execute_ns / 1e3:.2f} us, in the backend call "
          f"{backend_ns / 1e3:.2f} us; 1 layer: execute {one_execute / 1e3:.2f} us, in the "
          f"backend call {one_backend / 1e3:.2f} us")
    print(f"  per extra layer: {(execute_ns - one_execute) / (args.layers - 1):.0f} ns "
          f"(in the backend call, profiled: {(backend_ns - one_backend) / (args.layers - 1):.0f} ns); "
          f"the runtime's own time per execute {own / 1e3:.2f} us ({fixed / 1e3:.2f} us for "
          f"1 layer)")
    fused.unload()
    plain.unload()
    backend.close()
    runtime.close()


if __name__ == "__main__":
    main()
