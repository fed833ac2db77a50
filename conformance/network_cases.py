"""The NET cases (Backend API 1.2 sub-graphs): offered random networks built from the layers the
backend claims, its optimizer's views must cover them exactly (checked by the loader's own
``planning.validate_views``), each substitution must compute what the layers it replaces
compute, failures must come with reasons and be deterministic, and compiled sub-graphs must
outlive the instance; where the backend offers them, serialized compiled sub-graphs must load
again with identical results, profiling events must be well-formed and inside the execution,
and the availability answer must not change. A backend without an optimizer (every 1.0 and 1.1
backend) or without the optional member gets NOT_SUPPORTED, never FAIL."""
import numpy as np

from conformance.network_offers import (answer, note, offer, random_network,
                                        run_substitutions)
from conformance.registry import Failed, NotSupported, case
from conformance.resource_usage import leaks

SEEDS = (1, 2, 3)


def _optimizing_backend(subject):
    backend = subject.backend()
    if not backend.features.get("SubgraphOptimization"):
        raise NotSupported(f"the backend (Backend API {backend.version}) has no optimize_subgraph")
    return backend


def _networks(subject):
    backend = _optimizing_backend(subject)
    networks = [n for n in (random_network(backend, seed) for seed in SEEDS) if n is not None]
    if not networks:
        raise NotSupported("the backend supports none of the kit's network layers")
    return backend, networks


@case("net.views-cover", "NET-1")
def _net_views_cover(subject):
    backend, networks = _networks(subject)
    for net in networks:
        answer(backend, net)


def _check_substitutions(net, spec, views, seed, backend):
    """Each substitution against NumPy evaluating the layers it replaces."""
    from conformance import reference
    for k, ids, values, outputs in run_substitutions(net, spec, views, seed, backend=backend):
        known = {n: v.astype(np.float64) for n, v in values.items()}
        known.update({n: a.astype(np.float64) for n, a in net.constants.items()})
        for i in ids:
            layer = net.layers[i]
            known[layer.name] = reference.evaluate(layer.type, [known[n] for n in layer.inputs],
                                                   layer.descriptor)
        for name, out in outputs.items():
            expected = known[name]
            error = np.abs(out - expected)
            if not np.all(np.isfinite(out)) or np.any(error > 1e-3 + 1e-3 * np.abs(expected)):
                raise Failed(f"substitution {k} of {[net.layers[i].name for i in ids]}: output "
                             f"{name!r} differs from NumPy by up to {float(error.max()):.3g}")


@case("net.substitutions-compute", "NET-2")
def _net_substitutions(subject):
    backend, networks = _networks(subject)
    substituted = 0
    for seed, net in zip(SEEDS, networks):
        _, spec, views = answer(backend, net, own_requirement=False)
        substituted += len(views.substitutions)
        _check_substitutions(net, spec, views, seed, backend)
    if not substituted:
        raise NotSupported("the optimizer substituted nothing in the kit's networks")


@case("net.failed-consistent", "NET-3")
def _net_failed(subject):
    backend, networks = _networks(subject)
    for net in networks:
        _, _, first = answer(backend, net, own_requirement=False)
        _, _, second = answer(backend, net, own_requirement=False)
        names = {i: layer.name for i, layer in enumerate(net.layers)}
        if sorted(i for i, _ in first.failed) != sorted(i for i, _ in second.failed):
            raise Failed(f"the same sub-graph had layers {sorted(names[i] for i, _ in first.failed)} "
                         f"failed, then {sorted(names[i] for i, _ in second.failed)}")
        for i, reason in first.failed:
            if not reason.strip() or reason == "no reason given":
                raise Failed(f"layer {names[i]!r} was failed without a reason")


@case("net.outlive-instance", "NET-4")
def _net_outlive(subject):
    backend, networks = _networks(subject)
    substituted = 0
    for seed, net in zip(SEEDS, networks):
        other = subject.backend()
        _, spec, views = answer(other, net, own_requirement=False)
        before = run_substitutions(net, spec, views, seed, backend=other)
        other.close()                   # the compiled sub-graphs must not care
        after = run_substitutions(net, spec, views, seed, " (after its instance was destroyed)",
                                   backend=other)
        substituted += len(views.substitutions)
        for (k, ids, _, first), (_, _, _, second) in zip(before, after):
            for name in first:
                if not np.array_equal(first[name], second[name], equal_nan=True):
                    raise Failed(f"substitution {k} of {[net.layers[i].name for i in ids]} "
                                 f"computes {name!r} differently once its instance is destroyed")
    if not substituted:
        raise NotSupported("the optimizer substituted nothing in the kit's networks")


