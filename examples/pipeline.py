"""A network split across two backends with fallback: a small partial backend that takes only
Convolution2d and some Activations (MockPartial, from mock_backends/) in front of the reference
backend (CpuRef). Prints the plan and checks the result against NumPy.

    python examples/pipeline.py
"""
import shutil
import sys
import tempfile

import numpy as np

import loader
import mock_backends
import reference_backend
from conformance.network_reference import evaluate_network


def build(rng):
    net = loader.Network()
    x = net.add_input("image", (1, 16, 16, 3))
    w1 = net.add_constant("w1", rng.standard_normal((8, 3, 3, 3), dtype=np.float32) * 0.3)
    w2 = net.add_constant("w2", rng.standard_normal((8, 3, 3, 8), dtype=np.float32) * 0.2)
    fc = net.add_constant("fc", rng.standard_normal((10, 8 * 8 * 8), dtype=np.float32) * 0.05)
    y = net.add_layer("Convolution2d", [x, w1], {"padding": 1}, name="conv1")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu1")
    y = net.add_layer("Pooling2d", [y], {"pool": "max", "kernel": 2, "stride": 2}, name="pool")
    y = net.add_layer("Activation", [y], {"function": "leaky_relu", "a": 0.1}, name="leaky")
    y = net.add_layer("Convolution2d", [y, w2], {"padding": 1}, name="conv2")
    y = net.add_layer("Activation", [y], {"function": "bounded_relu", "a": 6.0}, name="relu6")
    y = net.add_layer("Reshape", [y], {"shape": [1, -1]}, name="flatten")
    y = net.add_layer("FullyConnected", [y, fc], name="classifier")
    net.add_output(net.add_layer("Softmax", [y], name="softmax"), "scores")
    return net


def main():
    rng = np.random.default_rng(0)
    net = build(rng)
    directory = tempfile.mkdtemp()
    try:
        shutil.copy(reference_backend.LIBRARY_PATH, directory)
        shutil.copy(mock_backends.path("partial"), directory)
        with loader.Runtime(dynamic_backends_path=directory) as runtime:
            with runtime.load_network(net, backends=["MockPartial", "CpuRef"]) as loaded:
                for layer, backend in loaded.assignments.items():
                    why = "; ".join(f"{b}: {r}" for b, r in loaded.declined[layer].items())
                    print(f"{layer:<11} -> {backend:<12} {('(declined by ' + why + ')') if why else ''}")
                print()
                for step in loaded.plan:
                    print(f"{step.backend:<12} {step.kind:<9} {' + '.join(step.layers)}")
                image = rng.standard_normal((1, 16, 16, 3), dtype=np.float32)
                scores = loaded.execute({"image": image})["scores"]
    finally:
        shutil.rmtree(directory)
    expected = evaluate_network(net, {"image": image})["scores"]
    error = float(np.abs(scores - expected).max())
    print(f"\nmax |scores - NumPy| = {error:.2e}")
    return 0 if error < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
