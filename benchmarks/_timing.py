"""Shared timing helpers: interleaved runs, medians, ratios."""
import statistics
import time


def interleaved(candidates, repeats=7, warmup=1):
    """Run each callable in turn, ``repeats`` rounds; returns name -> median seconds."""
    for _ in range(warmup):
        for fn in candidates.values():
            fn()
    samples = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def per_call(fn, calls):
    """A callable that runs ``fn`` ``calls`` times (for timing cheap calls in bulk)."""
    def run():
        for _ in range(calls):
            fn()
    return run
