"""Network files as untrusted input: the serialized form is strict, and every malformed file is a
NetworkError naming the file, never a traceback from a parser."""
import json
import zipfile

import numpy as np
import pytest

import loader
from test_networks import conv_network


def saved(tmp_path, name="net.json"):
    net = conv_network()
    net.save(tmp_path / name)
    return tmp_path / name


def rewrite(path, mutate):
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d["layers"][0].update(descripter=d["layers"][0].pop("descriptor")),
     "layer 'conv1': unknown key 'descripter'"),
    (lambda d: d["layers"][0].pop("descriptor"), "layer 'conv1' lacks 'descriptor'"),
    (lambda d: d["layers"][0].update(descriptor=None), "layer 'conv1': 'descriptor' must be a dict"),
    (lambda d: d["inputs"][0].update(dtype="float32"), "input 'x': unknown key 'dtype'"),
    (lambda d: d["constants"][0].update(layout="NHWC"), "constant 'w1': unknown key 'layout'"),
    (lambda d: d["outputs"][0].update(sorce="leaky"), "output 'y': unknown key 'sorce'"),
    (lambda d: d.update(version=2), "unknown key 'version' in the network"),
])
def test_an_unknown_or_missing_key_at_any_level_is_an_error_naming_it(mutate, words):
    d = conv_network().to_dict()
    mutate(d)
    with pytest.raises(loader.NetworkError, match=words.replace("(", r"\(")):
        loader.Network.from_dict(d)


def test_a_misspelt_descriptor_in_a_file_is_refused_not_ignored(tmp_path):
    path = saved(tmp_path)
    rewrite(path, lambda d: d["layers"][0].update(descripter=d["layers"][0].pop("descriptor")))
    with pytest.raises(loader.NetworkError) as raised:
        loader.Network.load(path)
    assert str(path) in str(raised.value) and "'descripter'" in str(raised.value)


def corrupt_npz_truncated(path):
    npz = path.with_suffix(".npz")
    npz.write_bytes(npz.read_bytes()[:100])


def corrupt_npz_object_array(path):
    np.savez(path.with_suffix(".npz"), w1=np.array([object()] * 108, dtype=object),
             w2=np.zeros(180, np.float32), b2=np.zeros(5, np.float32))


def corrupt_npz_float64(path):
    with np.load(path.with_suffix(".npz")) as npz:
        arrays = {k: npz[k].astype(np.float64) for k in npz.files}
    np.savez(path.with_suffix(".npz"), **arrays)


def corrupt_npz_bad_header(path):
    npz = path.with_suffix(".npz")
    with zipfile.ZipFile(npz, "w") as archive:
        archive.writestr("w1.npy", b"\x93NUMPY\x01\x00\x10\x00{'descr': 'zz'   }\n")


@pytest.mark.parametrize("name, corrupt, words", [
    ("net.json", lambda p: p.write_bytes(p.read_bytes()[:200]), "not valid JSON"),
    ("net.yaml", lambda p: p.write_text("layers: [unclosed\n  - x: {"), "not valid YAML"),
    ("net.json", lambda p: p.write_text("[" * 200000 + "]" * 200000), "nested"),
    ("net.yaml", lambda p: p.write_text("a: " + "[" * 5000 + "]" * 5000), "nested"),
    ("net.json", lambda p: p.write_bytes(b"\xff\xfe garbage"), "not valid JSON"),
    ("net.yaml", lambda p: p.write_text("inputs: !!binary aGVsbG8=\n"), "holds a bytes"),
    ("net.yaml", lambda p: p.write_text("? [1, 2]\n: x\n"), "not valid YAML"),
    ("net.json", lambda p: p.write_text('{"inputs": [], "constants": [], "layers": [], '
                                        '"outputs": [], "1": 2}'), "unknown key '1'"),
    ("net.yaml", lambda p: p.write_text("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p_}, *{p_}, *{p_}, *{p_}, *{p_}, *{p_}, *{p_}, *{p_}, *{p_}, *{p_}]\n"
        for p_, c in zip("abcdefgh", "bcdefghi"))), "more than 10 million values"),
    ("net.json", corrupt_npz_truncated, "net.npz: cannot read the constants"),
    ("net.json", corrupt_npz_object_array, "net.npz: cannot read the array 'w1'"),
    ("net.json", corrupt_npz_float64, "float64; constants are float32"),
    ("net.json", corrupt_npz_bad_header, "net.npz: cannot read the array 'w1'"),
    ("net.json", lambda p: rewrite(p, lambda d: d["inputs"][0].update(shape=[2**40, 2**40])),
     "more than 2^40"),
    ("net.json", lambda p: rewrite(p, lambda d: d["constants"][0].update(data=[1e39] * 108)),
     "beyond float32's range"),
    ("net.json", lambda p: rewrite(p, lambda d: d["constants"][0].update(data=[True] * 108)),
     "holds bool values"),
])
def test_a_corrupt_network_file_is_a_network_error_naming_the_file(tmp_path, name, corrupt, words):
    path = saved(tmp_path, name)
    corrupt(path)
    with pytest.raises(loader.NetworkError) as raised:
        loader.Network.load(path)
    assert words in str(raised.value)
    assert str(tmp_path) in str(raised.value)


def test_save_names_the_path_it_was_given(tmp_path):
    with pytest.raises(loader.NetworkError) as raised:
        conv_network().save(tmp_path / "missing" / "net.json")
    message = str(raised.value)
    assert message.startswith(str(tmp_path / "missing" / "net.json") + ":")
    with pytest.raises(loader.NetworkError, match="ends in .json"):
        conv_network().save(tmp_path / "net.txt")
    assert not (tmp_path / "net.npz").exists()      # nothing written for a refused name


def test_a_long_chain_loads_from_its_file(tmp_path):
    net = loader.Network()
    t = net.add_input("x", (1, 2))
    for _ in range(20000):
        t = net.add_layer("Activation", [t], {"function": "relu"})
    net.add_output(t, "y")
    d = net.to_dict()
    d["layers"].reverse()                   # the form may list layers in any order
    again = loader.Network.from_dict(d)
    assert [layer.name for layer in again.layers] == [layer.name for layer in net.layers]
