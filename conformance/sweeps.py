"""Shapes for the generated sweeps of the layers of Backend API 1.3 (conformance/generated_*.py).

The shapes and parameters of generated cases are fixed, so that a case id always means the same
case: they come from a generator seeded by the family's name, never from the run's seed (which
draws the values). Tensors stay small (a few hundred elements at most), so that hundreds of
cases run in well under a second on the reference backend.
"""
import hashlib
import random
from typing import List, Tuple

RANKS = range(1, 7)        # BACKEND_MAX_LAYER_RANK
Shape = List[int]


def fixed_rng(family: str) -> random.Random:
    """The generator of a family's shapes and parameters: the same on every run."""
    return random.Random(int.from_bytes(hashlib.sha256(family.encode()).digest()[:8], "little"))


def shape(rng: random.Random, rank: int, largest: int = 4, most: int = 256) -> Shape:
    """A shape of ``rank`` with dimensions from 1 to ``largest`` and at most ``most`` elements
    (later dimensions shrink to 1 once the budget is spent)."""
    dims, count = [], 1
    for _ in range(rank):
        d = rng.randint(1, largest)
        while count * d > most and d > 1:
            d -= 1
        dims.append(d)
        count *= d
    return dims


def broadcast_pair(rng: random.Random, ra: int, rb: int) -> Tuple[Shape, Shape]:
    """Two shapes of ranks ``ra`` and ``rb`` that broadcast, each with size-1 dimensions where the
    other is larger (both ways when their ranks allow), right-aligned as NumPy's."""
    out = shape(rng, max(ra, rb), largest=3, most=96)
    out = [max(d, 2) if i % 2 == 0 else d for i, d in enumerate(out)]
    a, b = out[len(out) - ra:], out[len(out) - rb:]
    for k in range(len(out)):
        ia, ib = k - (len(out) - ra), k - (len(out) - rb)
        choice = rng.random()
        if choice < 0.25 and ia >= 0:
            a[ia] = 1
        elif choice < 0.5 and ib >= 0:
            b[ib] = 1
    return a, b


def permutation(rng: random.Random, rank: int) -> List[int]:
    perm = list(range(rank))
    rng.shuffle(perm)
    return perm
