"""Seeded networks for the NET cases, built from what the backend under test says it runs: each
layer is asked for (``is_layer_supported`` on its shapes) before it is added, and a network is
built from whatever the backend accepts, so that a backend is only ever judged on its own
claims.

``Builder`` adds one layer at a time; ``chain``, ``side_outputs`` and ``broadcasts`` are the
generated networks of conformance/network_generated.py.
"""
from typing import List, Optional, Tuple

import numpy as np

from conformance.network_runs import supported

BINARY = ("Addition", "Multiplication", "Subtraction", "Division", "Maximum", "Minimum")


class Builder:
    """A loader.Network under construction for ``backend``, with seeded constants."""

    def __init__(self, backend, seed: int):
        import loader
        self.backend = backend
        self.rng = np.random.default_rng(seed)
        self.net = loader.Network()
        self._count = 0
        self._pending_scale = None      # the next scale undoes the last one (values stay O(1))
        self._sign = 1.0                # additive constants alternate in sign (the same)

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def shape(self, tensor) -> Tuple[int, ...]:
        return tuple(self.net.tensor(tensor.name).shape)

    def constant(self, values) -> object:
        return self.net.add_constant(self.name("c"), np.asarray(values, np.float32))

    def layer(self, layer: str, inputs, descriptor=None, shapes=None):
        """The output of ``layer`` on ``inputs`` (tensors, or arrays made constants), or None
        when the backend does not run it."""
        shapes = shapes or [self.shape(t) if not isinstance(t, np.ndarray) else t.shape
                            for t in inputs]
        if not supported(self.backend, layer, shapes, descriptor):
            return None
        tensors = [self.constant(t) if isinstance(t, np.ndarray) else t for t in inputs]
        return self.net.add_layer(layer, tensors, descriptor, name=self.name("l"))

    def operand(self, shape, rank: Optional[int] = None, ones: float = 0.0):
        """A shape that broadcasts to ``shape``: its last ``rank`` axes, each kept or (with
        probability ``ones``) made 1."""
        rank = len(shape) if rank is None else rank
        tail = list(shape[len(shape) - rank:])
        return tuple(1 if self.rng.random() < ones else d for d in tail)

    def offset(self, shape):
        """Constants of magnitude 0.25 to 0.75 whose sign alternates from one to the next, so a
        long sum stays small and leaving any one out moves the result by at least 0.25."""
        self._sign = -self._sign
        return (self._sign * self.rng.uniform(0.25, 0.75, shape)).astype(np.float32)

    def scale(self, shape):
        """Positive factors near 1; every second one undoes the one before (to 3%)."""
        if self._pending_scale is not None and self._pending_scale.shape == tuple(shape):
            values = (1.0 / self._pending_scale) * self.rng.uniform(0.97, 1.03, shape)
            self._pending_scale = None
        else:
            values = self.rng.uniform(0.8, 1.25, shape)
            self._pending_scale = values
        return values.astype(np.float32)

    def step(self, tensor):
        """One element-wise layer after ``tensor`` that keeps what it got (every layer moves
        the values, none loses them): an offset or a scale from a constant of some rank, an
        activation that is the identity on the values' range, a negation; relu as a last
        resort."""
        shape = self.shape(tensor)
        rank = int(self.rng.integers(1, len(shape) + 1))
        options = [
            lambda: self.layer("Addition", [tensor, self.offset(self.operand(shape, rank, 0.3))]),
            lambda: self.layer("Subtraction", [tensor, self.offset(self.operand(shape, rank, 0.3))]),
            lambda: self.layer("Multiplication", [self.scale(self.operand(shape, rank, 0.3)), tensor]),
            lambda: self.layer("Activation", [tensor], {"function": "bounded_relu", "a": 50.0,
                                                        "b": -50.0}),
            lambda: self.layer("Activation", [tensor], {"function": "leaky_relu", "a": 0.9}),
            lambda: self.layer("ElementwiseUnary", [tensor], {"function": "neg"}),
        ]
        for k in self.rng.permutation(len(options)):
            out = options[k]()
            if out is not None:
                return out
        return self.layer("Activation", [tensor], {"function": "relu"})

    def network(self, outputs: List[Tuple[str, object]]):
        for name, tensor in outputs:
            self.net.add_output(tensor, name)
        return self.net


def chain(backend, length: int, shape, seed: int):
    """``length`` element-wise layers in a row: one sub-graph that a backend's optimizer may
    take whole (None when the backend runs none of them)."""
    b = Builder(backend, seed)
    t = b.net.add_input("x", shape)
    for _ in range(length):
        out = b.step(t)
        if out is None:
            return None
        t = out
    return b.network([("y", t)])


def side_outputs(backend, shape, seed: int):
    """Tensors read both by later layers of the sub-graph and outside it (network outputs), a
    tensor read again many layers later, a fan-out whose branches join, and, on images, a
    convolution whose output is such a tensor (a fused step must still write it)."""
    b = Builder(backend, seed)
    x = b.net.add_input("x", shape)
    outputs = []
    first = b.step(x)
    if first is None:
        return None
    outputs.append(("first", first))
    t = first
    if len(shape) == 4:
        w = b.rng.uniform(-0.3, 0.3, (shape[3], 3, 3, shape[3])).astype(np.float32)
        conv = b.layer("Convolution2d", [t, w, np.zeros(shape[3], np.float32)], {"padding": 1})
        if conv is not None:
            outputs.append(("conv", conv))
            t = b.layer("Activation", [conv], {"function": "relu"}) or conv
    for k in range(6):
        t = b.step(t)
        if k == 2:
            outputs.append(("middle", t))
            branch = b.step(t)
    joined = b.layer("Addition", [t, first])        # `first` read again, far later
    if joined is not None:
        t = joined
    fork = b.layer("Maximum", [branch, t]) or b.layer("Addition", [branch, t])
    outputs.append(("y", t))
    outputs.append(("fork", fork if fork is not None else branch))
    return b.network(outputs)


def broadcasts(backend, shape, seed: int):
    """For every binary layer the backend runs, an operand of every lower rank (and of the same
    rank), each axis kept or made 1, on either side, constant or a network input; the values
    stay O(1). None when the backend runs no broadcast at all."""
    b = Builder(backend, seed)
    t = b.net.add_input("x", shape)
    added = 0
    for rank in range(1, len(shape) + 1):
        for layer in BINARY:
            other = b.operand(shape, rank, 0.4)
            if layer in ("Addition", "Subtraction"):
                values = b.offset(other)
            elif layer in ("Multiplication", "Division"):
                values = b.scale(other)
            else:
                values = b.rng.uniform(-0.5, 0.5, other).astype(np.float32)
            as_input = (rank + BINARY.index(layer)) % 4 == 0 and layer != "Division"
            first = (rank + BINARY.index(layer)) % 2 == 0 and layer != "Division"
            shapes = [other, shape] if first else [shape, other]
            if not supported(backend, layer, shapes):
                continue
            operand = b.net.add_input(b.name("in"), other) if as_input else b.constant(values)
            pair = [operand, t] if first else [t, operand]
            t = b.net.add_layer(layer, pair, name=b.name("l"))
            added += 1
    if not added:
        return None
    return b.network([("y", t)])

