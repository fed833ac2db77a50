"""Planning a network (contract rules 12.1-12.4): which backend takes each layer, the sub-graphs
offered to each backend, the one check of a backend's optimization views, the steps in
execution order, and where every intermediate tensor lives.

Everything here is plain Python over a network's layer graph; it never calls a backend. The
caller (``loader.loaded_network``) asks the backends and feeds their answers in.
"""
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from loader.errors import InvalidOptimizationError

# Kinds of a sub-graph tensor, as in backend_api.h (BACKEND_SUBGRAPH_TENSOR_*).
BOUNDARY_INPUT, CONSTANT, INTERNAL = 0, 1, 2

ARENA_ALIGNMENT = 64        # bytes; every planned buffer starts on a cache line


class Graph:
    """The layer graph of a network: layers by index (insertion order, which is also a valid
    execution order), who produces and who reads each tensor."""

    def __init__(self, network):
        self.network = network
        self.layers = network.layers
        self.index = {layer.name: i for i, layer in enumerate(self.layers)}
        self.producer: Dict[str, int] = dict(self.index)         # tensor -> layer index
        self.consumers: Dict[str, List[int]] = defaultdict(list)
        for i, layer in enumerate(self.layers):
            for source in dict.fromkeys(layer.inputs):
                self.consumers[source].append(i)
        self.constants = network.constants
        self.output_tensors = set(network.outputs.values())
        # Layer-level edges: producer layer -> consumer layer.
        self.successors: List[List[int]] = [[] for _ in self.layers]
        self.predecessors: List[List[int]] = [[] for _ in self.layers]
        for i, layer in enumerate(self.layers):
            for source in dict.fromkeys(layer.inputs):
                p = self.producer.get(source)
                if p is not None:
                    self.successors[p].append(i)
                    self.predecessors[i].append(p)


# -- rule 12.2: cycle-free maximal grouping ---------------------------------------------------

def group_layers(graph: Graph, backend_of: Dict[int, str], fixed: Sequence[Sequence[int]] = ()):
    """Group the layers of ``backend_of`` (layer index -> backend id) into connected sub-graphs
    of one backend each, as large as possible without a cycle between sub-graphs. ``fixed`` are
    groups of layers already planned (steps of earlier rounds): they never merge, but paths
    through them count. Returns lists of layer indices, ordered by their first layer."""
    unit = {}                                   # layer -> representative of its group
    members: Dict[int, List[int]] = {}
    for group in fixed:
        rep = min(group)
        for i in group:
            unit[i] = rep
        members[rep] = sorted(group)
    for i in backend_of:
        unit[i] = i
        members[i] = [i]

    def find(i):
        return unit[i]

    def reaches(start_units, target, skip_direct_from):
        """Whether ``target`` is reachable from ``start_units`` walking unit successors, without
        using a direct edge from ``skip_direct_from`` to ``target``."""
        seen, stack = set(), list(start_units)
        while stack:
            u = stack.pop()
            if u in seen:
                continue
            seen.add(u)
            for layer in members[u]:
                for s in graph.successors[layer]:
                    v = find(s) if s in unit else ("layer", s)
                    if v == u:
                        continue
                    if v == target:
                        if u == skip_direct_from:
                            continue
                        return True
                    if v not in seen:
                        stack.append(v)
        return False

    # Layers outside both the fixed groups and backend_of still carry paths.
    for i in range(len(graph.layers)):
        if i not in unit:
            unit[i] = ("layer", i)
            members[("layer", i)] = [i]

    changed = True
    while changed:
        changed = False
        for u_layer in sorted(backend_of):
            for v_layer in graph.successors[u_layer]:
                if v_layer not in backend_of or backend_of[v_layer] != backend_of[u_layer]:
                    continue
                a, b = find(u_layer), find(v_layer)
                if a == b:
                    continue
                # a -> b directly; merging is safe iff no other path leads from a to b.
                if reaches([a], b, skip_direct_from=a):
                    continue
                merged, gone = (a, b) if a < b else (b, a)
                for layer in members[gone]:
                    unit[layer] = merged
                members[merged] = sorted(members[merged] + members.pop(gone))
                changed = True
    groups = {find(i) for i in backend_of}
    return sorted((members[g] for g in groups), key=lambda g: g[0])


# -- the sub-graph offered to a backend -------------------------------------------------------

@dataclass
class SubgraphSpec:
    """A sub-graph as the ABI describes it: tensors (name, kind, shape), layers (id, index,
    input and output tensor indices), boundary inputs and outputs (tensor indices)."""

    backend: str
    layers: List[int]                        # layer indices, execution order
    tensors: List[Tuple[str, int, tuple]]    # (name, kind, shape)
    layer_inputs: List[List[int]]
    layer_outputs: List[List[int]]
    inputs: List[int]
    outputs: List[int]

    @property
    def layer_ids(self):
        return list(self.layers)            # the debug handle of a layer is its index


