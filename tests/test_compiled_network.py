"""Rule 12.8: a loaded network's compiled form, exported and loaded again without re-optimizing
(in this process and in a fresh one), and every way a file can be refused."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loader
from conformance.network_reference import evaluate_network
from helpers import install_mock, install_reference

F = np.float32
RNG = np.random.default_rng(5)


def cnn():
    """conv+relu (fused), depthwise+bias+residual add+relu6 (fused), pool, fc+bias+tanh
    (fused)."""
    net = loader.Network()
    x = net.add_input("x", (1, 8, 8, 4))
    w1 = net.add_constant("w1", RNG.standard_normal((4, 3, 3, 4)).astype(F))
    wd = net.add_constant("wd", RNG.standard_normal((1, 3, 3, 4)).astype(F))
    bd = net.add_constant("bd", RNG.standard_normal(4).astype(F))
    wf = net.add_constant("wf", RNG.standard_normal((6, 64)).astype(F))
    bf = net.add_constant("bf", RNG.standard_normal(6).astype(F))
    y = net.add_layer("Convolution2d", [x, w1], {"padding": 1}, name="conv")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    z = net.add_layer("DepthwiseConvolution2d", [y, wd, bd], {"padding": 1}, name="dw")
    z = net.add_layer("Addition", [z, y], {}, name="add")
    z = net.add_layer("Activation", [z], {"function": "bounded_relu", "a": 6.0}, name="relu6")
    z = net.add_layer("Pooling2d", [z], {"pool": "average", "kernel": 2, "stride": 2}, name="pool")
    z = net.add_layer("Reshape", [z], {"shape": [1, 64]}, name="flatten")
    z = net.add_layer("FullyConnected", [z, wf, bf], {}, name="fc")
    z = net.add_layer("Activation", [z], {"function": "tanh"}, name="tanh")
    net.add_output(z, "y")
    return net


@pytest.fixture
def runtime(backend_dir):
    install_reference(backend_dir)
    install_mock("partial", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as rt:
        yield rt


@pytest.fixture
def exported(runtime, tmp_path):
    net = cnn()
    x = RNG.standard_normal((1, 8, 8, 4)).astype(F)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        assert [s.kind for s in loaded.plan] == ["compiled"]
        expected = loaded.execute({"x": x})["y"]
        loaded.export(tmp_path / "net.compiled")
    return net, x, expected, tmp_path / "net.compiled"


def test_a_compiled_network_loads_again_with_identical_results(runtime, exported, monkeypatch):
    net, x, expected, path = exported
    assert np.allclose(expected, evaluate_network(net, {"x": x})["y"], rtol=1e-4, atol=1e-4)
    # No optimizer is called: offering a sub-graph would fail the load.
    monkeypatch.setattr(loader._core, "optimize_subgraph",
                        lambda *a: pytest.fail("the optimizer was called"))
    with runtime.load_compiled_network(path) as again:
        assert [(s.kind, s.layers) for s in again.plan] == [
            ("compiled", ("conv", "relu", "dw", "add", "relu6", "pool", "flatten", "fc", "tanh"))]
        assert np.array_equal(again.execute({"x": x})["y"], expected)


def test_a_compiled_network_loads_in_a_fresh_process(exported, backend_dir):
    net, x, expected, path = exported
    np.save(path.parent / "x.npy", x)
    script = textwrap.dedent(f"""
        import numpy as np, loader
        with loader.Runtime(dynamic_backends_path={str(backend_dir)!r}) as rt:
            loaded = rt.load_compiled_network({str(path)!r})
            y = loaded.execute({{"x": np.load({str(path.parent / 'x.npy')!r})}})["y"]
            np.save({str(path.parent / 'y.npy')!r}, y)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, cwd="/")
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.load(path.parent / "y.npy"), expected)


def test_a_backend_that_cannot_serialize_cannot_export(runtime, tmp_path):
    net = loader.Network()
    x = net.add_input("x", (1, 4, 4, 2))
    w = net.add_constant("w", RNG.standard_normal((2, 3, 3, 2)).astype(F))
    y = net.add_layer("Convolution2d", [x, w], {"padding": 1}, name="conv")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    net.add_output(y, "y")
    with runtime.load_network(net, backends=["MockPartial"]) as loaded:
        with pytest.raises(loader.CompiledNetworkError, match="'MockPartial' cannot serialize"):
            loaded.export(tmp_path / "x.compiled")
    assert not os.path.exists(tmp_path / "x.compiled")


def test_a_missing_backend_is_refused(exported, backend_dir, tmp_path):
    *_, path = exported
    other = tmp_path / "other"
    other.mkdir()
    install_mock("partial", other)
    with loader.Runtime(dynamic_backends_path=str(other)) as rt:
        with pytest.raises(loader.CompiledNetworkError, match="'CpuRef', not registered"):
            rt.load_compiled_network(path)


