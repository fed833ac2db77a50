"""One converter per ONNX operator family, registered for the operator and the opset version it
handles. ``converter(op_type, opset)`` picks the one registered for the largest since-version
not newer than the operator's schema in that opset, so a difference between opsets lives in the
converter that has it.

A converter is ``f(builder, node, inputs, attributes, opset) -> [Value, ...]`` (one per output
the node has): ``inputs`` are Values (None for an absent optional input); it folds what it can
at import time (all inputs constant), adds layers for the rest, and raises
``values.Unsupported`` for what cannot be expressed.
"""
from typing import Callable, Dict, List, Tuple

REGISTRY: Dict[str, List[Tuple[int, Callable]]] = {}


def converts(*op_types: str, since: int = 1):
    """Register the decorated function for ``op_types`` from opset version ``since``."""
    def register(function):
        for op_type in op_types:
            REGISTRY.setdefault(op_type, []).append((since, function))
            REGISTRY[op_type].sort(key=lambda entry: entry[0])
        return function
    return register


def converter(op_type: str, opset: int):
    """The converter for ``op_type`` in ``opset``, or None when no converter handles it."""
    entries = REGISTRY.get(op_type)
    if not entries:
        return None
    import onnx.defs
    try:
        since = onnx.defs.get_schema(op_type, opset, "").since_version
    except Exception:           # an operator ONNX does not define in that opset
        return None
    chosen = None
    for version, function in entries:
        if version <= since:
            chosen = function
    return chosen


from loader.onnx.ops import (attention, composite, elementwise, linear,  # noqa: E402,F401
                             normalization, shape, spatial, tensor)
