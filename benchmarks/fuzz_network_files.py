"""Network files as hostile input: mutants of a saved network (its .json or .yaml and the .npz
beside it) loaded with ``loader.Network.load`` and, when that succeeds, planned and run on the
reference backend. Counts, per kind of mutation, the mutants refused with a NetworkError (or
another BackendError), the ones that loaded, and every other exception (a traceback: the goal
is 0), and saves each traceback's mutant.

    python benchmarks/fuzz_network_files.py [--mutants 3000] [--seed 1] [--save DIR]

Mutant ``i`` of seed ``s`` is always the same files. Kinds: truncations and byte flips of the
network file and of the .npz; structural edits of the parsed form (keys renamed, dropped or
added at every level, values replaced by other types, huge or negative shapes and descriptor
values, constants of other dtypes, deep nesting); whole documents nested deeply.
"""
import argparse
import collections
import copy
import io
import json
import os
import random
import sys
import tempfile
import traceback

import numpy as np

import loader

KINDS = ("truncate-file", "flip-file", "truncate-npz", "flip-npz", "edit", "nest", "npz-dtype")
WEIRD = [None, True, -1, 0, 2**31, 2**63, 2**70, -2**40, 1e308, float("nan"), "", "x" * 300,
         [], [[]], {}, {"a": 1}, [2**40, 2**40], [1] * 9, [-1, -1], "relu", [0.5],
         # plausible values, so that some mutants load and run with a changed meaning
         1, 2, 3, 0.5, "max", "average", "sigmoid", [1, 1], [2, 2], [1, -1], [1, 6, 6, 3]]