def rewrite(path, edit):
    """Apply ``edit`` to the header JSON and re-seal the file's checksums (a deliberate
    change, not corruption)."""
    import hashlib
    import json
    import struct
    content = path.read_bytes()[:-32]
    (length,) = struct.unpack_from("<Q", content, 8)
    header = json.loads(content[16:16 + length])
    rest = content[16 + length:]
    rest = edit(header, rest) or rest
    encoded = json.dumps(header).encode()
    body = content[:8] + struct.pack("<Q", len(encoded)) + encoded + rest
    path.write_bytes(body + hashlib.sha256(body).digest())


def test_a_version_mismatch_is_refused(runtime, exported):
    *_, path = exported
    rewrite(path, lambda h, rest: [s.update(api_version="1.1") for s in h["steps"]
                                    if s["kind"] == "compiled"] and None)
    with pytest.raises(loader.CompiledNetworkError, match="built against Backend API 1.1"):
        runtime.load_compiled_network(path)


def test_bytes_the_backend_refuses_are_a_clear_error(runtime, exported):
    *_, path = exported

    def garble(header, rest):
        import hashlib
        step = next(s for s in header["steps"] if s["kind"] == "compiled")
        section = header["sections"][step["section"]]
        start = sum(s["size"] for s in header["sections"][:step["section"]])
        blob = bytearray(rest[start:start + section["size"]])
        blob[56:64] = b"\xff" * 8            # the layer type, past the format header and the
        #                                      zeroed BackendCompiledSubgraph
        section["sha256"] = hashlib.sha256(bytes(blob)).hexdigest()
        return rest[:start] + bytes(blob) + rest[start + section["size"]:]
    rewrite(path, garble)
    with pytest.raises(loader.CompiledNetworkError, match="load_compiled_subgraph: compiled "
                                                          "sub-graph bytes"):
        runtime.load_compiled_network(path)


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:len(b) // 2], "checksum mismatch"),
    (lambda b: b[:20], "checksum mismatch|not a compiled network"),
    (lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:], "checksum mismatch"),
    (lambda b: b"", "not a compiled network"),
    (lambda b: b"ELF" + b[3:], "not a compiled network"),
])
def test_a_truncated_or_corrupt_file_is_refused(runtime, exported, damage, message):
    *_, path = exported
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(loader.CompiledNetworkError, match=message):
        runtime.load_compiled_network(path)


def test_a_header_length_past_the_end_is_refused(runtime, exported):
    import hashlib
    import struct
    *_, path = exported
    body = bytearray(path.read_bytes()[:-32])
    body[8:16] = struct.pack("<Q", 1 << 62)
    path.write_bytes(bytes(body) + hashlib.sha256(bytes(body)).digest())
    with pytest.raises(loader.CompiledNetworkError, match="does not fit the file"):
        runtime.load_compiled_network(path)


def test_a_missing_file_is_a_clear_error(runtime, tmp_path):
    with pytest.raises(loader.CompiledNetworkError, match="cannot be read"):
        runtime.load_compiled_network(tmp_path / "absent.compiled")


def test_every_single_byte_change_to_a_compiled_subgraph_is_loaded_or_refused(runtime):
    """The bytes a backend is given are untrusted: change each byte of the program (its header,
    slots, steps and the fused kernels inside) in turn; the reference backend either refuses the
    bytes or loads a program without a crash."""
    net = cnn()
    x = RNG.standard_normal((1, 8, 8, 4)).astype(F)
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        blob = loaded.plan[0].compiled.serialize()             # the whole network
    backend = runtime.create_backend("CpuRef")
    refused = 0
    try:
        for offset in range(len(blob)):
            damaged = bytearray(blob)
            damaged[offset] ^= 0x5A
            try:
                compiled = loader._core.load_compiled_subgraph(backend, bytes(damaged))
            except loader.BackendError:
                refused += 1
                continue
            compiled.close()
        for size in (0, 1, 15, 16, len(blob) - 1, len(blob) + 1):
            with pytest.raises(loader.BackendError):
                loader._core.load_compiled_subgraph(backend, (blob + b"\0")[:size])
    finally:
        backend.close()
    assert refused > 50


def test_a_backend_that_cannot_load_compiled_bytes_is_refused(runtime, exported):
    *_, path = exported
    rewrite(path, lambda h, rest: [s.update(backend="MockPartial") for s in h["steps"]] and None)
    with pytest.raises(loader.CompiledNetworkError,
                       match="'MockPartial' cannot load compiled sub-graphs"):
        runtime.load_compiled_network(path)


def test_a_plan_that_does_not_cover_the_network_is_refused(runtime, exported):
    *_, path = exported
    rewrite(path, lambda h, rest: h["steps"][0]["layers"].remove("pool"))    # pool in no step
    with pytest.raises(loader.CompiledNetworkError, match="does not cover every layer"):
        runtime.load_compiled_network(path)
