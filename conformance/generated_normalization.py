"""Generated cases (LAYER-3) of the layers of Backend API 1.3 that reduce or normalize along
axes, and MatMul: Softmax over any axis and as LogSoftmax, every Reduce function with keep_dims
both ways over single, several, negative and all axes, BatchNormalization, LayerNormalization
from several axes (with scale and bias broadcast to the normalized axes), and MatMul with 1-D
operands, broadcast batches and reduction lengths around SIMD boundaries.
"""
from conformance.families import register_families
from conformance.layer_runs import spec
from conformance.sweeps import RANKS, fixed_rng, shape

#: Reduce functions and their values: all negative for max (a start at 0 shows), near 1 in
#: magnitude for prod (a long product neither vanishes nor overflows), large for log-sum-exp.
REDUCE_VALUES = {
    "mean": ("uniform", 1.0), "sum": ("uniform", 1.0), "max": ("negative", 1.0),
    "min": ("zeros", 1.0), "prod": ("near-one", 1.0), "l1": ("uniform", 1.0),
    "l2": ("uniform", 1.0), "sum_square": ("uniform", 2.0), "log_sum_exp": ("large", 50.0),
}


def _axis_softmax():
    rng = fixed_rng("axis-softmax")
    specs = []
    for rank in RANKS:
        x = shape(rng, rank, 6, most=400)
        for axis in range(rank):
            named = axis - rank if axis % 2 else axis
            for log in (False, True):
                beta = rng.choice([1.0, 0.5, -1.0, 2.0])
                specs.append(spec("softmax13", len(specs), "Softmax", [x],
                                  {"axis": named, "log": log, "beta": beta}, scale=4.0))
    for log in (False, True):  # large values, where exp overflows unless shifted
        specs.append(spec("softmax13", len(specs), "Softmax", [[3, 8, 2]],
                          {"axis": 1, "log": log}, "large", 1e3))
        specs.append(spec("softmax13", len(specs), "Softmax", [[65]], {"log": log}, scale=30.0))
    return specs


def _reduce():
    rng = fixed_rng("reduce")
    specs = []
    for number, (function, (values, scale)) in enumerate(REDUCE_VALUES.items()):
        for rank in (1 + number % 6, 1 + (number + 2) % 6, 1 + (number + 4) % 6):
            x = shape(rng, rank, 5, most=300)
            single = rng.randrange(rank)
            several = sorted(rng.sample(range(rank), rng.randint(1, rank)))
            for axes in (None, [single - rank], several):
                for keep in (True, False):
                    specs.append(spec("reduce", len(specs), "Reduce", [x],
                                      {"function": function, "axes": axes, "keep_dims": keep},
                                      values, scale))
    return specs


def _batch_normalization():
    rng = fixed_rng("batch-normalization")
    specs = []
    for rank in RANKS:
        for epsilon in (1e-5, 0.1):
            x = shape(rng, rank, 5, most=300)
            c = [x[-1]]
            specs.append(spec("batchnorm", len(specs), "BatchNormalization", [x, c, c, c, c],
                              {"epsilon": epsilon},
                              ["uniform", "uniform", "positive", "uniform", "uniform"],
                              [3.0, 1.0, 2.0, 1.0, 1.0]))
    return specs


def _layer_normalization():
    rng = fixed_rng("layer-normalization")
    specs = []
    for rank in RANKS:
        x = shape(rng, rank, 5, most=300)
        x[-1] = max(x[-1], 2)
        for axis in range(rank):
            normalized = x[axis:]
            scale_shape = list(normalized) if axis % 2 == 0 else \
                [1] * (len(normalized) - 1) + normalized[-1:]
            bias = axis % 3 != 1
            inputs = [x, scale_shape] + ([normalized[-1:]] if bias else [])
            named = axis - rank if axis % 2 else axis
            specs.append(spec("layernorm", len(specs), "LayerNormalization", inputs,
                              {"axis": named, "epsilon": rng.choice([1e-5, 1e-3])},
                              ["uniform"] * len(inputs), [2.0] + [1.0] * (len(inputs) - 1)))
    for n in (2, 3, 4):  # few values normalized: the biased variance differs most here
        specs.append(spec("layernorm", len(specs), "LayerNormalization", [[5, n], [n]],
                          {"axis": -1}, ["uniform", "uniform"]))
    return specs


def _mat_mul():
    rng = fixed_rng("matmul")
    specs = []

    def add(a, b):
        specs.append(spec("matmul", len(specs), "MatMul", [a, b]))
    for k in (1, 3, 7, 8, 9, 16, 17, 33, 65, 257):
        add([k], [k])
        add([k], [k, 3])
        add([2, k], [k])
        add([3, k], [k, 4])
    for a, b in (([2, 1, 3, 4], [1, 5, 4, 2]), ([3, 4], [2, 2, 4, 5]), ([2, 2, 3, 4], [4, 3]),
                 ([5], [2, 3, 5, 2]), ([2, 3, 5], [5]), ([1, 2, 1, 2, 3, 4], [2, 1, 2, 1, 4, 3]),
                 ([4, 1, 2, 3], [3, 3, 2]), ([2, 3, 1, 2, 2], [1, 2, 2])):
        add(a, b)
    for rank_a in RANKS:
        for rank_b in RANKS:
            if rank_a + rank_b > 7 or rank_a < 2 or rank_b < 2:
                continue
            m, k, n = rng.randint(1, 4), rng.randint(1, 9), rng.randint(1, 4)
            batch = shape(rng, max(rank_a, rank_b) - 2, 3, most=12)
            a = [d if rng.random() < 0.6 else 1 for d in batch[len(batch) - (rank_a - 2):]]
            b = [d if rng.random() < 0.6 else 1 for d in batch[len(batch) - (rank_b - 2):]]
            add(a + [m, k], b + [k, n])
    return specs


register_families({"axis-softmax": _axis_softmax, "reduce": _reduce,
                   "batch-normalization": _batch_normalization,
                   "layer-normalization": _layer_normalization, "matmul": _mat_mul}, "LAYER-3")
