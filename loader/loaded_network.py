"""Loading and running networks (contract rules 12.1-12.5, 12.9, 12.10).

``load_network`` does all the work once: it checks the network, asks each backend which layers
it takes (preference order), groups them into sub-graphs, offers each sub-graph to its backend's
optimizer and checks the answer (``planning.validate_views``), re-assigns failed layers, orders
the steps, plans the buffers, creates workloads, and tells the backend contexts. ``execute``
then only binds the inputs and walks the steps (``_core.Executor``).
"""
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from loader import _core
from loader import planning
from loader.errors import (BackendError, BackendNotFoundError, FeatureNotAvailableError,
                           NetworkError, NoBackendForLayerError)
from loader.network import Network

_network_ids = itertools.count(1)
log = logging.getLogger("loader")


class RuntimeNetworks:
    """What a runtime keeps for networks: one context per registered backend that offers one
    (created once, before the first network loads) and the networks loaded through it."""

    def __init__(self, runtime):
        self._runtime = runtime
        self._lock = threading.RLock()
        self._contexts: Optional[Dict[str, object]] = None
        self._loaded: Dict[int, "LoadedNetwork"] = {}

    def contexts(self) -> Dict[str, object]:
        with self._lock:
            if self._contexts is None:
                contexts = {}
                for backend_id in self._runtime.backend_ids:
                    backend = self._runtime.create_backend(backend_id)
                    try:
                        if backend.features.get("BackendContext"):
                            context = backend.create_backend_context()
                            if context is not None:
                                contexts[backend_id] = context
                    finally:
                        backend.close()
                self._contexts = contexts
            return self._contexts

    def notify(self, event: str, network_id: int) -> None:
        for context in self.contexts().values():
            getattr(context, event)(network_id)

    def add(self, loaded: "LoadedNetwork") -> None:
        with self._lock:
            self._loaded[loaded.id] = loaded

    def remove(self, network_id: int) -> None:
        with self._lock:
            self._loaded.pop(network_id, None)

    def close(self) -> None:
        """Unload every network loaded through the runtime, then destroy the contexts."""
        with self._lock:
            loaded = list(self._loaded.values())
        for network in reversed(loaded):
            network.unload()
        with self._lock:
            for context in (self._contexts or {}).values():
                context.close()
            self._contexts = {}


@dataclass
class _Unit:
    """A planned step before ordering: its layers (indices), backend and what runs it."""

    layers: List[int]
    backend: str
    kind: str                       # "compiled" | "workload"
    compiled: object = None         # _core.CompiledSubgraph
    inputs: tuple = ()              # boundary tensor names (compiled)
    outputs: tuple = ()


class _Planner:
    """Rules 12.1-12.4 for one network and one preference list of live backend instances."""

    def __init__(self, network: Network, backends: Dict[str, object]):
        self.network = network
        self.graph = planning.Graph(network)
        self.backends = backends
        self.order = list(backends)
        self.declined: Dict[str, Dict[str, str]] = {layer.name: {} for layer in network.layers}
        self.failed: Dict[str, Dict[str, str]] = {}
        self.units: List[_Unit] = []

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

    def plan(self) -> List[_Unit]:
        pending = {i: self._assign(i, 0) for i in range(len(self.graph.layers))}
        while pending:
            fixed = [unit.layers for unit in self.units]
            groups = planning.group_layers(self.graph, pending, fixed)
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
            self.units.extend(_Unit([i], backend_id, "workload") for i in group)
            return []
        spec = planning.describe_subgraph(self.graph, backend_id, group)
        prepared = [self.graph.layers[i].prepared for i in group]
        views = _core.optimize_subgraph(backend, spec, prepared, self.graph.constants)
        planning.validate_views(self.graph, spec, views)
        for ids, inputs, outputs, compiled in views.substitutions:
            self.units.append(_Unit(sorted(ids), backend_id, "compiled", compiled,
                                    tuple(spec.tensors[t][0] for t in inputs),
                                    tuple(spec.tensors[t][0] for t in outputs)))
        self.units.extend(_Unit([i], backend_id, "workload") for i in views.untouched)
        return [(i, reason) for i, reason in views.failed]


