"""What the importer knows about each value of a model: its logical (ONNX) shape and data type,
and either its folded contents (a constant) or the network tensor that will hold it at run time,
in a physical layout that may differ from the logical one (``perm``: physical axis i holds
logical axis perm[i]). Converters read values and the node's attributes; they raise Unsupported
for what the product cannot express."""
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from loader.onnx.errors import ModelError


class Unsupported(Exception):
    """This node cannot be expressed (the reason says why); collected, never raised to users."""


@dataclass(frozen=True)
class Value:
    shape: Tuple[int, ...]
    dtype: np.dtype
    const: Optional[np.ndarray] = None       # the folded contents, in logical layout
    tensor: Optional[str] = None             # the network tensor (float32) holding it
    perm: Optional[Tuple[int, ...]] = None   # layout of ``tensor``; None: logical

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def layout(self) -> Tuple[int, ...]:
        return self.perm if self.perm is not None else tuple(range(self.rank))

    @staticmethod
    def constant(array) -> "Value":
        array = np.asarray(array)
        return Value(tuple(int(v) for v in array.shape), array.dtype, const=array)

    @staticmethod
    def runtime(tensor: str, shape, perm=None) -> "Value":
        shape = tuple(int(v) for v in shape)
        if perm is not None and tuple(perm) == tuple(range(len(shape))):
            perm = None
        return Value(shape, np.dtype(np.float32), tensor=tensor,
                     perm=None if perm is None else tuple(perm))


def inverse(perm):
    result = [0] * len(perm)
    for i, p in enumerate(perm):
        result[p] = i
    return tuple(result)


# -- attributes ---------------------------------------------------------------------------------

_TYPES = {1: "float", 2: "int", 3: "string", 4: "tensor", 5: "graph", 6: "floats", 7: "ints",
          8: "strings", 9: "tensors", 10: "graphs"}


class Attributes:
    """A node's attributes, each read with the type the operator defines for it: a wrong type
    is a ModelError naming the node and the attribute."""

    def __init__(self, node, where):
        self.where = where
        self.by_name = {}
        for attribute in node.attribute:
            if attribute.name in self.by_name:
                raise ModelError(f"{where}: attribute {attribute.name!r} given twice")
            self.by_name[attribute.name] = attribute
        self.read = set()

    def names(self):
        return set(self.by_name)

    def _get(self, name, kind):
        attribute = self.by_name.get(name)
        if attribute is None:
            return None
        self.read.add(name)
        actual = _TYPES.get(attribute.type)
        if actual is None:      # a model from before the type field: take the field that is set
            actual = kind
        if actual != kind:
            raise ModelError(f"{self.where}: attribute {name!r} is of type {actual}, "
                             f"{kind} expected")
        return attribute

    def int(self, name, default=None):
        attribute = self._get(name, "int")
        return default if attribute is None else int(attribute.i)

    def float(self, name, default=None):
        attribute = self._get(name, "float")
        return default if attribute is None else float(attribute.f)

    def string(self, name, default=None):
        attribute = self._get(name, "string")
        if attribute is None:
            return default
        try:
            return attribute.s.decode("utf-8")
        except UnicodeDecodeError:
            raise ModelError(f"{self.where}: attribute {name!r} is not UTF-8") from None

    def ints(self, name, default=None):
        attribute = self._get(name, "ints")
        if attribute is None:
            return default
        if len(attribute.ints) > 4096:
            raise ModelError(f"{self.where}: attribute {name!r} lists {len(attribute.ints)} "
                             f"values")
        return [int(v) for v in attribute.ints]

    def floats(self, name, default=None):
        attribute = self._get(name, "floats")
        if attribute is None:
            return default
        if len(attribute.floats) > 4096:
            raise ModelError(f"{self.where}: attribute {name!r} lists {len(attribute.floats)} "
                             f"values")
        return [float(v) for v in attribute.floats]

    def tensor(self, name):
        attribute = self._get(name, "tensor")
        return None if attribute is None else attribute.t

    def ignore(self, *names):
        """Attributes that have no effect in this use (the converter says so explicitly)."""
        self.read.update(names)