def describe_subgraph(graph: Graph, backend: str, layers: Sequence[int]) -> SubgraphSpec:
    inside = set(layers)
    tensors, position = [], {}

    def tensor(name, kind):
        if name not in position:
            position[name] = len(tensors)
            tensors.append((name, kind, graph.network.tensor(name).shape))
        return position[name]

    layer_inputs, layer_outputs, inputs = [], [], []
    for i in layers:
        layer = graph.layers[i]
        refs = []
        for source in layer.inputs:
            if source in graph.constants:
                refs.append(tensor(source, CONSTANT))
            elif graph.producer.get(source) in inside:
                refs.append(tensor(source, INTERNAL))
            else:
                new = source not in position
                refs.append(tensor(source, BOUNDARY_INPUT))
                if new:
                    inputs.append(position[source])
        layer_inputs.append(refs)
        layer_outputs.append([tensor(layer.name, INTERNAL)])
    outputs = [position[graph.layers[i].name] for i in layers
               if graph.layers[i].name in graph.output_tensors
               or any(c not in inside for c in graph.consumers.get(graph.layers[i].name, ()))]
    return SubgraphSpec(backend, list(layers), tensors, layer_inputs, layer_outputs, inputs, outputs)


# -- rule 12.3: the one check of a backend's answer --------------------------------------------

@dataclass
class Views:
    """What a backend recorded through BackendOptimizationViews, as the runtime received it."""

    substitutions: List[tuple] = field(default_factory=list)  # (ids, inputs, outputs, compiled)
    failed: List[Tuple[int, str]] = field(default_factory=list)
    untouched: List[int] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)          # unusable arguments to a call


def substitution_boundary(graph: Graph, spec: SubgraphSpec, layer_ids):
    """The tensors (sub-graph indices) that cross the boundary of ``layer_ids``: the
    non-constant tensors they read and do not produce, and the tensors they produce that any
    other layer reads or that are sub-graph outputs."""
    chosen = set(layer_ids)
    position = {name: k for k, (name, _, _) in enumerate(spec.tensors)}
    produced = {graph.layers[i].name for i in chosen}
    inputs = set()
    for i in chosen:
        for source in graph.layers[i].inputs:
            if source not in produced and source not in graph.constants:
                inputs.add(position[source])
    outputs = set()
    for name in produced:
        readers = graph.consumers.get(name, ())
        if name in graph.output_tensors or any(r not in chosen for r in readers):
            outputs.add(position[name])
    return inputs, outputs


def _leaves_and_returns(graph: Graph, chosen) -> bool:
    """Whether a path leaves the layer set ``chosen`` and comes back into it."""
    stack = [s for i in chosen for s in graph.successors[i] if s not in chosen]
    seen = set()
    while stack:
        layer = stack.pop()
        if layer in seen:
            continue
        seen.add(layer)
        for s in graph.successors[layer]:
            if s in chosen:
                return True
            stack.append(s)
    return False


def validate_views(graph: Graph, spec: SubgraphSpec, views: Views) -> None:
    """Check a backend's answer against the sub-graph it was offered (rule 12.3): every layer in
    exactly one view, no layer that was not offered, each substitution with a compiled
    replacement, exactly the boundary tensors, and no path that leaves it and comes back.
    Raises InvalidOptimizationError naming the backend and every violation."""
    problems = list(views.problems)
    offered = set(spec.layer_ids)
    names = {i: graph.layers[i].name for i in offered}
    claims = defaultdict(list)
    for k, (ids, _, _, _) in enumerate(views.substitutions):
        for layer_id in ids:
            claims[layer_id].append(f"substitution {k}")
    for layer_id, _ in views.failed:
        claims[layer_id].append("failed")
    for layer_id in views.untouched:
        claims[layer_id].append("untouched")

    unknown = sorted(i for i in claims if i not in offered)
    if unknown:
        problems.append(f"names layer id(s) {unknown} that were not offered (offered: "
                        f"{sorted(offered)})")
    twice = {names[i]: places for i, places in claims.items() if i in offered and len(places) > 1}
    if twice:
        problems.append("claims a layer more than once: " + ", ".join(
            f"{name!r} in {' and '.join(places)}" for name, places in sorted(twice.items())))
    missing = [names[i] for i in spec.layer_ids if i not in claims]
    if missing:
        problems.append(f"leaves layer(s) {missing} in no view (every offered layer must be "
                        f"substituted, failed or untouched)")

    n_tensors = len(spec.tensors)
    for k, (ids, inputs, outputs, compiled) in enumerate(views.substitutions):
        what = f"substitution {k} ({[names.get(i, i) for i in ids]})"
        if not ids:
            problems.append(f"{what} replaces no layer")
            continue
        if compiled is None:
            problems.append(f"{what} has no well-formed compiled sub-graph")
        if any(i not in offered for i in ids) or len(set(ids)) != len(ids):
            continue                          # already reported above
        bad = [t for t in list(inputs) + list(outputs) if not 0 <= t < n_tensors]
        if bad:
            problems.append(f"{what} names tensor index(es) {bad}; the sub-graph has "
                            f"{n_tensors} tensors")
            continue
        if len(set(inputs)) != len(inputs) or len(set(outputs)) != len(outputs):
            problems.append(f"{what} lists a boundary tensor twice")
            continue
        want_in, want_out = substitution_boundary(graph, spec, ids)
        tensor_name = lambda t: spec.tensors[t][0]  # noqa: E731
        if set(inputs) != want_in:
            problems.append(f"{what} has boundary inputs {sorted(map(tensor_name, inputs))}; the "
                            f"tensors crossing into it are {sorted(map(tensor_name, want_in))}")
        if set(outputs) != want_out:
            problems.append(f"{what} has boundary outputs {sorted(map(tensor_name, outputs))}; "
                            f"the tensors read outside it are "
                            f"{sorted(map(tensor_name, want_out))}")
        if _leaves_and_returns(graph, set(ids)):
            problems.append(f"{what} is not convex: a path leaves it and comes back, so it "
                            f"cannot run as one step")
    if not problems and len(views.substitutions) > 1:
        cycle = _substitution_cycle(graph, [set(ids) for ids, _, _, _ in views.substitutions])
        if cycle:
            problems.append(f"substitutions {cycle[0]} and {cycle[1]} each need the other's "
                            f"output, so neither can run first")
    if problems:
        raise InvalidOptimizationError(spec.backend, problems)