def base_network():
    """A small network of every kind of entry: inputs, constants, layers with descriptors."""
    rng = np.random.default_rng(0)
    net = loader.Network()
    x = net.add_input("x", (1, 6, 6, 3))
    w = net.add_constant("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b = net.add_constant("b", rng.standard_normal(4).astype(np.float32))
    y = net.add_layer("Convolution2d", [x, w, b], {"padding": 1}, name="conv")
    y = net.add_layer("Activation", [y], {"function": "relu"}, name="relu")
    y = net.add_layer("Pooling2d", [y], {"pool": "max", "kernel": 2, "stride": 2}, name="pool")
    y = net.add_layer("Reshape", [y], {"shape": [1, -1]}, name="flat")
    fw = net.add_constant("fw", rng.standard_normal((5, 36)).astype(np.float32))
    y = net.add_layer("FullyConnected", [y, fw], {}, name="fc")
    y = net.add_layer("Softmax", [y], {"beta": 1.0}, name="soft")
    net.add_output(y, "y")
    return net


def _paths(value, prefix=()):
    """Every (path, value) inside nested dicts and lists."""
    yield prefix, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _edit(data, rng):
    data = copy.deepcopy(data)
    paths = [p for p, _ in _paths(data) if p]
    path = rng.choice(paths)
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    action = rng.choice(["replace", "drop", "rename", "add"])
    if action == "replace":
        parent[key] = rng.choice(WEIRD)
    elif action == "drop":
        del parent[key]
    elif action == "rename" and isinstance(key, str):
        parent[key + rng.choice(["s", "_", "x"])] = parent.pop(key)
    elif isinstance(parent, dict):
        parent[rng.choice(["extra", "descripter", "dtype", key])] = rng.choice(WEIRD)
    else:
        parent.append(rng.choice(WEIRD))
    return data


def mutant(index, seed, directory, net_bytes, npz_bytes, data, ext):
    """Write mutant ``index`` into ``directory``; returns (kind, path of the network file)."""
    rng = random.Random(seed * 1_000_003 + index)
    kind = KINDS[index % len(KINDS)]
    text, npz = net_bytes, npz_bytes
    if kind == "truncate-file":
        text = text[:rng.randrange(len(text))]
    elif kind == "flip-file":
        text = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            text[rng.randrange(len(text))] = rng.randrange(256)
        text = bytes(text)
    elif kind == "truncate-npz":
        npz = npz[:rng.randrange(len(npz))]
    elif kind == "flip-npz":
        npz = bytearray(npz)
        for _ in range(rng.randint(1, 8)):
            npz[rng.randrange(len(npz))] = rng.randrange(256)
        npz = bytes(npz)
    elif kind == "edit":
        text = _dump(_edit(data, rng), ext)
    elif kind == "nest":
        depth = rng.choice([40, 1000, 100_000])
        text = (b"[" * depth + b"]" * depth) if ext == ".json" else (
            b"a: " + b"[" * depth + b"]" * depth)
    elif kind == "npz-dtype":
        buffer = io.BytesIO()
        dtype = rng.choice([np.float64, np.int32, np.float16, np.bool_, np.complex64])
        np.savez(buffer, w=np.ones((4, 3, 3, 3), dtype), b=np.ones(4, dtype),
                 fw=np.ones((5, 36), dtype))
        npz = buffer.getvalue()
    path = os.path.join(directory, f"net{ext}")
    with open(path, "wb") as f:
        f.write(text)
    with open(os.path.join(directory, "net.npz"), "wb") as f:
        f.write(npz)
    return kind, path


def _dump(data, ext) -> bytes:
    if ext == ".json":
        return json.dumps(data).encode()
    import yaml
    return yaml.safe_dump(data).encode()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--save", metavar="DIR", help="save each traceback's mutant here")
    args = parser.parse_args(argv)

    counts = collections.defaultdict(collections.Counter)
    tracebacks = []
    x = {"x": np.random.default_rng(1).standard_normal((1, 6, 6, 3)).astype(np.float32)}
    with tempfile.TemporaryDirectory() as work, loader.Runtime() as runtime:
        originals = {}
        for ext in (".json", ".yaml"):
            base_network().save(os.path.join(work, f"base{ext}"))
            with open(os.path.join(work, f"base{ext}"), "rb") as f:
                originals[ext] = f.read()
        with open(os.path.join(work, "base.npz"), "rb") as f:
            npz_bytes = f.read()
        data = base_network().to_dict()
        for entry in data["constants"]:
            entry["data"] = entry["name"]
        for index in range(args.mutants):
            ext = (".json", ".yaml")[index // len(KINDS) % 2]
            directory = os.path.join(work, "m")
            os.makedirs(directory, exist_ok=True)
            kind, path = mutant(index, args.seed, directory, originals[ext], npz_bytes, data, ext)
            try:
                net = loader.Network.load(path)
                with runtime.load_network(net, backends=["CpuRef"]) as loaded:
                    if set(net.inputs) == {"x"} and net.inputs["x"] == (1, 6, 6, 3):
                        loaded.execute(x)
                counts[kind]["loaded"] += 1
            except loader.NetworkError:
                counts[kind]["refused"] += 1
            except loader.BackendError:
                counts[kind]["refused (backend)"] += 1
            except Exception:           # what this script is looking for
                counts[kind]["traceback"] += 1
                tracebacks.append((index, kind, traceback.format_exc(limit=3)))
                if args.save:
                    keep = os.path.join(args.save, str(index))
                    os.makedirs(keep, exist_ok=True)
                    for name in os.listdir(directory):
                        os.replace(os.path.join(directory, name), os.path.join(keep, name))
    print(f"{args.mutants} mutants, seed {args.seed}")
    print(f"{'kind':<14} {'refused':>8} {'loaded':>7} {'traceback':>10}")
    for kind in KINDS:
        c = counts[kind]
        print(f"{kind:<14} {c['refused'] + c['refused (backend)']:>8} {c['loaded']:>7} "
              f"{c['traceback']:>10}")
    total = sum(c["traceback"] for c in counts.values())
    print(f"tracebacks: {total}")
    for index, kind, text in tracebacks[:5]:
        print(f"\n-- mutant {index} ({kind}):\n{text}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
