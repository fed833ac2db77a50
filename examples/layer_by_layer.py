"""A small runtime on top of the loader: load the backends on the default search path, give
each layer of a Conv2d -> ReLU -> Pooling -> FullyConnected -> Softmax network to the first
backend that supports it, run it on NumPy data and check the result against NumPy.

    python examples/layer_by_layer.py
"""
import sys

import numpy as np

import loader


def network(rng):
    """The layers, each as (layer, descriptor, weights): weights are the inputs after the first."""
    return [
        ("Convolution2d", {"stride": [1, 1], "padding": [1, 1, 1, 1]},
         [rng.standard_normal((8, 3, 3, 3), dtype=np.float32) * 0.2,
          rng.standard_normal(8, dtype=np.float32) * 0.1]),
        ("Activation", {"function": "relu"}, []),
        ("Pooling2d", {"pool": "max", "kernel": [2, 2], "stride": [2, 2]}, []),
        ("Reshape", {"shape": [2, -1]}, []),
        ("FullyConnected", {"transpose_weights": True},
         [rng.standard_normal((10, 8 * 8 * 8), dtype=np.float32) * 0.05,
          np.zeros(10, dtype=np.float32)]),
        ("Softmax", {"beta": 1.0}, []),
    ]


def place(backends, layer, inputs, descriptor):
    """The first backend that supports the layer, with the reasons of those that did not."""
    refusals = []
    for backend in backends:
        try:
            support = backend.is_layer_supported(layer, inputs, descriptor)
        except loader.FeatureNotAvailableError as error:
            refusals.append(f"{backend.id}: {error}")
            continue
        if support:
            return backend, refusals
        refusals.append(f"{backend.id}: {support.reason}")
    raise loader.LayerNotSupportedError(f"no backend runs {layer}: " + "; ".join(refusals))


def numpy_network(x, layers):
    """The same network written directly in NumPy."""
    (_, _, (w, b)), _, _, _, (_, _, (fw, fb)), _ = layers
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
    y = np.einsum("nhwcij,oijc->nhwo", windows, w) + b
    y = np.maximum(y, 0)
    n, h, wd, c = y.shape
    y = y.reshape(n, h // 2, 2, wd // 2, 2, c).max(axis=(2, 4))
    y = y.reshape(n, -1) @ fw.T + fb
    y = np.exp(y - y.max(axis=-1, keepdims=True))
    return y / y.sum(axis=-1, keepdims=True)


def main():
    rng = np.random.default_rng(0)
    layers = network(rng)
    x = rng.standard_normal((2, 16, 16, 3), dtype=np.float32)
    with loader.Runtime() as runtime:
        print(f"backends: {', '.join(runtime.backend_ids) or 'none'}")
        backends = [runtime.create_backend(backend_id) for backend_id in runtime.backend_ids]
    activations = x
    for layer, descriptor, weights in layers:
        inputs = [activations] + weights
        backend, refusals = place(backends, layer, inputs, descriptor)
        for refusal in refusals:
            print(f"  {layer}: skipped {refusal}")
        [activations] = backend.execute(layer, inputs, descriptor)
        print(f"{layer:<16} on {backend.id:<8} -> {list(activations.shape)}")
    expected = numpy_network(x, layers)
    error = float(np.max(np.abs(activations - expected)))
    print(f"max difference from NumPy: {error:.2e}")
    return 0 if error < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