def _nbytes(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) * 4


class LoadedNetwork:
    """A network loaded onto backends: ``execute`` it, read its ``plan`` and ``assignments``,
    ``unload`` it (also as a context manager). Calls to ``execute`` are serialized; different
    loaded networks run in parallel."""

    def __init__(self):
        raise TypeError("LoadedNetwork objects come from Runtime.load_network")

    @classmethod
    def _create(cls, runtime, network: Network, backends=None, compiled_steps=None
                ) -> "LoadedNetwork":
        self = object.__new__(cls)
        self._load(runtime, network, backends, compiled_steps)
        return self

    # -- loading -----------------------------------------------------------------------------

    def _load(self, runtime, network, backend_ids, compiled_steps=None):
        if not isinstance(network, Network):
            raise TypeError(f"load_network takes a loader.Network, not {type(network).__name__}")
        network.check()
        registered = runtime.backend_ids
        if backend_ids is None:
            backend_ids = registered
        if isinstance(backend_ids, str):
            backend_ids = [b.strip() for b in backend_ids.split(",") if b.strip()]
        backend_ids = list(dict.fromkeys(backend_ids))
        for backend_id in backend_ids:
            if backend_id not in registered:
                runtime.create_backend(backend_id)          # raises, saying why
        if not backend_ids:
            raise BackendNotFoundError("no backends to load the network onto")
        host = runtime._network_host()
        host.contexts()                     # rule 12.5: no later than the first load

        self.network = network
        self.id = next(_network_ids)
        self._host = host
        self._lock = threading.Lock()
        self._unloaded = False
        self._executor = None
        self._owned: List[object] = []      # workloads, compiled sub-graphs, factories, managers
        self._managers: List[object] = []
        self._profilers: Dict[str, object] = {}  # backend id -> ProfilingContext (rule 12.7)
        self._run_lock = threading.Lock()
        self.last_profile = None
        self.last_counters: Dict[tuple, float] = {}
        self.profile_problems: List[str] = []
        instances = {b: runtime.create_backend(b) for b in backend_ids}
        planner = _Planner(network, instances)
        try:
            try:
                units = (planner.plan() if compiled_steps is None
                         else _units_from_file(planner, compiled_steps))
            except BaseException:
                for unit in planner.units:      # nothing runs; destroy what was compiled
                    if unit.compiled is not None:
                        unit.compiled.close()
                raise
            self._owned.extend(u.compiled for u in units if u.compiled is not None)
            graph = planner.graph
            self.declined = planner.declined
            self.failed = planner.failed
            host.notify("before_load_network", self.id)
            try:
                self._build(graph, units, instances)
            except BaseException:
                self._release()
                host.notify("after_load_network", self.id)
                host.notify("before_unload_network", self.id)
                host.notify("after_unload_network", self.id)
                raise
            host.notify("after_load_network", self.id)
        except BaseException:
            self._release()
            raise
        finally:
            # Everything planned stays valid without the instances (rule 12.5).
            for backend in instances.values():
                backend.close()
        host.add(self)

    def _build(self, graph, units, instances):
        names = [layer.name for layer in graph.layers]
        order = planning.order_steps(graph, [(u.layers, u) for u in units])
        steps = []
        for k in order:
            unit = units[k]
            layers = tuple(names[i] for i in unit.layers)
            if unit.kind == "workload":
                layer = graph.layers[unit.layers[0]]
                steps.append(planning.Step(unit.backend, "workload", layers, layer.inputs,
                                           (layer.name,)))
            else:
                steps.append(planning.Step(unit.backend, "compiled", layers, unit.inputs,
                                           unit.outputs))
        self.plan = steps
        self.assignments = {names[i]: u.backend for u in units for i in u.layers}
        self.assignments = {name: self.assignments[name] for name in names}

        # Rule 12.5: for each backend the network uses, a memory manager where it offers one,
        # handed to that backend's workload factory.
        factories, managers = {}, {}
        for unit in units:
            if unit.backend not in factories:
                backend = instances[unit.backend]
                manager = (backend.create_memory_manager()
                           if backend.features.get("MemoryManager") else None)
                if manager is not None:
                    managers[unit.backend] = manager
                    self._managers.append(manager)
                factories[unit.backend] = backend.create_workload_factory(manager)
                self._owned.append(factories[unit.backend])
        # Rule 12.7: one profiling context per backend whose compiled sub-graphs take one.
        for unit in units:
            if unit.kind != "compiled":
                continue
            if unit.backend not in self._profilers:
                self._profilers[unit.backend] = _core.create_profiling_context(
                    instances[unit.backend])
            if self._profilers[unit.backend] is not None:
                unit.compiled.set_profiling_context(self._profilers[unit.backend])
        self._profilers = {b: c for b, c in self._profilers.items() if c is not None}
        self._layer_backend = {i: u.backend for u in units for i in u.layers}
        self._layer_names = names
        runners = {}
        for unit in units:
            if unit.kind == "workload":
                layer = graph.layers[unit.layers[0]]
                workload = factories[unit.backend].create_workload_prepared(layer.prepared)
                self._owned.append(workload)
                runners[id(unit)] = workload
            else:
                runners[id(unit)] = unit.compiled

        # Buffers: network inputs and outputs are bound per call, the rest planned once.
        inputs = list(self.network.inputs)
        output_tensors = list(dict.fromkeys(self.network.outputs.values()))
        produced = [t for t in output_tensors if t in graph.producer]
        slot = {name: k for k, name in enumerate(inputs)}
        slot.update({name: len(inputs) + k for k, name in enumerate(produced)})
        sizes = {name: _nbytes(self.network.tensor(name).shape)
                 for step in steps for name in step.inputs + step.outputs}
        dynamic = set(slot) | set(graph.constants)
        self.buffer_plan = planning.plan_buffers(steps, sizes, dynamic)
        arena = np.empty(self.buffer_plan.arena_bytes // 4 + planning.ARENA_ALIGNMENT // 4,
                         dtype=np.float32)
        shift = (-arena.ctypes.data) % planning.ARENA_ALIGNMENT

        def ref(name):
            if name in slot:
                return ("dynamic", slot[name])
            if name in graph.constants:
                return ("constant", graph.constants[name])
            return ("arena", shift + self.buffer_plan.offsets[name], sizes[name])

        executor_steps = [("+".join(step.layers), step.kind, runners[id(units[k])],
                           [ref(n) for n in step.inputs], [ref(n) for n in step.outputs])
                          for step, k in zip(steps, order)]
        self._executor = _core.Executor(executor_steps, arena, len(slot))
        self._step_compiled = [units[k].compiled for k in order]
        self._versions = {b: str(instances[b].version) for b in instances}
        self._input_names = inputs
        self._input_shapes = [self.network.tensor(n).shape for n in inputs]
        self._produced = [(name, self.network.tensor(name).shape) for name in produced]
        self._outputs = list(self.network.outputs.items())
        for manager in self._managers:
            manager.acquire()

    # -- running -----------------------------------------------------------------------------

    def execute(self, inputs, profile=False):
        """Run the network on ``inputs`` (input name -> float32 array of its shape); a dict
        output name -> new array."""
        if self._unloaded:
            raise BackendError(f"network {self.id} was unloaded; load it again to execute")
        if not isinstance(inputs, dict):
            raise NetworkError(f"inputs must be a dict of input name -> array, not "
                               f"{type(inputs).__name__}")
        missing = [n for n in self._input_names if n not in inputs]
        extra = [n for n in inputs if n not in self._input_names]
        if missing or extra:
            raise NetworkError(
                "inputs do not match the network's: "
                + "; ".join(filter(None, [missing and f"missing {missing}",
                                          extra and f"unknown {extra}"])))
        arrays = []
        for name, shape in zip(self._input_names, self._input_shapes):
            value = inputs[name]
            if not isinstance(value, np.ndarray) or value.dtype != np.float32:
                raise NetworkError(f"input {name!r} must be a float32 numpy.ndarray, not "
                                   f"{getattr(value, 'dtype', type(value).__name__)}")
            if value.shape != shape:
                raise NetworkError(f"input {name!r} has shape {list(value.shape)}, the network "
                                   f"takes {list(shape)}")
            arrays.append(value if value.flags.c_contiguous else np.ascontiguousarray(value))
        produced = {name: np.empty(shape, dtype=np.float32) for name, shape in self._produced}
        executor = self._executor
        if executor is None:
            raise BackendError(f"network {self.id} was unloaded; load it again to execute")
        profilers = self._profilers if profile else {}
        with self._run_lock:        # a profiling context is never switched during a run
            for context in profilers.values():
                context.enable(True)
            try:
                start = time.monotonic_ns()
                executor.run(arrays + list(produced.values()), bool(profile))
                end = time.monotonic_ns()
            except BackendError as error:
                if self._unloaded:
                    raise BackendError(f"network {self.id} was unloaded; load it again to "
                                       f"execute") from None
                raise
            finally:
                for context in profilers.values():
                    context.enable(False)
            reports = {b: c.collect() for b, c in profilers.items()}
        results, given = {}, dict(zip(self._input_names, arrays))
        for output, tensor in self._outputs:
            if tensor in produced and not any(t is produced[tensor] for t in results.values()):
                results[output] = produced[tensor]
            else:
                source = produced[tensor] if tensor in produced else given[tensor]
                results[output] = source.copy()
        if profile:
            self.last_profile = self._profile(start, end, reports)
        return results

    def _profile(self, start, end, reports):
        """The runtime's events (the run, each step) and every backend event that passes the
        checks of rule 12.7; the others are dropped with a warning."""
        events = [ProfileEvent("execute", None, tuple(self.assignments), start, end, "runtime")]
        executor = self._executor
        times = executor.step_times() if executor is not None else []
        for step, (s, e) in zip(self.plan, times):
            events.append(ProfileEvent(step.kind, step.backend, step.layers, s, e, "runtime"))
        problems, counters = [], {}
        for backend_id, records in reports.items():
            for record in records:
                if record[0] == "counter":
                    counters[(backend_id, record[1])] = (counters.get((backend_id, record[1]), 0.0)
                                                         + record[2])
                    continue
                _, name, ids, s, e = record
                problem = self._event_problem(backend_id, ids, s, e, start, end)
                if problem is not None:
                    problems.append(f"backend {backend_id!r} event {name!r}: {problem}")
                    continue
                layers = tuple(self._layer_names[i] for i in ids)
                events.append(ProfileEvent(name or "event", backend_id, layers, s, e, "backend"))
        for problem in problems[:10]:
            log.warning("profile of network %d: dropped %s", self.id, problem)
        if len(problems) > 10:
            log.warning("profile of network %d: dropped %d more events", self.id,
                        len(problems) - 10)
        self.profile_problems = problems
        self.last_counters = counters
        return events

    def _event_problem(self, backend_id, ids, s, e, start, end):
        if not ids:
            return "names no layer" if ids is not None else "NULL layer ids"
        unknown = [i for i in ids if self._layer_backend.get(i) != backend_id]
        if unknown:
            return f"layer ids {unknown[:5]} are not layers this backend runs in the network"
        if e < s:
            return f"ends ({e}) before it starts ({s})"
        if s < start or e > end:
            return f"[{s}, {e}] lies outside the execution [{start}, {end}]"
        return None

    def save_trace(self, path):
        """Write ``last_profile`` in the Chrome trace event format (Perfetto opens it): one
        complete event per span, in microseconds."""
        if not self.last_profile:
            raise BackendError("no profile yet: execute(..., profile=True) first")
        import json
        # One track for the runtime's events, one per backend for the events it reported;
        # a step or backend event is named by the layers it covers.
        tracks = {"runtime": 1}
        for e in self.last_profile:
            if e.source == "backend":
                tracks.setdefault(e.backend, len(tracks) + 1)
        trace = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                  "args": {"name": track}} for track, tid in tracks.items()]
        trace.append({"name": "process_name", "ph": "M", "pid": 1, "tid": 1,
                      "args": {"name": f"network {self.id}"}})
        for e in self.last_profile:
            trace.append({
                "name": "+".join(e.layers) if e.backend else e.name,
                "cat": e.backend or "runtime", "ph": "X", "pid": 1,
                "tid": tracks[e.backend] if e.source == "backend" else 1,
                "ts": e.start_ns / 1000.0, "dur": (e.end_ns - e.start_ns) / 1000.0,
                "args": {"event": e.name, "source": e.source, "layers": list(e.layers)}})
        end = max((e.end_ns for e in self.last_profile), default=0)
        for (backend_id, name), value in sorted(self.last_counters.items()):
            trace.append({"name": name, "ph": "C", "pid": 1, "tid": tracks.get(backend_id, 1),
                          "ts": end / 1000.0, "cat": backend_id, "args": {backend_id: value}})
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ns"}, f)

    # -- the compiled form (rule 12.8) --------------------------------------------------------
    def export(self, path):
        """Write the network, its plan and each compiled sub-graph's bytes (with its backend
        id, Backend API version and a checksum) to ``path``; ``Runtime.load_compiled_network``
        loads it again without calling any optimizer."""
        from loader import compiled_network
        from loader.errors import CompiledNetworkError
        from loader.versions import BACKEND_API_VERSION
        if self._unloaded:
            raise BackendError(f"network {self.id} was unloaded; nothing to export")
        blobs = []
        for step, compiled in zip(self.plan, self._step_compiled):
            if compiled is None:
                blobs.append(None)
                continue
            if not compiled.serializable:
                raise CompiledNetworkError(
                    f"backend {step.backend!r} cannot serialize its compiled sub-graphs "
                    f"(step {'+'.join(step.layers)})")
            blobs.append((step.backend, compiled.serialize()))
        compiled_network.write(path, self.network, self.plan, blobs, self._versions,
                               str(BACKEND_API_VERSION))

    # -- unloading ---------------------------------------------------------------------------

    def _release(self):
        """Release the memory managers, destroy workloads, factories and compiled sub-graphs
        (newest first), then the memory managers (after every factory made with them)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.close()
        managers, self._managers = self._managers, []
        owned, self._owned = self._owned, []
        profilers, self._profilers = self._profilers, {}
        try:
            for manager in managers:
                if manager.acquired:
                    manager.release()
        finally:
            for thing in reversed(owned):
                thing.close()
            for context in profilers.values():      # after the compiled sub-graphs holding it
                context.close()
            for manager in managers:
                manager.close()

    def unload(self):
        """Destroy the workloads, compiled sub-graphs and memory managers and tell the backend
        contexts. Idempotent."""
        with self._lock:
            if self._unloaded:
                return
            self._unloaded = True
        self._host.notify("before_unload_network", self.id)
        try:
            self._release()
        finally:
            self._host.notify("after_unload_network", self.id)
            self._host.remove(self.id)

    @property
    def unloaded(self):
        return self._unloaded

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.unload()

    def plan_report(self) -> dict:
        """What ``backend-loader plan --json`` prints."""
        return {
            "layers": [{"name": layer.name, "type": layer.type,
                        "backend": self.assignments[layer.name],
                        "declined": dict(self.declined.get(layer.name, {}))}
                       for layer in self.network.layers],
            "steps": [step.to_json() for step in self.plan],
        }

    def __repr__(self):
        state = "unloaded" if self._unloaded else f"{len(self.plan)} steps"
        return f"<LoadedNetwork {self.id} {state}>"


@dataclass(frozen=True)
class ProfileEvent:
    """One timed span of an execution: the whole run (backend None), one step (timed by the
    runtime) or what a backend reported (``source`` "backend", its layers mapped back from
    their debug handles)."""

    name: str
    backend: Optional[str]
    layers: tuple
    start_ns: int
    end_ns: int
    source: str = "runtime"


def load_network(runtime, network, backends=None) -> LoadedNetwork:
    return LoadedNetwork._create(runtime, network, backends)


def _units_from_file(planner: "_Planner", steps) -> List[_Unit]:
    """The units a compiled network file lists, its compiled sub-graphs created again from
    their bytes by their backends (no optimizer is called)."""
    from loader.errors import CompiledNetworkError
    index = {layer.name: i for i, layer in enumerate(planner.graph.layers)}
    units: List[_Unit] = []
    try:
        for step in steps:
            backend = planner.backends[step["backend"]]
            layers = [index[name] for name in step["layers"]]
            if step["kind"] == "workload":
                if len(layers) != 1:
                    raise CompiledNetworkError(f"a workload step with {len(layers)} layers")
                units.append(_Unit(layers, step["backend"], "workload"))
                continue
            if step["api_version"] != str(backend.version):
                raise CompiledNetworkError(
                    f"step {'+'.join(step['layers'])} was compiled by {step['backend']!r} "
                    f"built against Backend API {step['api_version']}; the one registered here "
                    f"is built against {backend.version}")
            if not backend.features.get("SerializedSubgraphs"):
                raise CompiledNetworkError(
                    f"backend {step['backend']!r} cannot load compiled sub-graphs")
            try:
                compiled = _core.load_compiled_subgraph(backend, step["blob"])
            except BackendError as error:
                raise CompiledNetworkError(
                    f"step {'+'.join(step['layers'])}: {error}") from None
            units.append(_Unit(sorted(layers), step["backend"], "compiled", compiled,
                               tuple(step["inputs"]), tuple(step["outputs"])))
        covered = sorted(i for u in units for i in u.layers)
        if covered != list(range(len(planner.graph.layers))):
            raise CompiledNetworkError("the plan does not cover every layer exactly once")
        for unit in units:
            if unit.kind == "compiled":
                boundary = planning_boundary(planner.graph, unit.layers)
                if (set(unit.inputs), set(unit.outputs)) != boundary:
                    raise CompiledNetworkError(
                        f"step {'+'.join(planner.graph.layers[i].name for i in unit.layers)}: "
                        f"its boundary is not the tensors that cross it")
    except KeyError as error:
        for unit in units:
            if unit.compiled is not None:
                unit.compiled.close()
        raise CompiledNetworkError(f"the plan names {error} which the network does not have"
                                   ) from None
    except BaseException:
        for unit in units:
            if unit.compiled is not None:
                unit.compiled.close()
        raise
    planner.units = units
    return units


def planning_boundary(graph, layers):
    """(inputs, outputs) of a set of layers: non-constant tensors read and not produced
    inside, and tensors produced inside that are read outside or are network outputs."""
    inside = set(layers)
    names = {graph.layers[i].name for i in inside}
    inputs = {t for i in inside for t in graph.layers[i].inputs
              if t not in names and t not in graph.constants}
    read_outside = {t for j, layer in enumerate(graph.layers) if j not in inside
                    for t in layer.inputs}
    outputs = {n for n in names if n in read_outside or n in graph.output_tensors}
    return inputs, outputs
