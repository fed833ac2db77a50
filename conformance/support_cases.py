"""Support cases: what a backend claims it creates (SUP-1), what it must refuse it refuses with a
reason (SUP-2), and the same question always gets the same answer (SUP-3)."""
import numpy as np

from conformance.layer_runs import layer_cases, layer_inputs, malformed_layers
from conformance.registry import Failed, case


@case("support.creatable", "SUP-1")
def _support_creatable(subject):
    import loader
    backend = subject.backend()
    factory = backend.create_workload_factory()
    for data in layer_cases():
        subject.working_on(data)
        inputs = layer_inputs(data)
        if not backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")):
            continue
        try:
            factory.create_workload(data["layer"], inputs, data.get("descriptor")).close()
        except loader.BackendError as error:
            raise Failed(f"{data['id']}: supported, but create_workload failed: {error}")


@case("support.clean-refusal", "SUP-2")
def _support_clean_refusal(subject):
    import loader
    backend = subject.backend()
    factory = backend.create_workload_factory()
    for what, layer in malformed_layers():
        answer = backend.query_layer_support(layer)
        if answer:
            raise Failed(f"{what} was declared supported")
        if not answer.reason:
            raise Failed(f"{what} was refused without a reason")
        try:
            factory.create_workload_prepared(layer).close()
        except loader.BackendStatusError:
            continue
        raise Failed(f"{what} was refused by is_layer_supported but created")


@case("support.deterministic", "SUP-3")
def _support_deterministic(subject):
    backend = subject.backend()
    for data in layer_cases():
        subject.working_on(data)
        inputs = [np.empty(s, dtype=np.float32) for s in data["inputs"]]
        answers = {tuple(backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")))
                   for _ in range(3)}
        answers.add(tuple(subject.backend().is_layer_supported(data["layer"], inputs,
                                                               data.get("descriptor"))))
        if len(answers) > 1:
            raise Failed(f"{data['id']}: different answers to the same question: {sorted(answers)}")
    _, problem = malformed_layers()[0]
    if len({tuple(backend.query_layer_support(problem)) for _ in range(3)}) > 1:
        raise Failed("different answers to the same malformed layer")
