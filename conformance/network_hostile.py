"""Compiled sub-graphs under scrutiny (NET-11, NET-6), on generated networks offered whole to the
backend's optimizer:

- ``net.damaged-blobs``: the bytes a compiled sub-graph serializes to, truncated, extended and
  with single bits flipped, handed to ``load_compiled_subgraph``. Bytes that are not all of what
  ``serialize`` wrote must be refused with a message; a flipped bit must be refused with a
  message, or give a compiled sub-graph that executes (or refuses to) without crashing: a bit of
  a weight changes a weight, which no format has to notice. Each load and execute is announced
  first, so a crash is reported with the damage that caused it.
- ``net.profiling-fused-layers``: where a compiled sub-graph reports events, every layer it
  covers is named by at least one of them; a step that runs several layers fused names them
  all (rule 12.7: every layer appears in an event).
"""
import numpy as np

from conformance import network_builder as nb
from conformance.network_offers import answer, note, random_network, run_substitutions
from conformance.network_runs import optimizing_backend
from conformance.registry import Failed, NotSupported, case

FLIPPED_HEAD = 96       # every byte of the first FLIPPED_HEAD bytes gets a flipped bit,
FLIPPED_SPREAD = 64     # and this many more, anywhere
BLOBS = 2               # compiled sub-graphs damaged per run


def _fused_network(backend, seed):
    """Layers optimizers fuse: a convolution and its activation, a residual addition, a
    matrix product and its activation."""
    b = nb.Builder(backend, seed)
    x = b.net.add_input("x", (1, 5, 6, 4))
    t = b.layer("Convolution2d", [x, b.rng.uniform(-0.3, 0.3, (4, 3, 3, 4)).astype(np.float32)],
                {"padding": 1})
    if t is None:
        return None
    t = b.layer("Activation", [t], {"function": "relu"}) or t
    t = b.layer("Addition", [t, x]) or t
    t = b.layer("Convolution2d", [t, b.rng.uniform(-0.3, 0.3, (3, 1, 1, 4)).astype(np.float32)]) or t
    t = b.layer("Activation", [t], {"function": "bounded_relu", "a": 6.0, "b": 0.0}) or t
    return b.network([("y", t)])


def _networks(backend, seed):
    return [n for n in (nb.chain(backend, 12, (2, 3, 4), seed), _fused_network(backend, seed + 1),
                        nb.side_outputs(backend, (1, 5, 6, 4), seed + 2),
                        random_network(backend, 1), random_network(backend, 2)) if n is not None]


class _Views:
    def __init__(self, substitutions):
        self.substitutions = substitutions


def _damaged(blob, rng):
    """(what was done, bytes, whether they must be refused)."""
    n = len(blob)
    for m in sorted({0, 1, 4, 8, 16, n // 4, n // 2, 3 * n // 4, n - 8, n - 4, n - 1}):
        if 0 <= m < n:
            yield f"truncated to {m} of its {n} bytes", blob[:m], True
    for extra in (b"\0", bytes(rng.integers(0, 256, 8, dtype=np.uint8)), blob):
        yield f"extended by {len(extra)} bytes", blob + extra, True
    positions = list(range(min(n, FLIPPED_HEAD))) + [int(p) for p in rng.integers(0, n, FLIPPED_SPREAD)]
    for position in positions:
        bit = int(rng.integers(0, 8))
        damaged = bytearray(blob)
        damaged[position] ^= 1 << bit
        yield f"bit {bit} of byte {position} of {n} flipped", bytes(damaged), False


@case("net.damaged-blobs", "NET-11", tier="full")
def _damaged_blobs(subject):
    import loader
    from loader import _core
    backend = optimizing_backend(subject)
    if not backend.features.get("SerializedSubgraphs"):
        raise NotSupported("the backend has no load_compiled_subgraph")
    rng = np.random.default_rng(subject.seed or 0)
    taken = []
    for net in _networks(backend, 700):
        _, spec, views = answer(backend, net, own_requirement=False)
        for substitution in views.substitutions:
            compiled = substitution[3]
            if len(taken) < BLOBS and compiled.serializable:
                note(backend, "serialize (compiled sub-graph)")
                taken.append((net, spec, substitution, compiled.serialize()))
    if not taken:
        raise NotSupported("no compiled sub-graph of the kit's networks serializes")
    accepted_flips = checked = 0
    for k, (net, spec, (ids, inputs, outputs, _), blob) in enumerate(taken):
        for what, data, must_refuse in _damaged(blob, rng):
            where = f"compiled sub-graph {k + 1} ({len(ids)} layers), {what}"
            subject.note(f"load_compiled_subgraph: {where}")
            try:
                again = _core.load_compiled_subgraph(note(backend, "load_compiled_subgraph"), data)
            except loader.BackendError as error:
                if "no message" in str(error):
                    raise Failed(f"{where}: refused without a message saying why: {error}")
                checked += 1
                continue
            if must_refuse:
                again.close()
                raise Failed(f"{where}: load_compiled_subgraph accepted them; bytes that are "
                             f"not all of what serialize wrote must be refused")
            accepted_flips += 1
            subject.note(f"execute of the compiled sub-graph loaded from bytes with {what}")
            try:
                run_substitutions(net, spec, _Views([(ids, inputs, outputs, again)]), 1,
                                   f" (loaded with {what})", backend=backend)
            except Failed:
                pass            # an execute that refuses is fine; a crash is not
            again.close()
            checked += 1
    return (f"{checked} damaged copies of {len(taken)} compiled sub-graphs refused or run safely "
            f"({accepted_flips} with a flipped bit loaded and executed)")


@case("net.profiling-fused-layers", "NET-6", tier="full")
def _profiling_fused_layers(subject):
    from loader import _core
    backend = optimizing_backend(subject)
    if not backend.features.get("Profiling"):
        raise NotSupported("the backend has no create_profiling_context")
    reported = 0
    for net in _networks(backend, 800):
        _, spec, views = answer(backend, net, own_requirement=False)
        if not views.substitutions:
            continue
        note(backend, "create_profiling_context")
        context = _core.create_profiling_context(note(backend, "create_profiling_context"))
        if context is None:
            raise NotSupported("create_profiling_context gave no context")
        for _, _, _, compiled in views.substitutions:
            compiled.set_profiling_context(context)
        context.enable(True)
        run_substitutions(net, spec, views, 1, " (profiled)", backend=backend)
        context.enable(False)
        note(backend, "collect (profiling context)")
        events = [(r[1], set(r[2])) for r in context.collect() if r[0] == "event"]
        for _, _, _, compiled in views.substitutions:
            compiled.close()
        context.close()
        reported += len(events)
        for ids, *_ in views.substitutions:
            mine = [(name, named) for name, named in events if named & set(ids)]
            if not mine:
                continue
            missing = sorted(set(ids) - set().union(*(named for _, named in mine)))
            if missing:
                names = [net.layers[i].name + f" ({net.layers[i].type})" for i in missing]
                shown = "; ".join(f"{name!r}: {sorted(net.layers[i].name for i in named)}"
                                  for name, named in mine[:4])
                raise Failed(f"the events of a compiled sub-graph of {len(ids)} layers name "
                             f"none of {names[:5]}; every layer it runs must be named by an "
                             f"event (a fused step names each layer it runs). Its events: {shown}")
    if not reported:
        raise NotSupported("the backend reported no events for the kit's networks")
