"""Generated cases (LAYER-3) of the layers of Backend API 1.3 that move data: Concatenation
(one to four inputs, every axis, negative axes), Slice (negative starts, ends and steps, bounds
clamped from far outside, steps larger than the axis), Transpose (every rank, the default
reversal, identity and random permutations) and Pad (constant with a value, reflect, edge;
negative pads that crop). Their outputs must equal the reference exactly.
"""
from conformance.families import register_families
from conformance.layer_runs import spec
from conformance.sweeps import RANKS, fixed_rng, permutation, shape

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63


def _concatenation():
    rng = fixed_rng("concatenation")
    specs = []
    for rank in RANKS:
        base = shape(rng, rank, 3, most=48)
        for axis in range(rank):
            for count in (1, 2, 3, 4) if axis in (0, rank - 1) else (2, 3):
                inputs = []
                for _ in range(count):
                    one = list(base)
                    one[axis] = rng.randint(1, 3)
                    inputs.append(one)
                named = axis - rank if (axis + count) % 2 else axis  # negative half the time
                specs.append(spec("concat", len(specs), "Concatenation", inputs, {"axis": named}))
    return specs


def _slice_axis(rng, n):
    """One axis's (begin, end, step): negative values, clamping and negative steps, never
    empty."""
    from loader.layers.tensor import slice_bounds
    choices = [
        (0, INT64_MAX, 1), (-1, INT64_MIN, -1), (n - 1, -n - 5, -2), (-100, 100, 1),
        (100, -100, -1), (1, -1, 1), (-2, 0, -1), (0, n, n + 3), (n - 1, INT64_MIN, -(n + 3)),
    ]
    while True:
        begin, end, step = rng.choice(choices) if rng.random() < 0.6 else (
            rng.randint(-n - 2, n + 2), rng.randint(-n - 2, n + 2),
            rng.choice([-3, -2, -1, 1, 2, 3]))
        if slice_bounds(n, begin, end, step)[1] >= 1:
            return begin, end, step


def _slice():
    rng = fixed_rng("slice")
    specs = []
    for rank in RANKS:
        for _ in range(4):
            x = shape(rng, rank, 5, most=300)
            axes = [_slice_axis(rng, n) for n in x]
            descriptor = {"begin": [a[0] for a in axes], "end": [a[1] for a in axes],
                          "step": [a[2] for a in axes]}
            specs.append(spec("slice", len(specs), "Slice", [x], descriptor))
    # Every axis walked backwards, from the last element (clamped from past the end).
    for rank in RANKS:
        x = shape(rng, rank, 5, most=300)
        specs.append(spec("slice", len(specs), "Slice", [x], {
            "begin": [INT64_MAX] * rank, "end": [INT64_MIN] * rank, "step": [-1] * rank}))
    specs.append(spec("slice", len(specs), "Slice", [[7, 3]], None))  # the defaults: the whole
    return specs


def _transpose():
    rng = fixed_rng("transpose")
    specs = []
    for rank in RANKS:
        x = shape(rng, rank, 4, most=360)
        x = [max(d, 2) for d in x] if rank <= 4 else x
        perms = [None, list(range(rank))] + [permutation(rng, rank) for _ in range(3 + rank)]
        for perm in perms:
            specs.append(spec("transpose", len(specs), "Transpose", [x],
                              None if perm is None else {"perm": perm}))
    return specs


def _pad():
    rng = fixed_rng("pad")
    specs = []
    for rank in RANKS:
        for mode in ("constant", "reflect", "edge"):
            for crop in (False, True):
                x = [max(d, 3) for d in shape(rng, rank, 4, most=200)]
                begin, end = [], []
                for n in x:
                    low = -(n - 1) if crop else 0
                    high = n - 1 if mode == "reflect" else 3
                    begin.append(rng.randint(low, high))
                    end.append(rng.randint(low, high))
                    if mode != "constant" and begin[-1] < 0 < end[-1]:
                        end[-1] = min(end[-1], n + begin[-1] - 1)   # reflect inside what is kept
                    if mode != "constant" and end[-1] < 0 < begin[-1]:
                        begin[-1] = min(begin[-1], n + end[-1] - 1)
                    if n + begin[-1] + end[-1] < 1:
                        end[-1] = 1 - n - begin[-1]
                descriptor = {"pads": begin + end, "mode": mode}
                if mode == "constant":
                    descriptor["value"] = 1.5 if crop else 0.0
                specs.append(spec("pad", len(specs), "Pad", [x], descriptor))
    return specs


register_families({"concatenation": _concatenation, "slice": _slice, "transpose": _transpose,
                   "pad": _pad}, "LAYER-3")
