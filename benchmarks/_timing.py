"""Shared timing helpers: interleaved runs, medians, ratios."""
import statistics
import time


def interleaved(candidates, repeats=7, warmup=1, inner=1, settle=0.0):
    """Rounds of each callable in turn, ``repeats`` rounds; returns name -> median seconds.

    Within a round each callable runs ``inner`` times back to back and the round keeps the
    median of those (steady-state cost). ``settle`` seconds of sleep before each block let the
    previous contender's threads go idle: OpenBLAS keeps its threads spinning for a while after
    a call returns, which takes the cores from whatever runs next."""
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    samples = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            if settle:
                time.sleep(settle)
            block = []
            for _ in range(inner):
                start = time.perf_counter()
                fn()
                block.append(time.perf_counter() - start)
            samples[name].append(statistics.median(block))
    return {name: statistics.median(values) for name, values in samples.items()}


def per_call(fn, calls):
    """A callable that runs ``fn`` ``calls`` times (for timing cheap calls in bulk)."""
    def run():
        for _ in range(calls):
            fn()
    return run
