"""The serialized form of a network (docs/networks.md): ``to_dict``'s plain data,
``from_dict``, and the files ``save`` writes and ``load`` reads (``.json`` or ``.yaml``, the
constants in a ``.npz`` beside it).

The form is strict: a key that is not part of it (a misspelt ``descripter``, say) is an error
naming the key and where it is, never silently ignored, because an ignored key changes what the
network computes. Files are untrusted input: every way they can be malformed (truncated,
corrupt, absurdly nested, holding other data types) ends in a NetworkError naming the file.
"""
import json
import os

import numpy as np

from loader.errors import NetworkError
from loader.networks.network import _shape

SECTIONS = ("inputs", "constants", "layers", "outputs")
#: The keys of each kind of entry, all required.
KEYS = {
    "inputs": ("name", "shape"),
    "constants": ("name", "shape", "data"),
    "layers": ("name", "type", "inputs", "descriptor"),
    "outputs": ("name", "source"),
}
SUFFIXES = (".json", ".yaml", ".yml")
MAX_FILE_BYTES = 1 << 30            # a network file (constants live in the .npz)
MAX_DEPTH = 32                      # the form nests 6 deep; descriptors a little more
FLOAT32_MAX = float(np.finfo(np.float32).max)


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


def _where(section: str, entry: dict, position: int) -> str:
    name = entry.get("name")
    kind = {"inputs": "input", "constants": "constant", "layers": "layer",
            "outputs": "output"}[section]
    return f"{kind} {name!r}" if isinstance(name, str) and name else \
        f"entry {position} of {section!r}"


def _check_entries(data) -> None:
    """Every section a list of dicts with exactly its keys; NetworkError naming the first
    unknown or missing key and the entry it is in."""
    if not isinstance(data, dict):
        raise NetworkError(f"a network is a dict, not {type(data).__name__}")
    unknown = [k for k in data if k not in SECTIONS]
    if unknown:
        raise NetworkError(f"unknown key {unknown[0]!r} in the network (its keys are "
                           f"{', '.join(SECTIONS)})")
    missing = [k for k in SECTIONS if k not in data]
    if missing:
        raise NetworkError(f"the network dict lacks {', '.join(map(repr, missing))}")
    for section in SECTIONS:
        if not isinstance(data[section], list) or not all(isinstance(e, dict)
                                                          for e in data[section]):
            raise NetworkError(f"{section!r} must be a list of dicts")
        keys = KEYS[section]
        for position, entry in enumerate(data[section]):
            where = _where(section, entry, position)
            extra = [k for k in entry if k not in keys]
            if extra:
                raise NetworkError(f"{where}: unknown key {extra[0]!r} (an entry of "
                                   f"{section!r} has {', '.join(keys)})")
            lacking = [k for k in keys if k not in entry]
            if lacking:
                hint = " (give {} for the defaults)" if lacking[0] == "descriptor" else ""
                raise NetworkError(f"{where} lacks {lacking[0]!r}{hint}: {entry!r}"[:500])


def _constant_data(name, shape, values, constants) -> np.ndarray:
    """The float32 array of one constant: inline numbers, or a key into ``constants``."""
    if isinstance(values, str):
        if constants is None or values not in constants:
            raise NetworkError(f"constant {name!r}: no data under key {values!r}")
        array = constants[values]
        if not isinstance(array, np.ndarray) or array.dtype != np.float32:
            kind = getattr(array, "dtype", type(array).__name__)
            raise NetworkError(f"constant {name!r}: the data under key {values!r} is {kind}; "
                               f"constants are float32 (convert with .astype(numpy.float32))")
    else:
        if not isinstance(values, list):
            raise NetworkError(f"constant {name!r}: data must be a list of numbers or the key "
                               f"of an array in the .npz, not {type(values).__name__}")
        try:
            array = np.asarray(values)
        except (TypeError, ValueError) as error:
            raise NetworkError(f"constant {name!r}: data is not a list of numbers: "
                               f"{error}") from None
        if array.size and array.dtype.kind not in "iuf":
            raise NetworkError(f"constant {name!r}: data holds {array.dtype.name} values; "
                               f"constants are numbers")
        if array.dtype.kind == "f" and np.any(np.abs(array[np.isfinite(array)]) > FLOAT32_MAX):
            raise NetworkError(f"constant {name!r}: a value lies beyond float32's range")
        array = array.astype(np.float32)
    if array.size != int(np.prod(shape, dtype=object)):
        raise NetworkError(f"constant {name!r}: {array.size} values do not fit shape "
                           f"{list(shape)}")
    return array.reshape(shape)


def from_dict(net, data, constants=None):
    """Fill the empty network ``net`` from ``data``; ``constants`` supplies each constant whose
    ``data`` is a key into it (the form ``save`` writes)."""
    _check_entries(data)
    for entry in data["inputs"]:
        net.add_input(entry["name"], entry["shape"])
    for entry in data["constants"]:
        name = entry["name"]
        shape = _shape(entry["shape"], f"constant {name!r}")
        net.add_constant(name, _constant_data(name, shape, entry["data"], constants))
    entries = data["layers"]
    for entry in entries:
        if not isinstance(entry["inputs"], list):
            raise NetworkError(f"{_where('layers', entry, 0)}: 'inputs' must be a list of names")
        if not isinstance(entry["descriptor"], dict):
            raise NetworkError(f"{_where('layers', entry, 0)}: 'descriptor' must be a dict "
                               f"({{}} for the defaults), not {entry['descriptor']!r}"[:300])
    known = set(net.inputs) | set(net.constants)
    for entry in _in_dependency_order(entries, known):
        net.add_layer(entry["type"], entry["inputs"], entry["descriptor"], name=entry["name"])
    for entry in data["outputs"]:
        net.add_output(entry["source"], entry["name"])
    return net


