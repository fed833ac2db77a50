"""Profiles of a network's execution (rule 12.7): the runtime's own spans (the run, each step),
the events backends report through their profiling contexts, checked and mapped back from debug
handles (layer indices) to layer names, and the Chrome trace event format that Perfetto opens.
"""
import json
import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

log = logging.getLogger("loader")


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


def _event_problem(owner: Dict[int, str], backend_id, ids, s, e, start, end) -> Optional[str]:
    """What is wrong with a backend's event, or None."""
    if not ids:
        return "names no layer" if ids is not None else "NULL layer ids"
    unknown = [i for i in ids if owner.get(i) != backend_id]
    if unknown:
        return f"layer ids {unknown[:5]} are not layers this backend runs in the network"
    if e < s:
        return f"ends ({e}) before it starts ({s})"
    if s < start or e > end:
        return f"[{s}, {e}] lies outside the execution [{start}, {end}]"
    return None


def collect(network_id: int, plan, step_times, start: int, end: int,
            reports: Dict[str, list]) -> Tuple[List[ProfileEvent], Dict[tuple, float], List[str]]:
    """(events, counters, problems) of one execution: the runtime's events and every backend
    event that passes the checks of rule 12.7; the others are dropped with a warning and listed
    in ``problems``. ``reports``: backend id -> the records its profiling context collected."""
    names = [layer.name for layer in plan.graph.layers]
    owner = {i: step.backend for step in plan.steps for i in step.layer_ids}
    events = [ProfileEvent("execute", None, tuple(names), start, end, "runtime")]
    for step, (s, e) in zip(plan.steps, step_times):
        events.append(ProfileEvent(step.kind, step.backend, step.layers, s, e, "runtime"))
    problems, counters = [], {}
    for backend_id, records in reports.items():
        for record in records:
            if record[0] == "counter":
                key = (backend_id, record[1])
                counters[key] = counters.get(key, 0.0) + record[2]
                continue
            _, name, ids, s, e = record
            problem = _event_problem(owner, backend_id, ids, s, e, start, end)
            if problem is not None:
                problems.append(f"backend {backend_id!r} event {name!r}: {problem}")
                continue
            layers = tuple(names[i] for i in ids)
            events.append(ProfileEvent(name or "event", backend_id, layers, s, e, "backend"))
    for problem in problems[:10]:
        log.warning("profile of network %d: dropped %s", network_id, problem)
    if len(problems) > 10:
        log.warning("profile of network %d: dropped %d more events", network_id,
                    len(problems) - 10)
    return events, counters, problems


def write_trace(path, network_id: int, events: List[ProfileEvent],
                counters: Dict[tuple, float]) -> None:
    """``events`` in the Chrome trace event format: one complete event per span, in
    microseconds; one track for the runtime's events, one per backend for the events it
    reported; a step or backend event is named by the layers it covers."""
    tracks = {"runtime": 1}
    for e in events:
        if e.source == "backend":
            tracks.setdefault(e.backend, len(tracks) + 1)
    trace = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
              "args": {"name": track}} for track, tid in tracks.items()]
    trace.append({"name": "process_name", "ph": "M", "pid": 1, "tid": 1,
                  "args": {"name": f"network {network_id}"}})
    for e in events:
        trace.append({
            "name": "+".join(e.layers) if e.backend else e.name,
            "cat": e.backend or "runtime", "ph": "X", "pid": 1,
            "tid": tracks[e.backend] if e.source == "backend" else 1,
            "ts": e.start_ns / 1000.0, "dur": (e.end_ns - e.start_ns) / 1000.0,
            "args": {"event": e.name, "source": e.source, "layers": list(e.layers)}})
    end = max((e.end_ns for e in events), default=0)
    for (backend_id, name), value in sorted(counters.items()):
        trace.append({"name": name, "ph": "C", "pid": 1, "tid": tracks.get(backend_id, 1),
                      "ts": end / 1000.0, "cat": backend_id, "args": {backend_id: value}})
    with open(path, "w") as f:
        json.dump({"traceEvents": trace, "displayTimeUnit": "ns"}, f)
