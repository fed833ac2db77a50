"""The reference optimizer's fused epilogue against the same layers run one workload each.

    python benchmarks/bench_fusion.py [--repeats 20]

Networks on CpuRef: Convolution2d 1x56x56x64 -> 64 (3x3, pad 1) + residual Addition + relu, and
FullyConnected 512x1024 . 1024x1024 + relu. Fused: the optimizer replaces each chain with one
compiled kernel that adds the residual and applies relu to each output tile while it is in
cache. Unfused: the same network with the first layer's output also exposed as a network
output, so nothing can fuse and each layer runs as its own workload (that output costs one
extra array per call). Prints the best of REPEATS interleaved runs and the ratio.
"""
import argparse
import time

import numpy as np

import loader


def conv_chain(rng, expose):
    net = loader.Network()
    x = net.add_input("x", (1, 56, 56, 64))
    w = net.add_constant("w", rng.standard_normal((64, 3, 3, 64), dtype=np.float32) * 0.05)
    c = net.add_layer("Convolution2d", [x, w], {"padding": 1}, name="conv")
    y = net.add_layer("Addition", [c, x], name="add")
    net.add_output(net.add_layer("Activation", [y], {"function": "relu"}, name="relu"), "y")
    if expose:
        net.add_output(c, "conv")
    return net, {"x": rng.standard_normal((1, 56, 56, 64), dtype=np.float32)}


def fc_chain(rng, expose):
    net = loader.Network()
    x = net.add_input("x", (512, 1024))
    w = net.add_constant("w", rng.standard_normal((1024, 1024), dtype=np.float32) * 0.03)
    f = net.add_layer("FullyConnected", [x, w], name="fc")
    net.add_output(net.add_layer("Activation", [f], {"function": "relu"}, name="relu"), "y")
    if expose:
        net.add_output(f, "fc")
    return net, {"x": rng.standard_normal((512, 1024), dtype=np.float32)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with loader.Runtime() as runtime:
        for name, build in (("conv + add + relu", conv_chain), ("fc + relu", fc_chain)):
            fused_net, inputs = build(np.random.default_rng(0), False)
            plain_net, _ = build(np.random.default_rng(0), True)
            fused = runtime.load_network(fused_net, backends=["CpuRef"])
            plain = runtime.load_network(plain_net, backends=["CpuRef"])
            assert [s.kind for s in fused.plan] == ["compiled"]
            assert {s.kind for s in plain.plan} == {"workload"}
            assert np.allclose(fused.execute(inputs)["y"], plain.execute(inputs)["y"],
                               rtol=1e-4, atol=1e-4)
            best = {"fused": float("inf"), "unfused": float("inf")}
            for _ in range(args.repeats):
                for tag, loaded in (("fused", fused), ("unfused", plain)):
                    start = time.perf_counter()
                    loaded.execute(inputs)
                    best[tag] = min(best[tag], time.perf_counter() - start)
            print(f"{name:18} fused {best['fused'] * 1e3:7.3f} ms   unfused "
                  f"{best['unfused'] * 1e3:7.3f} ms   fused/unfused "
                  f"{best['fused'] / best['unfused']:.3f}")
            fused.unload()
            plain.unload()


if __name__ == "__main__":
    main()
