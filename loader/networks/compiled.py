"""A loaded network's compiled form on disk (rule 12.8): ``LoadedNetwork.export`` and
``Runtime.load_compiled_network``.

Layout: the magic ``DBKCNET1``, the header length (8 bytes, little-endian), a JSON header, then
the sections it lists one after another, then the SHA-256 of everything before it. The header
holds the network (constants by key), the plan (each step's backend, kind, layers and
boundary), and one section per constant (float32 bytes) and per compiled sub-graph (the
backend's bytes, with its backend id and Backend API version); each section carries its size
and SHA-256. Every length is checked against the file before it is used.
"""
import hashlib
import json
import os
import struct
from typing import Dict, List

import numpy as np

from loader import _core
from loader.errors import BackendError, CompiledNetworkError
from loader.networks import planning

MAGIC = b"DBKCNET1"
FORMAT = 1
MAX_FILE_BYTES = 1 << 32
MAX_HEADER_BYTES = 64 << 20


def _sha256(data) -> str:
    return hashlib.sha256(data).hexdigest()


def write(path, network, plan, compiled_blobs: List[tuple], versions: Dict[str, str],
          runtime_version: str) -> None:
    """``compiled_blobs``: per plan step, None (a workload) or (backend id, bytes)."""
    data = network.to_dict()
    sections: List[bytes] = []
    constants = []
    for entry in data["constants"]:
        array = np.ascontiguousarray(network.constants[entry["name"]], dtype=np.float32)
        blob = array.tobytes()
        constants.append({"name": entry["name"], "section": len(sections)})
        entry["data"] = entry["name"]
        sections.append(blob)
    steps = []
    for step, blob in zip(plan, compiled_blobs):
        record = {"backend": step.backend, "kind": step.kind, "layers": list(step.layers),
                  "inputs": list(step.inputs), "outputs": list(step.outputs)}
        if blob is not None:
            record["section"] = len(sections)
            record["api_version"] = versions[step.backend]
            sections.append(blob[1])
        steps.append(record)
    header = {
        "format": FORMAT, "runtime_api_version": runtime_version, "network": data,
        "constants": constants, "steps": steps,
        "sections": [{"size": len(s), "sha256": _sha256(s)} for s in sections],
    }
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    body = b"".join([MAGIC, struct.pack("<Q", len(encoded)), encoded] + sections)
    where = os.fspath(path)
    tmp = where + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(body)
            f.write(hashlib.sha256(body).digest())
        os.replace(tmp, where)
    except OSError as error:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise CompiledNetworkError(f"{where}: cannot write the compiled network: "
                                   f"{error.strerror or error}") from None