def _substitution_cycle(graph: Graph, substitutions):
    """Two substitutions (indices) with paths both ways between them, or None."""
    owner = {i: k for k, ids in enumerate(substitutions) for i in ids}

    def reached_from(k):
        stack = [s for i in substitutions[k] for s in graph.successors[i] if owner.get(s) != k]
        seen, hits = set(), set()
        while stack:
            layer = stack.pop()
            if layer in seen:
                continue
            seen.add(layer)
            if layer in owner and owner[layer] != k:
                hits.add(owner[layer])
            stack.extend(graph.successors[layer])
        return hits

    reach = [reached_from(k) for k in range(len(substitutions))]
    for k, hits in enumerate(reach):
        for j in hits:
            if k in reach[j]:
                return (min(k, j), max(k, j))
    return None


# -- rule 12.4: steps in execution order --------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """One step of a plan: a compiled sub-graph or one layer's workload, on one backend.
    ``inputs`` and ``outputs`` name the tensors it reads and writes, in the order of its
    buffers."""

    backend: str
    kind: str                          # "compiled" | "workload"
    layers: Tuple[str, ...]
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]

    def to_json(self):
        return {"backend": self.backend, "kind": self.kind, "layers": list(self.layers)}


def order_steps(graph: Graph, units: List[Tuple[List[int], object]]) -> List[int]:
    """A valid execution order of ``units`` (each a list of layer indices plus anything): a
    topological order of the graph between them, earliest first layer first on ties."""
    owner = {}
    for k, (layers, _) in enumerate(units):
        for i in layers:
            owner[i] = k
    preds = [set() for _ in units]
    for k, (layers, _) in enumerate(units):
        for i in layers:
            for p in graph.predecessors[i]:
                if owner[p] != k:
                    preds[k].add(owner[p])
    import heapq
    indegree = [len(p) for p in preds]
    succs = [[] for _ in units]
    for k, ps in enumerate(preds):
        for p in ps:
            succs[p].append(k)
    ready = [(min(units[k][0]), k) for k in range(len(units)) if indegree[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for s in succs[k]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (min(units[s][0]), s))
    if len(order) != len(units):        # excluded by the checks above; never run a bad plan
        raise InvalidOptimizationError("(runtime)", ["the steps form a cycle"])
    return order


# -- buffers: tensor lifetimes and reuse ----------------------------------------------------------

@dataclass
class BufferPlan:
    """Where each intermediate tensor lives: an offset (bytes) into one arena, shared by tensors
    whose lifetimes do not overlap."""

    offsets: Dict[str, int]
    arena_bytes: int
    unshared_bytes: int                 # what one buffer per tensor would take


def plan_buffers(steps: Sequence[Step], sizes: Dict[str, int], dynamic: set) -> BufferPlan:
    """Lifetimes: a tensor lives from the step that writes it to the last step that reads it.
    ``dynamic`` tensors (network inputs and outputs, constants) are bound elsewhere. Tensors
    are placed largest first at the lowest offset free for their whole lifetime."""
    first, last = {}, {}
    for k, step in enumerate(steps):
        for name in step.outputs:
            if name not in dynamic:
                first.setdefault(name, k)
                last[name] = max(last.get(name, k), k)
        for name in step.inputs:
            if name in first:
                last[name] = max(last[name], k)

    def aligned(n):
        return (n + ARENA_ALIGNMENT - 1) // ARENA_ALIGNMENT * ARENA_ALIGNMENT

    placed: List[Tuple[int, int, int, int]] = []     # (offset, size, first, last)
    offsets = {}
    for name in sorted(first, key=lambda n: (-sizes[n], first[n], n)):
        size = aligned(sizes[name])
        overlapping = sorted((o, s) for o, s, f, l in placed
                             if not (l < first[name] or last[name] < f))
        offset = 0
        for o, s in overlapping:
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        placed.append((offset, size, first[name], last[name]))
        offsets[name] = offset
    arena = max((o + s for o, s, _, _ in placed), default=0)
    return BufferPlan(offsets, arena, sum(aligned(sizes[n]) for n in first))
