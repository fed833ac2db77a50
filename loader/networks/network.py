"""Networks (docs/networks.md): a graph of layers built with ``add_*`` calls, its
serialized form, and the checks that make a malformed network fail before any backend is called.

A network holds named tensors: inputs, constants (float32 data, copied) and the one output of
each layer. Every layer's output shape is inferred when it is added (``loader.layers``), so a
shape or descriptor that does not fit is refused at ``add_layer``, naming the layer.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from loader import layers as _layers
from loader.errors import InvalidLayerError, NetworkError, UnknownLayerError


@dataclass(frozen=True)
class Tensor:
    """A handle on a tensor of a network: an input, a constant or a layer's output."""

    name: str
    shape: Tuple[int, ...]
    kind: str                   # "input", "constant" or "layer"


@dataclass(frozen=True)
class Layer:
    """A layer as added: its inputs by name, the descriptor as given (JSON-safe), and what
    ``loader.layers`` made of them (output shape, C descriptor fields)."""

    name: str
    type: str
    inputs: Tuple[str, ...]
    descriptor: dict
    prepared: object            # loader.layers.PreparedLayer


def _json_safe(value, where):
    """``value`` as plain JSON data (lists, numbers, strings, bools, None, dicts of those)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_json_safe(v, where) for v in (value.tolist() if isinstance(value, np.ndarray)
                                               else value)]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise NetworkError(f"{where}: descriptor keys must be strings")
        return {k: _json_safe(v, where) for k, v in value.items()}
    raise NetworkError(f"{where}: descriptor value {value!r} is not plain data")


def _name(value, what) -> str:
    if not isinstance(value, str) or not value:
        raise NetworkError(f"{what} name must be a non-empty string, not {value!r}")
    return value


def _shape(value, what) -> Tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value):
        raise NetworkError(f"{what}: shape must be a list of integers, not {value!r}")
    shape = tuple(int(v) for v in value)
    if len(shape) > _layers.MAX_DIMENSIONS or any(v < 1 for v in shape):
        raise NetworkError(f"{what}: shape {list(shape)} must have at most "
                           f"{_layers.MAX_DIMENSIONS} dimensions, each at least 1")
    count = 1
    for v in shape:
        count *= v
    if count > _layers.MAX_ELEMENTS:
        raise NetworkError(f"{what}: shape {list(shape)} has {count} elements, more than 2^40")
    return shape


class Network:
    """A network of layers. Build it with ``add_input``, ``add_constant``, ``add_layer`` and
    ``add_output``; load it with ``Runtime.load_network``."""

    def __init__(self):
        self._tensors: Dict[str, Tensor] = {}           # every input, constant and layer output
        self._inputs: List[str] = []
        self._constants: Dict[str, np.ndarray] = {}
        self._layers: List[Layer] = []
        self._outputs: Dict[str, str] = {}              # output name -> tensor name
        self._unnamed: Dict[str, int] = {}              # layer type -> last number given

    # -- building ----------------------------------------------------------------------------

    def _claim(self, name, what) -> str:
        name = _name(name, what)
        if name in self._tensors:
            raise NetworkError(f"duplicate name {name!r}: names of inputs, constants and layers "
                               f"are unique together")
        return name

    def _tensor(self, value, where) -> Tensor:
        name = value.name if isinstance(value, Tensor) else value
        tensor = self._tensors.get(name) if isinstance(name, str) else None
        if tensor is None or (isinstance(value, Tensor) and value != tensor):
            raise NetworkError(f"{where}: unknown tensor {name!r} (not an input, constant or "
                               f"layer of this network)")
        return tensor

    def add_input(self, name, shape) -> Tensor:
        """A network input of this shape (float32), fed at ``execute``."""
        name = self._claim(name, "input")
        tensor = Tensor(name, _shape(shape, f"input {name!r}"), "input")
        self._tensors[name] = tensor
        self._inputs.append(name)
        return tensor

    def add_constant(self, name, data) -> Tensor:
        """A constant tensor; ``data`` (a float32 array) is copied."""
        return self._add_constant(name, data, copy=True)

    def _add_constant(self, name, data, copy) -> Tensor:
        """``add_constant``; without ``copy`` (for an importer that owns ``data`` and never
        changes it) a read-only, C-contiguous, native float32 array is kept as it is."""
        name = self._claim(name, "constant")
        if not isinstance(data, np.ndarray) or data.dtype != np.float32:
            raise NetworkError(f"constant {name!r} must be a float32 numpy.ndarray, not "
                               f"{getattr(data, 'dtype', type(data).__name__)}")
        if copy or data.flags.writeable or not data.flags.c_contiguous or \
                not data.dtype.isnative:
            array = np.array(data, dtype=np.float32, order="C", copy=True)
            array.setflags(write=False)
        else:
            array = data
        tensor = Tensor(name, _shape(list(array.shape), f"constant {name!r}"), "constant")
        self._tensors[name] = tensor
        self._constants[name] = array
        return tensor

    def add_layer(self, type, inputs, descriptor=None, name=None) -> Tensor:
        """A layer of ``type`` (section 9) reading ``inputs`` (tensor handles or names); returns
        its output tensor."""
        layer_type = _layers.layer_type(type)       # UnknownLayerError
        if name is None:
            count = self._unnamed.get(layer_type.name, 0) + 1
            name = f"{layer_type.name}_{count}"
            while name in self._tensors:
                count += 1
                name = f"{layer_type.name}_{count}"
            self._unnamed[layer_type.name] = count
        name = self._claim(name, "layer")
        where = f"layer {name!r} ({layer_type.name})"
        if not isinstance(inputs, (list, tuple)):
            raise NetworkError(f"{where}: inputs must be a list of tensors")
        sources = [self._tensor(value, where) for value in inputs]
        if descriptor is not None and not isinstance(descriptor, dict):
            raise NetworkError(f"{where}: the descriptor must be a dict")
        safe = _json_safe(descriptor or {}, where)
        try:
            prepared = _layers.prepare(layer_type.name, [t.shape for t in sources], safe)
        except UnknownLayerError:
            raise
        except (InvalidLayerError, TypeError, ValueError) as error:
            raise NetworkError(f"{where}: {error}") from None
        tensor = Tensor(name, prepared.output_shape, "layer")
        self._layers.append(Layer(name, layer_type.name, tuple(t.name for t in sources), safe,
                                  prepared))
        self._tensors[name] = tensor
        return tensor

    def add_output(self, tensor, name=None) -> None:
        """Expose a layer's output or an input as the network output ``name`` (default: the
        tensor's name)."""
        source = self._tensor(tensor, "output")
        if source.kind == "constant":
            raise NetworkError(f"output: {source.name!r} is a constant; outputs expose a layer "
                               f"or an input")
        name = _name(source.name if name is None else name, "output")
        if name in self._outputs:
            raise NetworkError(f"duplicate output name {name!r}")
        self._outputs[name] = source.name

    # -- reading -----------------------------------------------------------------------------

    @property
    def inputs(self) -> Dict[str, Tuple[int, ...]]:
        return {name: self._tensors[name].shape for name in self._inputs}

    @property
    def outputs(self) -> Dict[str, str]:
        """Output name -> name of the tensor it exposes."""
        return dict(self._outputs)

    @property
    def layers(self) -> List[Layer]:
        return list(self._layers)

    @property
    def constants(self) -> Dict[str, np.ndarray]:
        return dict(self._constants)

    def tensor(self, name) -> Tensor:
        return self._tensor(name, "tensor")

    def check(self) -> None:
        """What cannot be known at ``add_*`` time: a network with no layer or no output."""
        if not self._outputs:
            raise NetworkError("the network has no output (add_output)")
        if not self._layers:
            raise NetworkError("the network has no layer")

    def __repr__(self):
        return (f"<Network inputs={list(self._inputs)} layers={len(self._layers)} "
                f"outputs={list(self._outputs)}>")

    # -- serialized form (loader.networks.serialized) -----------------------------------------

    def to_dict(self) -> dict:
        """JSON-safe plain data; ``Network.from_dict(net.to_dict()).to_dict() == net.to_dict()``."""
        from loader.networks import serialized
        return serialized.to_dict(self)

    @classmethod
    def from_dict(cls, data, constants: Optional[Dict[str, np.ndarray]] = None) -> "Network":
        """The network ``to_dict`` describes. ``constants`` supplies each constant whose
        ``data`` is a key into it (the form ``save`` writes)."""
        from loader.networks import serialized
        return serialized.from_dict(cls(), data, constants)

    def save(self, path) -> None:
        """Write the network to ``path`` (``.json``, ``.yaml`` or ``.yml``), its constants to a
        ``.npz`` beside it (same stem)."""
        from loader.networks import serialized
        serialized.save(self, path)

    @classmethod
    def load(cls, path) -> "Network":
        """The network ``save`` wrote (or any file holding ``to_dict``'s form)."""
        from loader.networks import serialized
        return serialized.load(cls(), path)
