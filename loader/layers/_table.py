"""What a layer type is, and what a layer call becomes once checked."""
from dataclasses import dataclass, field
from typing import Callable, Dict, Tuple

Shape = Tuple[int, ...]


@dataclass(frozen=True)
class PreparedLayer:
    """A layer call made concrete: what the ABI's BackendLayerDescription carries, and the
    Backend API minor version a backend needs to be handed it (a 1.3 layer type, or a 1.3
    descriptor member away from its default)."""

    name: str
    code: int                   # BACKEND_LAYER_*
    input_shapes: Tuple[Shape, ...]
    output_shape: Shape
    fields: Dict[str, object]   # the C descriptor's members, or empty
    minor: int = 1


@dataclass(frozen=True)
class LayerType:
    """A layer type: its code, its inputs (a trailing ``bias`` is optional; a ``variadic``
    layer takes one or more of its single input), its descriptor keys with their defaults
    (``required`` ones have none), and ``rule(descriptor, shapes) -> (output shape, C fields,
    minor version needed)``."""

    name: str
    code: int
    inputs: Tuple[str, ...]
    defaults: Dict[str, object]
    rule: Callable
    help: str = ""              # what the descriptor's values mean, for error messages
    since_minor: int = 1        # the Backend API minor version that added the type
    required: Tuple[str, ...] = ()
    variadic: bool = False
    optional: Tuple[str, ...] = field(default=("bias",))

    @property
    def min_inputs(self) -> int:
        if self.variadic:
            return 1
        count = len(self.inputs)
        while count and self.inputs[count - 1] in self.optional:
            count -= 1
        return count

    def signature(self) -> str:
        if self.variadic:
            return f"{self.inputs[0]}1, ..., {self.inputs[0]}n"
        return ", ".join(f"[{n}]" if i >= self.min_inputs else n
                         for i, n in enumerate(self.inputs)).replace(", [", "[, ")

    def infer(self, descriptor: dict, shapes) -> tuple:
        result = self.rule(descriptor, shapes)
        return result if len(result) == 3 else (result[0], result[1], self.since_minor)
