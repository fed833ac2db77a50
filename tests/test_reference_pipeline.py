"""An inverted residual block's pointwise expansion, depthwise convolution and pointwise
projection (or two of them) run as one pipeline in a compiled program (reference_backend/
pipeline.c): the tensors between them are computed a band of rows at a time and never stored
whole. The same network with those tensors also outputs of the network (so that they must be
stored, and no pipeline is formed) gives the same bits on every thread count, after an export
and a load too, and both match the float64 reference.
The backend is built here with the pipeline's thresholds lowered: a band of a few rows and no
minimum size, so that small images cross many band boundaries (and images of a batch)."""
import numpy as np
import pytest

from helpers import build_reference, run_with_threads

LOWERED = ["-DRK_PIPELINE_BAND_BYTES=4096", "-DRK_PIPELINE_MIN_BYTES=1",
           "-DRK_STEP_GEMM_MIN_FLOP_PER_THREAD=1", "-DRK_STEP_DEPTHWISE_MIN_FLOP_PER_THREAD=1"]

CHILD = r"""
import sys
import numpy as np
import loader
from conformance.network_reference import evaluate_network

F = np.float32

def network(stored):
    rng = np.random.default_rng(5)
    def const(name, *shape):
        return net.add_constant(name, (rng.standard_normal(shape) * 0.4).astype(F))
    net = loader.Network()
    x = net.add_input("x", (2, 13, 11, 6))
    # the pipelines' inputs and outputs all in the arena (which must not place an output over
    # an input the pipeline still reads; the first convolution's output is larger than the
    # depthwise output, so that a first fit would put one over the other)
    x = net.add_layer("Convolution2d", [x, const("wi", 24, 3, 3, 6)], {"padding": 1}, name="first")
    e = net.add_layer("Convolution2d", [x, const("w0", 32, 1, 1, 24), const("b0", 32)], {}, name="expand")
    e = net.add_layer("Activation", [e], {"function": "bounded_relu", "a": 6.0}, name="relu6")
    d = net.add_layer("DepthwiseConvolution2d", [e, const("wd0", 1, 3, 3, 32), const("bd0", 32)],
                      {"padding": 1, "stride": 2}, name="dw3")
    d = net.add_layer("Activation", [d], {"function": "relu"}, name="relu")
    p = net.add_layer("Convolution2d", [d, const("w1", 24, 1, 1, 32)], {}, name="project")
    d2 = net.add_layer("DepthwiseConvolution2d", [p, const("wd1", 1, 5, 5, 24)],
                       {"padding": [2, 2, 1, 3], "stride": 1}, name="dw5")
    d2 = net.add_layer("Activation", [d2], {"function": "swish"}, name="swish")
    t = net.add_layer("Convolution2d", [d2, const("wl", 24, 1, 1, 24), const("bl", 24)], {}, name="project2")
    t = net.add_layer("Addition", [t, p], {}, name="residual")
    t = net.add_layer("Convolution2d", [t, const("wz", 8, 1, 1, 24)], {}, name="last")
    net.add_output(t, "y")
    if stored:          # every tensor between the steps an output: nothing runs as a pipeline
        for name, tensor in (("e", e), ("d", d), ("d2", d2)):
            net.add_output(tensor, name)
    return net

feed = {"x": np.random.default_rng(6).standard_normal((2, 13, 11, 6)).astype(F)}
out = {}
with loader.Runtime(dynamic_backends_path=sys.argv[1]) as runtime:
    for stored in (False, True):
        net = network(stored)
        with runtime.load_network(net, backends=["CpuRef"]) as loaded:
            y = loaded.execute(feed)["y"]
            loaded.execute(feed, profile=True)
            events = [e for e in loaded.last_profile if e.source == "backend"]
            loaded.export(sys.argv[2] + ".compiled")
        with runtime.load_compiled_network(sys.argv[2] + ".compiled") as again:
            assert np.array_equal(again.execute(feed)["y"], y)
        np.testing.assert_allclose(y, evaluate_network(net, feed)["y"], rtol=1e-4, atol=1e-4)
        out["stored" if stored else "pipelined"] = y
        print(" | ".join(e.name for e in events))
        print(" | ".join(",".join(e.layers) for e in events))
np.save(sys.argv[2], np.stack([out["pipelined"], out["stored"]]))
"""


@pytest.fixture(scope="module")
def lowered_backend(tmp_path_factory):
    """The reference backend with bands of a few rows, pipelines for any size, and every step
    split as far as its parts allow."""
    with open("/proc/cpuinfo") as f:
        if " avx512f" not in f.read():
            pytest.skip("the pipeline reads its bands with the AVX-512 depthwise kernels")
    return build_reference(tmp_path_factory.mktemp("pipeline"), LOWERED, optimize="-O1")


def run_child(backend, threads, out):
    lines = run_with_threads(CHILD, threads, backend, out)
    return np.load(str(out) + ".npy"), lines


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_a_pipeline_gives_the_bits_of_its_steps_apart(lowered_backend, tmp_path, threads):
    (pipelined, stored), lines = run_child(lowered_backend, threads, tmp_path / "y")
    assert np.array_equal(pipelined, stored), np.abs(pipelined - stored).max()
    names = {kind: line.split(" | ") for kind, line in zip(("pipelined", "stored"), lines[0::2])}
    layers = {kind: [set(e.split(",")) for e in line.split(" | ")]
              for kind, line in zip(("pipelined", "stored"), lines[1::2])}
    # one event for all steps of each pipeline, with the layers of all: an expansion, a
    # depthwise convolution and a projection; a depthwise convolution and a projection with
    # its residual
    suffix = f" ({threads} threads)" if threads > 1 else ""
    assert "fused Convolution2d + fused DepthwiseConvolution2d + Convolution2d" + suffix in names["pipelined"]
    assert {"expand", "relu6", "dw3", "relu", "project"} in layers["pipelined"]
    assert "fused DepthwiseConvolution2d + fused Convolution2d" + suffix in names["pipelined"]
    assert {"dw5", "swish", "project2", "residual"} in layers["pipelined"]
    # the tensors between the steps stored for the caller: every step runs apart
    assert not any(" + " in name for name in names["stored"]), names["stored"]
    assert {"expand", "relu6"} in layers["stored"] and {"dw3", "relu"} in layers["stored"]
