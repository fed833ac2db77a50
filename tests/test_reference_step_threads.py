"""The reference backend's per-step thread decisions and its pool's hand-off, on a network of
small layers (7 x 7 and 14 x 14 images of many channels, a residual, a grouped convolution, a
fully connected layer of one row): the same bits for every thread count from 1 to 6 (the
GEMM, depthwise, grouped and streamed kernels never change an output's summation order with
the split), the decisions named in the profile, and several threads executing one network and
two networks at once. The backend is built here with the step thresholds lowered to one, so
every step splits as far as its parts allow on this machine's few cores (and a GEMM of a 7 x 7
image splits its columns only, as one of a large filter does)."""
import numpy as np
import pytest

from helpers import build_reference, run_with_threads

LOWERED = ["-DRK_STEP_GEMM_MIN_FLOP_PER_THREAD=1", "-DRK_STEP_SMALL_MIN_WORK_PER_THREAD=1",
           "-DRK_STEP_DEPTHWISE_MIN_FLOP_PER_THREAD=1",
           "-DRK_STEP_STREAM_MIN_WEIGHTS_PER_THREAD=1", "-DRK_GEMM_MIN_FLOP_PER_THREAD=1",
           "-DRK_SMALL_MIN_WORK_PER_THREAD=1", "-DRK_FEW_ROWS_MIN_B=1"]

CHILD = r"""
import sys, threading
import numpy as np
import loader
from conformance.network_reference import evaluate_network

F = np.float32
rng = np.random.default_rng(11)
def const(net, name, *shape):
    return net.add_constant(name, (rng.standard_normal(shape) * 0.3).astype(F))

net = loader.Network()
x = net.add_input("x", (1, 28, 28, 8))
t = net.add_layer("Convolution2d", [x, const(net, "w0", 32, 3, 3, 8), const(net, "b0", 32)],
                  {"padding": 1, "stride": 2}, name="conv0")
t = net.add_layer("Activation", [t], {"function": "relu"}, name="relu0")
t = net.add_layer("Convolution2d", [t, const(net, "w1", 200, 1, 1, 32)], {}, name="expand")
t = net.add_layer("Activation", [t], {"function": "bounded_relu", "a": 6.0}, name="relu6a")
t = net.add_layer("DepthwiseConvolution2d", [t, const(net, "wd1", 1, 3, 3, 200), const(net, "bd1", 200)],
                  {"padding": 1}, name="dw14")
t = net.add_layer("Convolution2d", [t, const(net, "w2", 192, 1, 1, 200)], {}, name="project")
t = net.add_layer("DepthwiseConvolution2d", [t, const(net, "wd2", 1, 3, 3, 192)],
                  {"padding": 1, "stride": 2}, name="dw7")
t = net.add_layer("Activation", [t], {"function": "relu"}, name="relu1")
t = net.add_layer("DepthwiseConvolution2d", [t, const(net, "wd3", 1, 3, 3, 384)], {"padding": 1},
                  name="dw7x2")
r = net.add_layer("Convolution2d", [t, const(net, "w3", 64, 1, 1, 384)], {}, name="narrow")
t = net.add_layer("Convolution2d", [r, const(net, "w4", 64, 3, 3, 16)], {"padding": 1, "groups": 4},
                  name="grouped")
t = net.add_layer("Addition", [t, r], {}, name="residual")
t = net.add_layer("Activation", [t], {"function": "relu"}, name="relu2")
t = net.add_layer("Reshape", [t], {"shape": [1, 7 * 7 * 64]}, name="flatten")
t = net.add_layer("FullyConnected", [t, const(net, "wf", 100, 7 * 7 * 64), const(net, "bf", 100)],
                  {}, name="fc")
net.add_output(t, "y")
feed = {"x": rng.standard_normal((1, 28, 28, 8)).astype(F)}

with loader.Runtime(dynamic_backends_path=sys.argv[1]) as runtime:
    first = runtime.load_network(net, backends=["CpuRef"])
    second = runtime.load_network(net, backends=["CpuRef"])
    y = first.execute(feed)["y"]
    np.testing.assert_allclose(y, evaluate_network(net, feed)["y"], rtol=1e-3, atol=1e-3)
    first.execute(feed, profile=True)
    names = sorted({e.name for e in first.last_profile if e.source == "backend"})
    # several threads on one network (serialized) and on two (in parallel, one pool)
    results, errors = [], []
    def run(loaded):
        try:
            for _ in range(15):
                results.append(loaded.execute(feed)["y"])
        except Exception as error:
            errors.append(error)
    threads = [threading.Thread(target=run, args=(loaded,)) for loaded in (first, first, second, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == 60 and all(np.array_equal(r, y) for r in results)
    first.unload()
    second.unload()
np.save(sys.argv[2], y)
print("\n".join(names))
"""


@pytest.fixture(scope="module")
def lowered_backend(tmp_path_factory):
    """The reference backend with every thread threshold at one flop."""
    return build_reference(tmp_path_factory.mktemp("lowered"), LOWERED)


def run_child(backend, threads, out):
    lines = run_with_threads(CHILD, threads, backend, out)
    return np.load(out), lines


def test_a_network_gives_the_same_bits_on_every_thread_count(lowered_backend, tmp_path):
    one, names = run_child(lowered_backend, 1, tmp_path / "1.npy")
    assert not any("threads)" in name for name in names), names
    for threads in range(2, 7):
        y, names = run_child(lowered_backend, threads, tmp_path / f"{threads}.npy")
        assert np.array_equal(y, one), (threads, np.abs(y - one).max())
        # every step names the threads the compiled program gave it: as many as its parts allow
        assert f"fused Convolution2d ({threads} threads)" in names, names
        assert f"fused DepthwiseConvolution2d ({threads} threads)" in names, names
        assert f"FullyConnected ({threads} threads)" in names, names
        assert f"DepthwiseConvolution2d ({threads} threads)" in names, names
