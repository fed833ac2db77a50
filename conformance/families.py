"""Families of generated layer cases: each family, a list of specs (layer_runs.spec) built once,
runs as one case, ``layers.generated-<name>``, that goes through its specs, skips those the
backend declines (and, without asking, those its Backend API version cannot be handed), and
fails with the first two mismatches. The families themselves are conformance/generated.py
(LAYER-1) and conformance/generated_*.py (LAYER-3); they register here.
"""
from typing import Callable, Dict, List

from conformance.layer_runs import compare, describe, execute, inputs_for, layer_cases
from conformance.registry import Failed, LayerMismatch, NotSupported, case

#: Every family of generated cases by name.
FAMILIES: Dict[str, Callable[[], List[dict]]] = {}

_SPECS: Dict[str, List[dict]] = {}


def specs(family) -> List[dict]:
    if family not in _SPECS:
        _SPECS[family] = FAMILIES[family]()
    return _SPECS[family]


def owner(data) -> str:
    """The fixed case (layer_cases.yaml id) a generated case belongs with: the first of the same
    layer and, for activations, unary functions, pooling and reductions, the same function. A
    defect that fixed case already showed is reported there, and this failure is marked as its
    consequence."""
    descriptor = data.get("descriptor") or {}
    for fixed in layer_cases():
        same = fixed.get("descriptor") or {}
        if fixed["layer"] == data["layer"] and all(
                same.get(key) == descriptor.get(key) for key in ("function", "pool")):
            return fixed["id"]
    return data["id"]


def minor_needed(data) -> int:
    """The Backend API minor version a backend must be built against to be handed ``data``: a
    1.3 layer type, or a 1.3 descriptor member away from its default."""
    from loader.layers import prepare
    return prepare(data["layer"], [tuple(s) for s in data["inputs"]], data.get("descriptor")).minor


def _family_case(family):
    def run(subject):
        import loader
        backend = subject.backend()
        minor = backend.version.minor
        failures, owners, ran, too_new = [], [], 0, 0
        for data in specs(family):
            if minor_needed(data) > minor:  # never offered: the runtime would refuse it anyway
                too_new += 1
                continue
            inputs = inputs_for(data, subject.seed)
            if not backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")):
                continue
            ran += 1
            subject.working_on(data)
            subject.note(f"running {describe(data, subject.seed)}")
            try:
                [out] = execute(backend, data, inputs)
                compare(data, inputs, out, subject.seed)
            except loader.BackendError as error:
                failures.append(f"{describe(data, subject.seed)}: {error}")
                owners.append(None)
            except Failed as failure:
                failures.append(str(failure))
                owners.append(owner(data) if isinstance(failure, LayerMismatch) else None)
        if not ran:
            if too_new == len(specs(family)):
                raise NotSupported(f"the backend is built against Backend API {backend.version}, "
                                   f"and the {too_new} generated {family} cases need 1.3")
            raise NotSupported(f"the backend supports none of the {len(specs(family))} generated "
                               f"{family} cases")
        if failures:
            more = f"; then {failures[1]}" if len(failures) > 1 else ""
            message = (f"{len(failures)} of {ran} generated {family} cases fail; first: "
                       f"{failures[0]}{more}")
            if owners[0] is not None:
                raise LayerMismatch(owners[0], message)
            raise Failed(message)
    return run


def register_families(families: Dict[str, Callable[[], List[dict]]], requirement: str):
    """Each family as one case, ``layers.generated-<name>``, of ``requirement``."""
    for name, builder in families.items():
        FAMILIES[name] = builder
        case(f"layers.generated-{name}", requirement, tier="full")(_family_case(name))
