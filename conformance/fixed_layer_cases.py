"""Layer cases (LAYER-1, and LAYER-3 for what Backend API 1.3 added): one per entry of
layer_cases.yaml, run step by step and compared with the float64 reference."""
from conformance.families import minor_needed
from conformance.layer_runs import compare, execute, layer_cases, layer_inputs
from conformance.registry import Failed, NotSupported, register_layer_case


def _run_layer(data):
    def run(subject):
        import loader
        subject.working_on(data)
        backend = subject.backend()
        inputs = layer_inputs(data)
        if minor_needed(data) > backend.version.minor:
            raise NotSupported(f"the backend is built against Backend API {backend.version}; "
                               f"{data['id']} needs 1.{minor_needed(data)}")
        support = backend.is_layer_supported(data["layer"], inputs, data.get("descriptor"))
        if not support:
            raise NotSupported(support.reason)
        try:
            [out] = execute(backend, data, inputs)
        except loader.BackendError as error:
            raise Failed(f"{data['id']}: {error}")
        compare(data, inputs, out)
    return run


for _data in layer_cases():
    register_layer_case(_data, _run_layer(_data), "LAYER-3" if minor_needed(_data) >= 3 else "LAYER-1")
