"""Concurrency (CONC-1): threads, each with its own instance and inputs, run every layer the
backend supports at once; every output is checked."""
import threading

from conformance.layer_runs import (Prepared, compare, expectation, first_supported_per_layer,
                                    inputs_for)
from conformance.registry import Failed, LayerMismatch, NotSupported, case

THREADS = 4


# A convolution long enough for threads to overlap inside the backend.
HEAVY_CONVOLUTION = {"id": "threads-convolution", "layer": "Convolution2d",
                     "inputs": [[1, 24, 24, 16], [16, 3, 3, 16], [16]],
                     "descriptor": {"padding": [1, 1, 1, 1]}}
HEAVY_REPEATS = 3  # the long convolution runs this many times in a row in each iteration


@case("concurrency.threads", "CONC-1")
def _concurrency(subject):
    """CONC-1: THREADS threads, each with its own instance and its own inputs, run every layer the
    backend supports at once; every output is checked."""
    backend = subject.backend()
    chosen = first_supported_per_layer(backend)
    if not chosen:
        raise NotSupported("the backend supports none of the kit's layer cases")
    if backend.is_layer_supported(HEAVY_CONVOLUTION["layer"], HEAVY_CONVOLUTION["inputs"],
                                  HEAVY_CONVOLUTION["descriptor"]):
        chosen.append(HEAVY_CONVOLUTION)
    specs = [dict(d, values="uniform", scale=d.get("scale", 1.0)) for d in chosen]
    iterations = 5
    barrier = threading.Barrier(THREADS)
    outputs = {}
    errors = []

    def work(thread):
        try:
            own = subject.backend()
            prepared = [Prepared(own, spec, inputs_for(spec, subject.seed,
                                                                  f"thread{thread}"))
                        for spec in specs]
            barrier.wait(timeout=30)
            for iteration in range(iterations):
                for p in prepared:
                    repeats = HEAVY_REPEATS if p.data["id"] == HEAVY_CONVOLUTION["id"] else 1
                    for repeat in range(repeats):
                        outputs[thread, iteration, p.data["id"], repeat] = (p.inputs, p.run().copy())
            for p in prepared:
                p.close()
        except Exception as error:  # reported below
            errors.append(f"thread {thread}: {type(error).__name__}: {error}")
            barrier.abort()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise Failed(f"{len(errors)} of {THREADS} threads failed; first: {errors[0]}")
    failures, expected, owners = [], {}, []
    for (thread, iteration, case_id, _), (inputs, out) in sorted(outputs.items()):
        spec = next(s for s in specs if s["id"] == case_id)
        if (thread, case_id) not in expected:
            expected[thread, case_id] = expectation(spec, inputs)
        try:
            compare(spec, inputs, out, subject.seed,
                              f"thread {thread} of {THREADS} running at once, iteration "
                              f"{iteration + 1}", expected[thread, case_id])
        except Failed as failure:
            failures.append(str(failure))
            owners.append(case_id)
    if failures:
        message = (f"{len(failures)} of {len(outputs)} outputs computed by {THREADS} threads at "
                   f"once are wrong (each thread had its own instance, workloads and inputs); "
                   f"first: {failures[0]}")
        if len(set(owners)) == 1:  # one layer case wrong: traced to it when it failed alone
            raise LayerMismatch(owners[0], message)
        raise Failed(message)
