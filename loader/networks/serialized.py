"""The serialized form of a network (CONTRACT-networks section 11): ``to_dict``'s plain data,
``from_dict``, and the files ``save`` writes and ``load`` reads (``.json`` or ``.yaml``, the
constants in a ``.npz`` beside it).
"""
import json
import os
from typing import Dict, Optional

import numpy as np

from loader.errors import NetworkError
from loader.networks.network import _shape

SECTIONS = ("inputs", "constants", "layers", "outputs")


def to_dict(net) -> dict:
    """JSON-safe plain data; ``from_dict(to_dict(net))`` gives an equal network."""
    return {
        "inputs": [{"name": n, "shape": list(s)} for n, s in net.inputs.items()],
        "constants": [{"name": n, "shape": list(a.shape), "data": a.ravel().tolist()}
                      for n, a in net.constants.items()],
        "layers": [{"name": layer.name, "type": layer.type, "inputs": list(layer.inputs),
                    "descriptor": layer.descriptor} for layer in net.layers],
        "outputs": [{"name": n, "source": s} for n, s in net.outputs.items()],
    }


def from_dict(net, data, constants: Optional[Dict[str, np.ndarray]] = None):
    """Fill the empty network ``net`` from ``data``; ``constants`` supplies each constant whose
    ``data`` is a key into it (the form ``save`` writes)."""
    if not isinstance(data, dict):
        raise NetworkError(f"a network is a dict, not {type(data).__name__}")
    missing = [k for k in SECTIONS if k not in data]
    if missing:
        raise NetworkError(f"the network dict lacks {', '.join(map(repr, missing))}")
    for section in SECTIONS:
        if not isinstance(data[section], list) or not all(isinstance(e, dict)
                                                          for e in data[section]):
            raise NetworkError(f"{section!r} must be a list of dicts")

    def field(entry, key, section):
        if key not in entry:
            raise NetworkError(f"an entry of {section!r} lacks {key!r}: {entry!r}")
        return entry[key]

    for entry in data["inputs"]:
        net.add_input(field(entry, "name", "inputs"), field(entry, "shape", "inputs"))
    for entry in data["constants"]:
        name = field(entry, "name", "constants")
        shape = _shape(field(entry, "shape", "constants"), f"constant {name!r}")
        values = field(entry, "data", "constants")
        if isinstance(values, str):
            if constants is None or values not in constants:
                raise NetworkError(f"constant {name!r}: no data under key {values!r}")
            values = constants[values]
        try:
            array = np.asarray(values, dtype=np.float32)
            array = array.reshape(shape)
        except (TypeError, ValueError) as error:
            raise NetworkError(f"constant {name!r}: data does not fit shape "
                               f"{list(shape)}: {error}") from None
        net.add_constant(name, array)
    entries = data["layers"]
    for entry in entries:
        for key in ("name", "type", "inputs"):
            field(entry, key, "layers")
        if not isinstance(entry["inputs"], list):
            raise NetworkError(f"layer {entry['name']!r}: 'inputs' must be a list of names")
    known = set(net.inputs) | set(net.constants)
    for entry in _in_dependency_order(entries, known):
        net.add_layer(entry["type"], entry["inputs"], entry.get("descriptor") or {},
                      name=entry["name"])
    for entry in data["outputs"]:
        net.add_output(field(entry, "source", "outputs"), field(entry, "name", "outputs"))
    return net


def save(net, path) -> None:
    """Write ``net`` to ``path`` (``.json``, ``.yaml`` or ``.yml``), its constants to a ``.npz``
    beside it (same stem)."""
    path = os.fspath(path)
    stem, ext = os.path.splitext(path)
    data = to_dict(net)
    for entry in data["constants"]:
        entry["data"] = entry["name"]
    np.savez(stem + ".npz", **net.constants)
    with open(path, "w") as f:
        if ext in (".yaml", ".yml"):
            import yaml
            yaml.safe_dump(data, f, sort_keys=False)
        elif ext == ".json":
            json.dump(data, f, indent=1)
        else:
            raise NetworkError(f"{path}: a network file ends in .json, .yaml or .yml")


def load(net, path):
    """Fill the empty network ``net`` from the file ``save`` wrote (or any file holding
    ``to_dict``'s form)."""
    path = os.fspath(path)
    stem, ext = os.path.splitext(path)
    try:
        with open(path) as f:
            if ext in (".yaml", ".yml"):
                import yaml
                data = yaml.safe_load(f)
            elif ext == ".json":
                data = json.load(f)
            else:
                raise NetworkError(f"{path}: a network file ends in .json, .yaml or .yml")
    except (OSError, ValueError) as error:
        if isinstance(error, NetworkError):
            raise
        raise NetworkError(f"{path}: cannot read the network: {error}") from None
    constants = None
    if os.path.exists(stem + ".npz"):
        with np.load(stem + ".npz") as npz:
            constants = {key: npz[key] for key in npz.files}
    return from_dict(net, data, constants)


def _in_dependency_order(entries, known):
    """The layer entries ordered so each comes after the layers it reads (insertion order kept
    where it already is one); a cycle or an unknown name raises NetworkError."""
    names = {}
    for entry in entries:
        if not isinstance(entry["name"], str):
            raise NetworkError(f"layer name must be a string, not {entry['name']!r}")
        if entry["name"] in names or entry["name"] in known:
            raise NetworkError(f"duplicate name {entry['name']!r}")
        names[entry["name"]] = entry
    for entry in entries:
        for source in entry["inputs"]:
            if not isinstance(source, str) or (source not in known and source not in names):
                raise NetworkError(f"layer {entry['name']!r}: unknown tensor {source!r}")
    ordered, state = [], {}                 # state: 1 visiting, 2 done

    def visit(entry, path):
        name = entry["name"]
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = path[path.index(name):] + [name]
            raise NetworkError(f"the layers form a cycle: {' -> '.join(cycle)}")
        state[name] = 1
        for source in entry["inputs"]:
            if source in names:
                visit(names[source], path + [name])
        state[name] = 2
        ordered.append(entry)

    for entry in entries:
        visit(entry, [])
    return ordered