def save(net, path) -> None:
    """Write ``net`` to ``path`` (``.json``, ``.yaml`` or ``.yml``), its constants to a ``.npz``
    beside it (same stem). Errors name ``path``."""
    path = os.fspath(path)
    stem, ext = os.path.splitext(path)
    if ext not in SUFFIXES:
        raise NetworkError(f"{path}: a network file ends in .json, .yaml or .yml")
    data = to_dict(net)
    for entry in data["constants"]:
        entry["data"] = entry["name"]
    try:
        np.savez(stem + ".npz", **net.constants)
        with open(path, "w") as f:
            if ext == ".json":
                json.dump(data, f, indent=1)
            else:
                import yaml
                yaml.safe_dump(data, f, sort_keys=False)
    except OSError as error:
        raise NetworkError(f"{path}: cannot save the network: {error.strerror or error} "
                           f"(it and its constants, {os.path.basename(stem)}.npz)") from None


def load(net, path):
    """Fill the empty network ``net`` from the file ``save`` wrote (or any file holding
    ``to_dict``'s form). Every problem is a NetworkError naming the file."""
    path = os.fspath(path)
    stem, ext = os.path.splitext(path)
    if ext not in SUFFIXES:
        raise NetworkError(f"{path}: a network file ends in .json, .yaml or .yml")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise NetworkError(f"{path}: cannot read the network: {error.strerror or error}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise NetworkError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB; keep constants "
                           f"in the .npz")
    data = _parse(path, raw, ext)
    npz = stem + ".npz"
    constants = _NpzConstants(npz) if os.path.exists(npz) else None
    try:
        return from_dict(net, data, constants)
    except NetworkError as error:
        raise NetworkError(f"{path}: {error}") from None
    finally:
        if constants is not None:
            constants.close()


def _parse(path: str, raw: bytes, ext: str):
    """The plain data of a JSON or YAML file, checked to be JSON's kinds of value only and
    nested at most MAX_DEPTH deep."""
    kind = "JSON" if ext == ".json" else "YAML"
    try:
        text = raw.decode("utf-8")
        if ext == ".json":
            data = json.loads(text)
        else:
            import yaml
            data = yaml.safe_load(text)
    except RecursionError:
        raise NetworkError(f"{path}: not a network: nested too deeply") from None
    except Exception as error:   # the parsers' errors for a malformed document, whatever they are
        text = " ".join(str(error).split())[:300]
        raise NetworkError(f"{path}: not valid {kind}: {text}") from None
    _check_plain(path, data)
    return data


def _check_plain(path: str, data) -> None:
    """NetworkError unless ``data`` is made of dicts with string keys, lists, strings, numbers,
    booleans and None, at most MAX_DEPTH deep. Walked without recursion; a YAML alias counts
    each time it is used, so a document that expands exponentially is refused, not walked."""
    budget = 10_000_000
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        budget -= 1
        if depth > MAX_DEPTH:
            raise NetworkError(f"{path}: not a network: nested more than {MAX_DEPTH} deep")
        if budget < 0:
            raise NetworkError(f"{path}: not a network: more than 10 million values")
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise NetworkError(f"{path}: a key is {type(key).__name__} {key!r}; keys "
                                       f"are strings")
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif not (value is None or isinstance(value, (str, bool, int, float))):
            raise NetworkError(f"{path}: holds a {type(value).__name__} ({str(value)[:40]!r}); "
                               f"a network file holds only JSON's kinds of value")


class _NpzConstants:
    """The arrays of a ``.npz``, read one at a time as the network names them: a malformed file
    or member is a NetworkError naming the file, and members no constant names are never
    read."""

    def __init__(self, path: str):
        self.path = path
        try:
            self._npz = np.load(path, allow_pickle=False)
            self._files = set(self._npz.files)
        except Exception as error:   # numpy and zipfile raise many kinds for a corrupt archive
            raise NetworkError(f"{path}: cannot read the constants: {_brief(error)}") from None

    def __contains__(self, key) -> bool:
        return key in self._files

    def __getitem__(self, key) -> np.ndarray:
        try:
            return self._npz[key]
        except MemoryError:
            raise NetworkError(f"{self.path}: the array {key!r} is too large to load") from None
        except Exception as error:
            raise NetworkError(f"{self.path}: cannot read the array {key!r}: "
                               f"{_brief(error)}") from None

    def close(self) -> None:
        self._npz.close()


def _brief(error: BaseException) -> str:
    text = " ".join(str(error).split())[:300]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _in_dependency_order(entries, known):
    """The layer entries ordered so each comes after the layers it reads (insertion order kept
    where it already is one); a cycle or an unknown name raises NetworkError. Iterative: a
    chain of any length is fine."""
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
    ordered, state = [], {}                 # state: 1 on the current path, 2 done
    for root in entries:
        if state.get(root["name"]) == 2:
            continue
        path = [(root, iter(root["inputs"]))]
        state[root["name"]] = 1
        while path:
            entry, sources = path[-1]
            for source in sources:
                if source not in names or state.get(source) == 2:
                    continue
                if state.get(source) == 1:
                    cycle = [e["name"] for e, _ in path]
                    cycle = cycle[cycle.index(source):] + [source]
                    raise NetworkError(f"the layers form a cycle: {' <- '.join(cycle)}")
                state[source] = 1
                path.append((names[source], iter(names[source]["inputs"])))
                break
            else:
                path.pop()
                state[entry["name"]] = 2
                ordered.append(entry)
    return ordered
