"""The conversion context: how a converter adds layers and constants to the network and gets a
value into the physical layout a layer needs. Transposes the model itself asks for change only
the bookkeeping (``Value.perm``); a Transpose layer is added only where a layer needs a layout the
value does not have, and a change that moves only axes of extent 1 is a Reshape."""
import weakref
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from loader.errors import NetworkError
from loader.onnx.errors import ModelError
from loader.onnx.values import Unsupported, Value, inverse

NHWC = (0, 2, 3, 1)            # the physical layout of a logical NCHW tensor
MAX_CONSTANT_BYTES = 8 << 30


class Builder:
    def __init__(self, network, initializers=None, where="the model"):
        self.net = network
        self.initializers = initializers or {}   # ONNX name -> TensorProto, read at first use
        self.where = where
        self.taken = set()
        self.origin: Dict[str, str] = {}       # layer name -> the ONNX node it came from
        self.node_name = ""                     # the node being converted
        # id of an array made a constant -> (the array, weakly: an id is reused once its array
        # is gone, and a strong reference would hold every weight's source until the end of the
        # import, a second copy of the weights at the peak), its network constant
        self._constants: Dict[int, Tuple[weakref.ref, str]] = {}
        self.values: Dict[str, Value] = {}      # every value converted so far, by ONNX name
        self.readers: Dict[str, list] = {}      # ONNX name -> the nodes that read it
        self.graph_outputs = set()
        self.absorbed: Dict[str, Value] = {}    # outputs of nodes another converter folded in
        self.folded_pads: Dict[str, list] = {}  # a zero Pad's output -> [top, bottom, left, right]

    def value(self, name: str) -> Value:
        """The value of an ONNX name: converted so far, or an initializer read now."""
        value = self.values.get(name)
        if value is None and name in self.initializers:
            from loader.onnx.model import tensor_to_array
            value = Value.constant(tensor_to_array(self.initializers[name],
                                                   f"{self.where}: initializer {name!r}"))
            self.values[name] = value
        if value is None:
            raise KeyError(name)
        return value

    def constant_of(self, name: str):
        """The folded contents of an ONNX value converted so far (or an initializer), or None."""
        try:
            value = self.value(name)
        except KeyError:
            return None
        return value.const if value.is_const else None

    # -- names -------------------------------------------------------------------------------

    def unique(self, base: str) -> str:
        base = base or "value"
        name, count = base, 1
        while name in self.taken:
            count += 1
            name = f"{base}_{count}"
        self.taken.add(name)
        return name

    # -- layers and constants -----------------------------------------------------------------

    def layer(self, kind: str, inputs: Sequence[str], descriptor: Optional[dict] = None,
              suffix: str = "") -> str:
        """Add a layer reading network tensors ``inputs``; returns its output tensor."""
        name = self.unique(self.node_name + suffix)
        try:
            self.net.add_layer(kind, list(inputs), descriptor or {}, name=name)
        except NetworkError as error:
            raise Unsupported(str(error)) from None
        self.origin[name] = self.node_name
        return name

    def constant(self, array, base: str = "") -> str:
        """A network constant holding ``array`` (converted to float32)."""
        array = np.asarray(array)
        key = id(array)
        known = self._constants.get(key)
        if known is not None and known[0]() is array:
            return known[1]
        if array.dtype.kind not in "fiub":
            raise Unsupported(f"a constant of type {array.dtype} cannot feed a layer")
        if array.size * 4 > MAX_CONSTANT_BYTES:
            raise Unsupported(f"a constant of {array.size} elements is too large")
        if array.dtype == np.float32 and array.flags.c_contiguous:
            data = array            # the common case: the model's own bytes, no copy
        else:
            data = np.ascontiguousarray(array, dtype=np.float32)
            if array.dtype.kind == "f" and np.any(np.isfinite(array) & ~np.isfinite(data)):
                raise Unsupported("a constant holds values beyond float32's range")
        if data.flags.writeable:
            data = data if data is not array else data.copy()
            data.setflags(write=False)
        name = self.unique((base or self.node_name) + "/const")
        self.net._add_constant(name, data, copy=False)
        self._constants[key] = (weakref.ref(array), name)
        return name

    # -- layouts ------------------------------------------------------------------------------

    def physical(self, value: Value, perm: Iterable[int]) -> str:
        """The network tensor holding ``value`` with physical axis i = logical axis perm[i]."""
        perm = tuple(perm)
        if len(perm) != value.rank:
            raise Unsupported(f"internal: layout {perm} for rank {value.rank}")
        if value.is_const:
            return self.constant(np.transpose(value.const, perm) if value.rank else value.const)
        if value.layout == perm:
            return value.tensor
        # out axis i holds logical perm[i], which the current tensor keeps at axis inv[perm[i]]
        current = inverse(value.layout)
        order = [current[p] for p in perm]
        physical_shape = [value.shape[p] for p in value.layout]
        if _only_unit_axes_move(order, physical_shape):
            return self.layer("Reshape", [value.tensor],
                              {"shape": [value.shape[p] for p in perm]}, "/relayout")
        return self.layer("Transpose", [value.tensor], {"perm": list(order)}, "/relayout")

    def logical(self, value: Value) -> str:
        return self.physical(value, range(value.rank))

    def in_logical_order(self, value: Value) -> str:
        """A float32 tensor whose elements, in memory order, are the value's in logical order:
        the value's own tensor when its layout moves only axes of extent 1 (a reshape of it
        then needs no transpose), else the logical one."""
        if not value.is_const and value.dtype == np.float32 and _only_unit_axes_move(
                list(inverse(value.layout)), [value.shape[p] for p in value.layout]):
            return value.tensor
        return self.float_tensor(value)

    def nhwc(self, value: Value) -> str:
        if value.rank != 4:
            raise Unsupported(f"a 4-D NCHW input is needed, got rank {value.rank}")
        return self.physical(value, NHWC)

    def float_tensor(self, value: Value, perm=None) -> str:
        """A float32 tensor (constant or run-time) in layout ``perm`` (default logical)."""
        if not value.is_const and value.dtype != np.float32:
            raise Unsupported(f"run-time tensors of type {value.dtype} are not supported")
        return self.physical(value, perm if perm is not None else range(value.rank))


def _only_unit_axes_move(order, physical_shape) -> bool:
    """Whether permuting axes by ``order`` keeps every axis of extent > 1 in its relative order
    (then the data does not move and a reshape is enough)."""
    big = [axis for axis in order if physical_shape[axis] > 1]
    return big == sorted(big)


def require_const(value: Optional[Value], where: str, what: str) -> np.ndarray:
    if value is None or not value.is_const:
        raise Unsupported(f"{what} must be a constant (known when the model is loaded)")
    return value.const


def ints_of(value: Optional[Value], where: str, what: str) -> List[int]:
    array = require_const(value, where, what)
    if array.dtype.kind not in "iu" and not (array.dtype.kind == "f" and
                                               np.all(array == np.round(array))):
        raise ModelError(f"{where}: {what} must hold integers, got {array.dtype}")
    if array.ndim > 1:
        raise ModelError(f"{where}: {what} must be a 1-D list, got shape {list(array.shape)}")
    return [int(v) for v in np.atleast_1d(array)]
