"""Raw-interface cases (SUP-2) at the boundary of the types: layer-type values just past the
last and at the top of uint32, data types other than float32 on an input and on the output, and
the malformed layers of the support cases, each put to is_layer_supported and create_workload
directly. Both must refuse, with the backend's own reason."""
from conformance.layer_runs import malformed_layers
from conformance.raw import Layer, Raw, first_of_each_layer, prepare, refuse_everywhere, relu_layer
from conformance.raw_structs import LAYER_TYPE_COUNT, LAYER_TYPE_COUNT_1_3, UINT32_MAX
from conformance.registry import Failed, NotSupported, case


@case("raw.layer-type-boundaries", "SUP-2", tier="full")
def _raw_layer_types(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        # The layer types of the backend's version: 1.3 added 17 after the 9 of 1.1.
        count = LAYER_TYPE_COUNT_1_3 if raw.instance(instance).api_minor >= 3 else LAYER_TYPE_COUNT
        factory = raw.factory(instance)
        problems = []
        try:
            for value in (count, count + 1, UINT32_MAX):
                layer = relu_layer()
                layer.description.layer_type = value
                problems += refuse_everywhere(raw, instance, factory, layer,
                                               f"layer type {value} (there are {count})")
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("; ".join(problems))


@case("raw.data-types", "SUP-2", tier="full")
def _raw_data_types(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        cases = first_of_each_layer(raw, instance)
        if not cases:
            raise NotSupported("the backend supports none of the kit's layer cases")
        factory = raw.factory(instance)
        problems = []
        try:
            for data, _ in cases:
                for tensor in ("input 0", "output"):
                    for value in (1, 2, UINT32_MAX):
                        layer = prepare(data)
                        info = layer.infos[0] if tensor == "input 0" else layer.output
                        info.data_type = value
                        problems += refuse_everywhere(raw, instance, factory, layer,
                                                       f"{data['id']} with data type {value} "
                                                       f"(not float32) for {tensor}")
                if problems:
                    break
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("; ".join(problems[:4]))


@case("raw.refusal-reasons", "SUP-2", tier="full")
def _raw_refusal_reasons(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        factory = raw.factory(instance)
        problems = []
        try:
            for what, prepared in malformed_layers():
                problems += refuse_everywhere(raw, instance, factory, Layer(prepared), what)
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("the backend's own messages (not the loader's): " + "; ".join(problems))