def read(path) -> dict:
    """The checked header with ``sections`` replaced by their bytes and ``network`` by a
    loader.Network; CompiledNetworkError for anything malformed."""
    from loader.networks.network import Network
    where = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise CompiledNetworkError(f"{where}: {size} bytes, more than a compiled network "
                                           f"may hold")
            content = f.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise CompiledNetworkError(f"{where}: cannot be read: {error.strerror or error}") from None
    if len(content) < len(MAGIC) + 8 + 32 or content[:len(MAGIC)] != MAGIC:
        raise CompiledNetworkError(f"{where}: not a compiled network (no {MAGIC!r} header)")
    body, digest = content[:-32], content[-32:]
    if hashlib.sha256(body).digest() != digest:
        raise CompiledNetworkError(f"{where}: checksum mismatch: the file is truncated or "
                                   f"corrupt")
    (length,) = struct.unpack_from("<Q", body, len(MAGIC))
    start = len(MAGIC) + 8
    if length > MAX_HEADER_BYTES or start + length > len(body):
        raise CompiledNetworkError(f"{where}: the header length {length} does not fit the file")
    try:
        header = json.loads(body[start:start + length].decode("utf-8"))
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ValueError(f"format {header.get('format') if isinstance(header, dict) else '?'}"
                             f", this runtime reads {FORMAT}")
        sections, offset = [], start + length
        for entry in header["sections"]:
            size = entry["size"]
            if not isinstance(size, int) or size < 0 or offset + size > len(body):
                raise ValueError(f"section {len(sections)} of {size} bytes overruns the file")
            blob = body[offset:offset + size]
            if _sha256(blob) != entry["sha256"]:
                raise ValueError(f"section {len(sections)}: checksum mismatch")
            sections.append(blob)
            offset += size
        if offset != len(body):
            raise ValueError(f"{len(body) - offset} bytes after the last section")

        def section(index):
            if not isinstance(index, int) or not 0 <= index < len(sections):
                raise ValueError(f"section {index!r} does not exist")
            return sections[index]
        data = header["network"]
        shapes = {c["name"]: c["shape"] for c in data["constants"]}
        constants = {}
        for entry in header["constants"]:
            shape = tuple(shapes[entry["name"]])
            blob = section(entry["section"])
            if len(blob) != 4 * int(np.prod(shape, dtype=np.int64)):
                raise ValueError(f"constant {entry['name']!r} has {len(blob)} bytes for shape "
                                 f"{list(shape)}")
            constants[entry["name"]] = np.frombuffer(blob, dtype=np.float32).reshape(shape)
        network = Network.from_dict(data, constants)
        steps = []
        for step in header["steps"]:
            record = {k: step[k] for k in ("backend", "kind", "layers", "inputs", "outputs")}
            if step["kind"] not in ("compiled", "workload"):
                raise ValueError(f"step kind {step['kind']!r}")
            if step["kind"] == "compiled":
                record["blob"] = section(step["section"])
                record["api_version"] = str(step["api_version"])
            steps.append(record)
    except CompiledNetworkError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        raise CompiledNetworkError(f"{where}: malformed compiled network: {error}") from None
    return {"network": network, "steps": steps}


def plan_from_file(steps):
    """A ``make_plan`` for ``LoadedNetwork._create``: the plan a compiled network file lists,
    its compiled sub-graphs created again from their bytes by their backends (no optimizer is
    called), checked to cover every layer once with the boundaries the rules give."""
    def make_plan(network, backends):
        graph = planning.Graph(network)
        index = {layer.name: i for i, layer in enumerate(graph.layers)}
        units: List[planning.Unit] = []
        try:
            for step in steps:
                units.append(_unit(step, backends[step["backend"]], index))
            covered = sorted(i for u in units for i in u.layers)
            if covered != list(range(len(graph.layers))):
                raise CompiledNetworkError("the plan does not cover every layer exactly once")
            for unit in units:
                if unit.kind == "compiled" and (set(unit.inputs), set(unit.outputs)) != \
                        planning.boundary(graph, unit.layers):
                    raise CompiledNetworkError(
                        f"step {'+'.join(graph.layers[i].name for i in unit.layers)}: its "
                        f"boundary is not the tensors that cross it")
            return planning.finish_plan(graph, units)
        except KeyError as error:
            planning.close_units(units)
            raise CompiledNetworkError(f"the plan names {error} which the network does not "
                                       f"have") from None
        except BaseException:
            planning.close_units(units)
            raise
    return make_plan


def _unit(step, backend, index) -> "planning.Unit":
    layers = [index[name] for name in step["layers"]]
    if step["kind"] == "workload":
        if len(layers) != 1:
            raise CompiledNetworkError(f"a workload step with {len(layers)} layers")
        return planning.Unit(layers, step["backend"], "workload")
    where = f"step {'+'.join(step['layers'])}"
    if step["api_version"] != str(backend.version):
        raise CompiledNetworkError(
            f"{where} was compiled by {step['backend']!r} built against Backend API "
            f"{step['api_version']}; the one registered here is built against {backend.version}")
    if not backend.features.get("SerializedSubgraphs"):
        raise CompiledNetworkError(f"backend {step['backend']!r} cannot load compiled sub-graphs")
    try:
        compiled = _core.load_compiled_subgraph(backend, step["blob"])
    except BackendError as error:
        raise CompiledNetworkError(f"{where}: {error}") from None
    return planning.Unit(sorted(layers), step["backend"], "compiled", compiled,
                         tuple(step["inputs"]), tuple(step["outputs"]))
