"""Planning a network (docs/networks.md): which backend takes each layer, the sub-graphs
offered to each backend, the one check of a backend's optimization views, the steps in
execution order, and where every intermediate tensor lives.

``plan_network`` produces the ``Plan`` that ``loader.networks.execution`` turns into workloads
and an executor. The backends are asked only what the rules need: whether they support a layer
(``Backend.query_layer_support``) and what their optimizer makes of a sub-graph
(``_core.optimize_subgraph``); everything else is plain Python over the network's layer graph.
"""
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from loader import _core
from loader.errors import (FeatureNotAvailableError, InvalidOptimizationError,
                           NoBackendForLayerError)

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
    groups of layers already planned (steps of earlier rounds): they never merge, and each runs
    as one step, so a path into any of its layers and out of any other counts. Returns lists of
    layer indices, ordered by their first layer.

    Two groups joined by an edge merge unless a path leads from one to the other through a layer,
    a step or another group outside both: merging them would make the sub-graphs depend on each
    other. The search for such a path walks backwards from the later group; where groups are
    joined along a chain (the common case, and every layer of one backend) it ends at once, so
    planning a long chain is linear."""
    units = _Units(graph, fixed)
    parent = {i: i for i in backend_of}
    members = {i: [i] for i in backend_of}

    def find(i):
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    def group(unit):
        return find(unit) if unit in parent else None

    def path_around(a, b) -> bool:
        """Whether a path leads from group ``a`` to group ``b`` through something outside both.
        A group runs as one step, so a path that enters a group at any layer leaves it at any
        other: the walk backwards from ``b`` steps through each group it meets as a whole."""
        seen, seen_groups = set(), set()
        stack = [p for m in members[b] for p in units.preds[m] if group(p) not in (a, b)]
        while stack:
            unit = stack.pop()
            owner = group(unit)
            if owner == a:
                return True
            if owner == b:
                continue
            if owner is None:
                if unit not in seen:
                    seen.add(unit)
                    stack.extend(units.preds[unit])
            elif owner not in seen_groups:
                seen_groups.add(owner)
                stack.extend(p for m in members[owner] for p in units.preds[m]
                             if group(p) != owner)
        return False

    changed = True
    while changed:                      # a merge can make an earlier refusal possible
        changed = False
        for v in sorted(backend_of, key=units.pos.__getitem__):
            for u in graph.predecessors[v]:
                if backend_of.get(u) != backend_of[v]:
                    continue
                a, b = find(u), find(v)
                if a == b or path_around(a, b):
                    continue
                if len(members[a]) < len(members[b]):
                    a, b = b, a
                parent[b] = a
                members[a].extend(members.pop(b))
                changed = True
    return sorted((sorted(m) for m in members.values()), key=lambda g: g[0])


class _Units:
    """The layer graph with each fixed group contracted to one unit (id ``len(layers) + k``):
    ``preds`` of every unit, and ``pos``, its position in a topological order of the units."""

    def __init__(self, graph: Graph, fixed: Sequence[Sequence[int]]):
        n = len(graph.layers)
        unit = list(range(n))
        for k, group in enumerate(fixed):
            for i in group:
                unit[i] = n + k
        count = n + len(fixed)
        preds = [set() for _ in range(count)]
        for i in range(n):
            for p in graph.predecessors[i]:
                if unit[p] != unit[i]:
                    preds[unit[i]].add(unit[p])
        self.preds = [list(p) for p in preds]
        succs = [[] for _ in range(count)]
        for u, ps in enumerate(self.preds):
            for p in ps:
                succs[p].append(u)
        indegree = [len(p) for p in self.preds]
        order = [u for u in range(count) if indegree[u] == 0 and (u < n and unit[u] == u or u >= n)]
        pos = {}
        for u in order:                             # Kahn's algorithm; `order` grows as it goes
            pos[u] = len(pos)
            for s in succs[u]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    order.append(s)
        for i in range(n):                          # a layer of a fixed group sits at its unit
            if unit[i] != i:
                pos[i] = pos[unit[i]]
        self.pos = pos


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


def boundary(graph: Graph, layer_ids) -> Tuple[set, set]:
    """The tensor names that cross the boundary of the layers ``layer_ids``: the non-constant
    tensors they read and do not produce, and the tensors they produce that any other layer
    reads or that are network outputs."""
    chosen = set(layer_ids)
    produced = {graph.layers[i].name for i in chosen}
    inputs = {source for i in chosen for source in graph.layers[i].inputs
              if source not in produced and source not in graph.constants}
    outputs = {name for name in produced
               if name in graph.output_tensors
               or any(r not in chosen for r in graph.consumers.get(name, ()))}
    return inputs, outputs


def _leaves_and_returns(graph: Graph, chosen) -> bool:
    """Whether a path leaves the layer set ``chosen`` and comes back into it. Layer indices are
    a topological order, so such a path never passes a layer after the last one chosen."""
    last = max(chosen)
    stack = [s for i in chosen for s in graph.successors[i] if s not in chosen and s < last]
    seen = set()
    while stack:
        layer = stack.pop()
        if layer in seen:
            continue
        seen.add(layer)
        for s in graph.successors[layer]:
            if s in chosen:
                return True
            if s < last:
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
        want_in, want_out = boundary(graph, ids)
        given_in = {spec.tensors[t][0] for t in inputs}
        given_out = {spec.tensors[t][0] for t in outputs}
        if given_in != want_in:
            problems.append(f"{what} has boundary inputs {sorted(given_in)}; the tensors "
                            f"crossing into it are {sorted(want_in)}")
        if given_out != want_out:
            problems.append(f"{what} has boundary outputs {sorted(given_out)}; the tensors "
                            f"read outside it are {sorted(want_out)}")
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
    """Two substitutions (indices) with paths both ways between them, or None: the smallest
    pair of a strongly connected component of the graph with each substitution contracted."""
    n = len(graph.layers)
    node = list(range(n))
    for k, ids in enumerate(substitutions):
        for i in ids:
            node[i] = n + k
    succs = [set() for _ in range(n + len(substitutions))]
    for i in range(n):
        for s in graph.successors[i]:
            if node[s] != node[i]:
                succs[node[i]].add(node[s])
    for component in _strongly_connected(succs):
        inside = sorted(c - n for c in component if c >= n)
        if len(inside) > 1:
            return inside[0], inside[1]
    return None


def _strongly_connected(succs):
    """The strongly connected components of more than one node (Tarjan's, without recursion)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in range(len(succs)):
        if root in index:
            continue
        work = [(root, iter(succs[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succs[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


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
    layer_ids: Tuple[int, ...] = field(default=(), compare=False, repr=False)
    compiled: object = field(default=None, compare=False, repr=False)   # _core.CompiledSubgraph

    def to_json(self):
        return {"backend": self.backend, "kind": self.kind, "layers": list(self.layers)}


@dataclass
class Unit:
    """A planned step before ordering: its layers (indices), backend and what runs it."""

    layers: List[int]
    backend: str
    kind: str                       # "compiled" | "workload"
    compiled: object = None         # _core.CompiledSubgraph
    inputs: tuple = ()              # boundary tensor names (compiled)
    outputs: tuple = ()


def order_steps(graph: Graph, units: Sequence[Unit]) -> List[int]:
    """A valid execution order of ``units``: a topological order of the graph between them,
    earliest first layer first on ties."""
    owner = {}
    for k, unit in enumerate(units):
        for i in unit.layers:
            owner[i] = k
    preds = [set() for _ in units]
    for k, unit in enumerate(units):
        for i in unit.layers:
            for p in graph.predecessors[i]:
                if owner[p] != k:
                    preds[k].add(owner[p])
    indegree = [len(p) for p in preds]
    succs = [[] for _ in units]
    for k, ps in enumerate(preds):
        for p in ps:
            succs[p].append(k)
    ready = [(min(units[k].layers), k) for k in range(len(units)) if indegree[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for s in succs[k]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (min(units[s].layers), s))
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
    are placed largest first at the lowest offset free for their whole lifetime; the tensors
    already placed are looked up by the steps they live in, so a long network of short-lived
    tensors plans in linear time."""
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

    alive: List[List[Tuple[int, int]]] = [[] for _ in steps]     # step -> (offset, size) placed
    offsets, arena = {}, 0
    for name in sorted(first, key=lambda n: (-sizes[n], first[n], n)):
        size = aligned(sizes[name])
        overlapping = sorted({block for k in range(first[name], last[name] + 1)
                              for block in alive[k]})
        offset = 0
        for o, s in overlapping:
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        for k in range(first[name], last[name] + 1):
            alive[k].append((offset, size))
        offsets[name] = offset
        arena = max(arena, offset + size)
    return BufferPlan(offsets, arena, sum(aligned(sizes[n]) for n in first))


# -- rule 12.1 and 12.4: assignment and re-assignment of failed layers ------------------------

class _Assigner:
    """Rules 12.1-12.4 for one network and one preference list of live backend instances: each
    layer to the first backend that supports it, sub-graphs offered to optimizers, failed
    layers to the next backend."""

    def __init__(self, graph: Graph, backends: Dict[str, object]):
        self.graph = graph
        self.backends = backends
        self.order = list(backends)
        self.declined: Dict[str, Dict[str, str]] = {layer.name: {} for layer in graph.layers}
        self.failed: Dict[str, Dict[str, str]] = {}
        self.units: List[Unit] = []

    def _support(self, backend_id, layer_index):
        layer = self.graph.layers[layer_index]
        try:
            return self.backends[backend_id].query_layer_support(layer.prepared)
        except FeatureNotAvailableError as error:
            return _core.LayerSupport(False, str(error))

    def _assign(self, layer_index, start):
        """The first backend from ``start`` in preference order that accepts the layer."""
        name = self.graph.layers[layer_index].name
        for backend_id in self.order[start:]:
            support = self._support(backend_id, layer_index)
            if support:
                return backend_id
            self.declined[name][backend_id] = support.reason
        raise NoBackendForLayerError(name, self.declined[name])

    def assign(self) -> List[Unit]:
        pending = {i: self._assign(i, 0) for i in range(len(self.graph.layers))}
        while pending:
            fixed = [unit.layers for unit in self.units]
            groups = group_layers(self.graph, pending, fixed)
            retry = {}
            for group in groups:
                backend_id = pending[group[0]]
                for layer_index, reason in self._offer(backend_id, group):
                    name = self.graph.layers[layer_index].name
                    self.declined[name][backend_id] = f"its optimizer failed the layer: {reason}"
                    self.failed.setdefault(name, {})[backend_id] = reason
                    retry[layer_index] = self._assign(layer_index,
                                                      self.order.index(backend_id) + 1)
            pending = retry
        return self.units

    def _offer(self, backend_id, group):
        """Offer one sub-graph; settle its substitutions and untouched layers as units and
        return the failed layers with their reasons."""
        backend = self.backends[backend_id]
        if not backend.features.get("SubgraphOptimization"):
            self.units.extend(Unit([i], backend_id, "workload") for i in group)
            return []
        spec = describe_subgraph(self.graph, backend_id, group)
        prepared = [self.graph.layers[i].prepared for i in group]
        views = _core.optimize_subgraph(backend, spec, prepared, self.graph.constants)
        validate_views(self.graph, spec, views)
        for ids, inputs, outputs, compiled in views.substitutions:
            self.units.append(Unit(sorted(ids), backend_id, "compiled", compiled,
                                   tuple(spec.tensors[t][0] for t in inputs),
                                   tuple(spec.tensors[t][0] for t in outputs)))
        self.units.extend(Unit([i], backend_id, "workload") for i in views.untouched)
        return [(i, reason) for i, reason in views.failed]


# -- the plan ----------------------------------------------------------------------------------

def tensor_bytes(shape) -> int:
    count = 4                           # float32
    for v in shape:
        count *= v
    return count


@dataclass
class Plan:
    """Everything ``load_network`` decided, before anything is created: the steps in execution
    order, which backend took each layer and why the others declined, and the buffers."""

    graph: Graph
    steps: List[Step]
    assignments: Dict[str, str]                         # layer name -> backend id
    declined: Dict[str, Dict[str, str]]                 # layer name -> {backend id: reason}
    failed: Dict[str, Dict[str, str]]                   # layer name -> {backend id: reason}
    buffers: "BufferPlan"
    dynamic: List[str]                  # tensors bound per execute: the inputs, then produced outputs
    sizes: Dict[str, int]               # bytes of every tensor a step reads or writes

    def compiled(self) -> List[object]:
        return [step.compiled for step in self.steps if step.compiled is not None]

    def report(self) -> dict:
        """What ``backend-loader plan --json`` prints; a network imported from ONNX also says
        which node each layer came from (``onnx_node``)."""
        origin = getattr(self.graph.network, "onnx_origin", None)
        layers = []
        for layer in self.graph.layers:
            entry = {"name": layer.name, "type": layer.type,
                     "backend": self.assignments[layer.name],
                     "declined": dict(self.declined.get(layer.name, {}))}
            if origin is not None:
                entry["onnx_node"] = origin.get(layer.name)
            layers.append(entry)
        return {"layers": layers, "steps": [step.to_json() for step in self.steps]}


def close_units(units: Sequence[Unit]) -> None:
    """Destroy the compiled sub-graphs of a plan that will not run."""
    for unit in units:
        if unit.compiled is not None:
            unit.compiled.close()


def plan_network(network, backends: Dict[str, object]) -> Plan:
    """Rules 12.1-12.4 for ``network`` on ``backends`` (id -> live instance, in preference
    order). On any error every compiled sub-graph made so far is destroyed."""
    assigner = _Assigner(Graph(network), backends)
    try:
        units = assigner.assign()
        return finish_plan(assigner.graph, units, assigner.declined, assigner.failed)
    except BaseException:
        close_units(assigner.units)
        raise


def finish_plan(graph: Graph, units: Sequence[Unit], declined=None, failed=None) -> Plan:
    """Order ``units`` into steps and plan the buffers."""
    names = [layer.name for layer in graph.layers]
    steps = []
    for k in order_steps(graph, units):
        unit = units[k]
        layers = tuple(names[i] for i in unit.layers)
        if unit.kind == "workload":
            layer = graph.layers[unit.layers[0]]
            steps.append(Step(unit.backend, "workload", layers, layer.inputs, (layer.name,),
                              tuple(unit.layers)))
        else:
            steps.append(Step(unit.backend, "compiled", layers, unit.inputs, unit.outputs,
                              tuple(unit.layers), unit.compiled))
    owner = {i: unit.backend for unit in units for i in unit.layers}
    network = graph.network
    output_tensors = list(dict.fromkeys(network.outputs.values()))
    dynamic = list(network.inputs) + [t for t in output_tensors if t in graph.producer]
    sizes = {name: tensor_bytes(network.tensor(name).shape)
             for step in steps for name in step.inputs + step.outputs}
    buffers = plan_buffers(steps, sizes, set(dynamic) | set(graph.constants))
    return Plan(graph, steps, {names[i]: owner[i] for i in range(len(names))},
                declined if declined is not None else {name: {} for name in names},
                failed or {}, buffers, dynamic, sizes)
