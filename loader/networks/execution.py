"""Loading and running networks (docs/networks.md).

``load_network`` checks the network, has ``planning`` decide everything (assignment,
sub-graphs, the backends' views, steps, buffers), then creates what the plan needs (memory
managers, workload factories, workloads, profiling contexts, the arena) and tells the backend
contexts. ``execute`` only binds the inputs and walks the steps (``_core.Executor``).
"""
import itertools
import threading
import time
from typing import Dict, List, Optional

import numpy as np

from loader import _core
from loader.errors import BackendCrashedError, BackendError, BackendNotFoundError, NetworkError
from loader.networks import planning, profiling
from loader.networks.network import Network

_network_ids = itertools.count(1)


def _lost(thing) -> bool:
    """Whether ``thing`` was made by a backend host that has ended since (loader.host objects
    say so through their ``lost`` property; nothing else is ever lost)."""
    return isinstance(getattr(type(thing), "lost", None), property) and thing.lost


def _crash_details(error) -> dict:
    """The attributes of a BackendCrashedError, to raise another like it."""
    return {k: getattr(error, k, None) for k in ("backend", "call", "signal", "exit_status")} \
        | {"output": getattr(error, "output", "")}


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
        for backend_id, context in list(self.contexts().items()):
            if _lost(context):
                context = self._renew(backend_id)
                if context is None:
                    continue
            getattr(context, event)(network_id)

    def _renew(self, backend_id: str):
        """A context in place of one lost with its backend host; None when the backend wants
        none now."""
        with self._lock:
            backend = self._runtime.create_backend(backend_id)
            try:
                context = backend.create_backend_context()
            finally:
                backend.close()
            if context is None:
                self._contexts.pop(backend_id, None)
            else:
                self._contexts[backend_id] = context
            return context

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