@case("net.blob-round-trip", "NET-5")
def _net_blob_round_trip(subject):
    from loader import _core
    backend, networks = _networks(subject)
    if not backend.features.get("SerializedSubgraphs"):
        raise NotSupported("the backend has no load_compiled_subgraph")
    checked = 0
    for seed, net in zip(SEEDS, networks):
        _, spec, views = answer(backend, net, own_requirement=False)
        before = run_substitutions(net, spec, views, seed, backend=backend)
        reloaded = []
        for k, (ids, inputs, outputs, compiled) in enumerate(views.substitutions):
            if not compiled.serializable:
                reloaded.append((ids, inputs, outputs, compiled))
                continue
            note(backend, "serialize (compiled sub-graph)")
            try:
                blob = compiled.serialize()
            except Exception as error:
                raise Failed(f"substitution {k}: serialize failed: {error}")
            note(backend, "load_compiled_subgraph")
            try:
                again = _core.load_compiled_subgraph(note(backend, "load_compiled_subgraph"),
                                                     blob)
            except Exception as error:
                raise Failed(f"substitution {k}: its own {len(blob)} bytes were refused: {error}")
            reloaded.append((ids, inputs, outputs, again))
            checked += 1
        views.substitutions[:] = reloaded
        after = run_substitutions(net, spec, views, seed, " (loaded from its bytes)",
                                   backend=backend)
        for (k, ids, _, first), (_, _, _, second) in zip(before, after):
            for name in first:
                if not np.array_equal(first[name], second[name], equal_nan=True):
                    raise Failed(f"substitution {k} of {[net.layers[i].name for i in ids]} "
                                 f"computes {name!r} differently once loaded from its bytes")
    if not checked:
        raise NotSupported("no compiled sub-graph of the kit's networks serializes")


@case("net.profiling-events", "NET-6")
def _net_profiling_events(subject):
    import time
    from loader import _core
    backend, networks = _networks(subject)
    if not backend.features.get("Profiling"):
        raise NotSupported("the backend has no create_profiling_context")
    reported = 0
    for seed, net in zip(SEEDS, networks):
        _, spec, views = answer(backend, net, own_requirement=False)
        note(backend, "create_profiling_context")
        context = _core.create_profiling_context(note(backend, "create_profiling_context"))
        if context is None:
            raise NotSupported("create_profiling_context gave no context")
        taken = [i for ids, *_ in views.substitutions for i in ids]
        for _, _, _, compiled in views.substitutions:
            compiled.set_profiling_context(context)
        context.enable(True)
        start = time.monotonic_ns()
        run_substitutions(net, spec, views, seed, " (profiled)", backend=backend)
        end = time.monotonic_ns()
        context.enable(False)
        note(backend, "collect (profiling context)")
        records = context.collect()
        for _, _, _, compiled in views.substitutions:
            compiled.close()
        context.close()
        for record in records:
            if record[0] != "event":
                continue
            _, name, ids, s, e = record
            reported += 1
            where = f"event {name!r}"
            if not ids:
                raise Failed(f"{where} names no layer")
            unknown = [i for i in ids if i not in taken]
            if unknown:
                raise Failed(f"{where} names layer ids {unknown[:5]} that no substitution "
                             f"covers")
            if e < s:
                raise Failed(f"{where} ends before it starts ({s} > {e})")
            if s < start or e > end:
                raise Failed(f"{where} [{s}, {e}] lies outside the execution [{start}, {end}] "
                             f"on CLOCK_MONOTONIC")
    if not reported:
        raise NotSupported("the backend reported no events for the kit's networks")


@case("net.availability-deterministic", "NET-7")
def _net_availability(subject):
    from loader import _core
    backend = subject.backend()
    if not backend.features.get("Availability"):
        raise NotSupported("the backend has no is_available")
    answers = []
    for _ in range(4):
        answers.append(_core.query_availability(note(backend, "is_available")))
    other = subject.backend()
    answers.append(_core.query_availability(note(other, "is_available")))
    if len({ok for ok, _ in answers}) != 1:
        raise Failed("is_available changed its answer between calls: "
                     + ", ".join("yes" if ok else f"no ({message})" for ok, message in answers))


@case("net.create-destroy", "LIFE-1")
def _net_create_destroy(subject):
    backend, networks = _networks(subject)
    net = networks[0]
    _, _, views = answer(backend, net, own_requirement=False)
    if not views.substitutions:
        raise NotSupported("the optimizer substituted nothing in the kit's first network")
    for _, _, _, compiled in views.substitutions:
        compiled.close()

    def cycle():
        _, _, offered = offer(backend, net)
        for _, _, _, compiled in offered.substitutions:
            compiled.close()
    findings = leaks(cycle, 200, f"compiled sub-graphs of a network of {len(net.layers)} layers",
                     "optimize_subgraph and destroy cycle", "cycles", settle=20)
    if findings:
        raise Failed("; ".join(findings))