class LoadedNetwork:
    """A network loaded onto backends: ``execute`` it, read its ``plan`` and ``assignments``,
    ``unload`` it (also as a context manager). Calls to ``execute`` are serialized; different
    loaded networks run in parallel."""

    def __init__(self):
        raise TypeError("LoadedNetwork objects come from Runtime.load_network")

    @classmethod
    def _create(cls, runtime, network: Network, backends=None, make_plan=None
                ) -> "LoadedNetwork":
        """Load ``network``; ``make_plan(network, instances)`` decides the plan (default:
        ``planning.plan_network``, the rules; a compiled network file brings its own)."""
        self = object.__new__(cls)
        self._load(runtime, network, backends, make_plan or planning.plan_network)
        return self

    # -- loading -----------------------------------------------------------------------------

    def _load(self, runtime, network, backend_ids, make_plan):
        if not isinstance(network, Network):
            raise TypeError(f"load_network takes a loader.Network, not {type(network).__name__}")
        network.check()
        registered = runtime.backend_ids
        if backend_ids is None:
            backend_ids = registered
        if isinstance(backend_ids, str):
            backend_ids = [b.strip() for b in backend_ids.split(",") if b.strip()]
        try:
            backend_ids = list(backend_ids)
        except TypeError:
            backend_ids = None
        if backend_ids is None or not all(isinstance(b, str) for b in backend_ids):
            raise TypeError("backends must be a backend id, a comma-separated string or a "
                            "list of ids (str)") from None
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
        self._runtime = runtime
        self._backend_ids = backend_ids
        self._make_plan = make_plan
        self._lock = threading.Lock()
        self._unloaded = False
        self._lost = False                  # a backend host it ran on ended; load again
        self._run_lock = threading.Lock()
        self.last_profile = None
        self.last_counters: Dict[tuple, float] = {}
        self.profile_problems: List[str] = []
        self._attach()
        host.add(self)

    def _attach(self):
        """Plan the network onto its backends, create what the plan needs and tell the backend
        contexts (rule 12.5)."""
        host, network, make_plan = self._host, self.network, self._make_plan
        self._executor = None
        self._owned: List[object] = []      # workloads, compiled sub-graphs, factories, managers
        self._managers: List[object] = []
        self._profilers: Dict[str, object] = {}  # backend id -> ProfilingContext (rule 12.7)
        instances = {b: self._runtime.create_backend(b) for b in self._backend_ids}
        try:
            plan = make_plan(network, instances)
            self._owned.extend(plan.compiled())
            self.plan = plan.steps
            self.assignments = plan.assignments
            self.declined = plan.declined
            self.failed = plan.failed
            self.buffer_plan = plan.buffers
            self._plan = plan
            host.notify("before_load_network", self.id)
            try:
                self._build(plan, instances)
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

    def _reload(self):
        """Load the network again after a backend host it ran on ended (CONTRACT-models 16.3):
        the backend contexts see it unloaded, then loaded again."""
        self._lost = True
        self._host.notify("before_unload_network", self.id)
        try:
            self._release()
        finally:
            self._host.notify("after_unload_network", self.id)
        try:
            self._attach()
        except BackendError as error:
            raise BackendCrashedError(
                f"network {self.id} was lost with a backend host it ran on and cannot be loaded "
                f"again: {error}", **_crash_details(error)) from error
        self._lost = False

    def _build(self, plan, instances):
        """Create what ``plan`` needs, then the executor over its steps."""
        graph = plan.graph
        # Rule 12.5: for each backend the network uses, a memory manager where it offers one,
        # handed to that backend's workload factory.
        factories = {}
        for step in plan.steps:
            if step.backend not in factories:
                backend = instances[step.backend]
                manager = (backend.create_memory_manager()
                           if backend.features.get("MemoryManager") else None)
                if manager is not None:
                    self._managers.append(manager)
                factories[step.backend] = backend.create_workload_factory(manager)
                self._owned.append(factories[step.backend])
        # Rule 12.7: one profiling context per backend whose compiled sub-graphs take one.
        for step in plan.steps:
            if step.compiled is None:
                continue
            if step.backend not in self._profilers:
                self._profilers[step.backend] = _core.create_profiling_context(
                    instances[step.backend])
            if self._profilers[step.backend] is not None:
                step.compiled.set_profiling_context(self._profilers[step.backend])
        self._profilers = {b: c for b, c in self._profilers.items() if c is not None}
        runners = []
        for step in plan.steps:
            if step.kind == "workload":
                layer = graph.layers[step.layer_ids[0]]
                workload = factories[step.backend].create_workload_prepared(layer.prepared)
                self._owned.append(workload)
                runners.append(workload)
            else:
                runners.append(step.compiled)

        # Buffers: network inputs and outputs are bound per call, the rest planned once. Steps
        # that run in backend hosts get their buffers in shared memory (loader.host.executor).
        slot = {name: k for k, name in enumerate(plan.dynamic)}
        hosted = any(getattr(runner, "hosted", False) for runner in runners)
        arena = None if hosted else np.empty(
            plan.buffers.arena_bytes // 4 + planning.ARENA_ALIGNMENT // 4, dtype=np.float32)
        shift = 0 if hosted else (-arena.ctypes.data) % planning.ARENA_ALIGNMENT

        def ref(name):
            if name in slot:
                return ("dynamic", slot[name])
            if name in graph.constants:
                return ("constant", graph.constants[name])
            return ("arena", shift + plan.buffers.offsets[name], plan.sizes[name])

        executor_steps = [("+".join(step.layers), step.kind, runner,
                           [ref(n) for n in step.inputs], [ref(n) for n in step.outputs])
                          for step, runner in zip(plan.steps, runners)]
        if hosted:
            from loader.host.executor import HostExecutor
            self._executor = HostExecutor(
                executor_steps, plan.buffers.arena_bytes,
                [planning.tensor_bytes(self.network.tensor(name).shape) for name in plan.dynamic],
                len(self.network.inputs))
        else:
            self._executor = _core.Executor(executor_steps, arena, len(slot))
        self._versions = {b: str(instances[b].version) for b in instances}
        self._input_names = list(self.network.inputs)
        self._input_shapes = [self.network.tensor(n).shape for n in self._input_names]
        self._produced = [(name, self.network.tensor(name).shape)
                          for name in plan.dynamic[len(self._input_names):]]
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
        if self._executor is None and not self._lost:
            raise BackendError(f"network {self.id} was unloaded; load it again to execute")
        with self._run_lock:        # a profiling context is never switched during a run
            executor = self._executor
            if self._lost or (executor is not None and executor.lost()):
                self._reload()
                executor = self._executor
            profilers = self._profilers if profile else {}
            for context in profilers.values():
                context.enable(True)
            try:
                start = time.monotonic_ns()
                executor.run(arrays + list(produced.values()), bool(profile))
                end = time.monotonic_ns()
            except BackendCrashedError as error:
                if self._unloaded:
                    raise BackendError(f"network {self.id} was unloaded; load it again to "
                                       f"execute") from None
                raise type(error)(f"{error}\nnetwork {self.id} is loaded again at its next "
                                  f"execute", **_crash_details(error)) from None
            except BackendError:
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
        executor = self._executor
        times = executor.step_times() if executor is not None else []
        events, self.last_counters, self.profile_problems = profiling.collect(
            self.id, self._plan, times, start, end, reports)
        return events

    def save_trace(self, path):
        """Write ``last_profile`` in the Chrome trace event format (Perfetto opens it): one
        complete event per span, in microseconds."""
        if not self.last_profile:
            raise BackendError("no profile yet: execute(..., profile=True) first")
        profiling.write_trace(path, self.id, self.last_profile, self.last_counters)

    # -- the compiled form (rule 12.8) --------------------------------------------------------
    def export(self, path):
        """Write the network, its plan and each compiled sub-graph's bytes (with its backend
        id, Backend API version and a checksum) to ``path``; ``Runtime.load_compiled_network``
        loads it again without calling any optimizer."""
        from loader.networks import compiled as compiled_file
        from loader.versions import BACKEND_API_VERSION
        if self._unloaded:
            raise BackendError(f"network {self.id} was unloaded; nothing to export")
        blobs = []
        for step in self.plan:
            compiled = step.compiled
            if compiled is None:
                blobs.append(None)
                continue
            if not compiled.serializable:
                raise compiled_file.CompiledNetworkError(
                    f"backend {step.backend!r} cannot serialize its compiled sub-graphs "
                    f"(step {'+'.join(step.layers)})")
            blobs.append((step.backend, compiled.serialize()))
        compiled_file.write(path, self.network, self.plan, blobs, self._versions,
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
                if manager.acquired and not _lost(manager):
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
        return self._plan.report()

    def __repr__(self):
        layers = len(self.network.layers)
        steps = len(self.plan)
        backends = ", ".join(dict.fromkeys(step.backend for step in self.plan))
        state = " unloaded" if self._unloaded else ""
        return (f"<LoadedNetwork {self.id}: {layers} layer{'s' * (layers != 1)} in {steps} "
                f"step{'s' * (steps != 1)} on {backends}{state}>")
