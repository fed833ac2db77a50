"""Raw-interface cases of the descriptors of Backend API 1.3, for a backend built against 1.3:

- SUP-4: descriptions a runtime never builds, each put to is_layer_supported and
  create_workload directly, for the layers the backend claims (a valid twin of each is asked
  first): tensors of rank 7 (or 0) for a 1.3 layer type, values that contradict the tensor infos
  (conformance/raw_misuse13.py), output infos that do not follow from the descriptor, and
  descriptors whose struct_size is too small for their type. Each must be refused, with the
  backend's own message; a crash is reported as CRASH, named by the call.
- ABI-6: Convolution2d, Pooling2d and Softmax descriptors of the size Backend API 1.1 gave them,
  as a runtime built against 1.1 or 1.2 fills them, with garbage where 1.3 appended members: the
  backend must not read past struct_size, and runs them with the defaults.
"""
import ctypes
from typing import List

import numpy as np

from conformance.families import minor_needed
from conformance.layer_runs import compare, layer_cases, layer_inputs
from conformance.raw import (Layer, Raw, buffers, full_message, prepare, refuse_everywhere)
from conformance.raw_misuse13 import MISUSES
from conformance.raw_structs import DESCRIPTORS, OK, descriptor_size
from conformance.registry import Failed, NotSupported, case

POISON = 0xA5


def _instance_13(raw: Raw):
    instance = raw.new_instance()
    minor = raw.instance(instance).api_minor
    if minor < 3:
        raise NotSupported(f"the backend is built against Backend API 1.{minor}: a runtime never "
                           f"hands it what 1.3 added")
    return instance


def _claims(raw, instance, data) -> bool:
    return raw.is_layer_supported(instance, prepare(data), full_message()) == OK


def _refusals(subject, changes) -> None:
    """Each (what, valid layer, change) whose valid layer the backend claims, changed and put to
    both functions; every answer must be a refusal with a message."""
    with Raw(subject.path, subject.record) as raw:
        instance = _instance_13(raw)
        factory = raw.factory(instance)
        problems, asked = [], 0
        try:
            for what, data, change in changes:
                if not _claims(raw, instance, data):
                    continue
                asked += 1
                layer = prepare(data)
                change(layer)
                subject.note(f"{what}: is_layer_supported and create_workload must refuse it")
                problems += refuse_everywhere(raw, instance, factory, layer, what)
        finally:
            raw.destroy_factory(factory)
        if not asked:
            raise NotSupported("the backend claims none of the layers these misuses start from")
        if problems:
            raise Failed(f"{len(problems)} of {2 * asked} answers were not refusals: "
                         + "; ".join(problems[:6]))


def _group_case(group):
    return lambda subject: _refusals(subject, MISUSES[group])


case("raw.rank-beyond-six", "SUP-4", tier="full")(_group_case("rank"))
case("raw.descriptor-values", "SUP-4", tier="full")(_group_case("values"))
case("raw.output-follows-descriptor", "SUP-4", tier="full")(_group_case("outputs"))


def _first_per_layer_with_descriptor() -> List[dict]:
    from loader.layers import LAYERS
    chosen, seen = [], set()
    for data in layer_cases():
        if data["layer"] not in seen and LAYERS[data["layer"]].code in DESCRIPTORS:
            seen.add(data["layer"])
            chosen.append(data)
    return chosen


def _shrink(size):
    def change(layer):
        layer.descriptor.struct_size = size
    return change


@case("raw.descriptor-too-small", "SUP-4", tier="full")
def _descriptor_too_small(subject):
    from loader.layers import LAYERS
    changes = []
    for data in _first_per_layer_with_descriptor():
        struct = DESCRIPTORS[LAYERS[data["layer"]].code]
        version = "1.3" if LAYERS[data["layer"]].since_minor >= 3 else "1.1"
        smallest = descriptor_size(struct, version)
        for size in (4, smallest - 4):
            changes.append((f"a {data['layer']} descriptor of struct_size {size} (Backend API "
                            f"{version} needs {smallest})", data, _shrink(size)))
    _refusals(subject, changes)


# -- ABI-6: descriptors of an older minor version -------------------------------------------

GROWN = ("Convolution2d", "Pooling2d", "Softmax")  # the descriptors 1.3 appended members to


def _as_older(layer: Layer, struct, size: int):
    """The descriptor cut to ``size`` bytes, garbage after: a runtime of 1.1 or 1.2 fills only
    what its header has; the bytes beyond are not the backend's to read."""
    raw_bytes = (ctypes.c_ubyte * ctypes.sizeof(struct)).from_address(ctypes.addressof(layer.descriptor))
    for k in range(size, ctypes.sizeof(struct)):
        raw_bytes[k] = POISON
    layer.descriptor.struct_size = size


def _execute(raw, instance, layer, inputs, output_shape):
    manager = raw.memory_manager(instance)
    factory = raw.factory(instance, manager)
    message = full_message()
    status, workload = raw.create_workload(factory, layer, message)
    try:
        if status != OK or not workload:
            return None, f"create_workload refused it (status {status}: {message.text!r})"
        output = np.zeros(output_shape, np.float32)
        if manager:
            raw.manager_call(manager, "acquire")
        try:
            message = full_message()
            status = raw.execute(workload, buffers(inputs), len(inputs), buffers([output]), 1,
                                 message.pointer, message.size)
        finally:
            if manager:
                raw.manager_call(manager, "release")
        if status != OK:
            return None, f"execute failed (status {status}: {message.text!r})"
        return output, None
    finally:
        if workload:
            raw.destroy_workload(workload)
        raw.destroy_factory(factory)
        if manager:
            raw.manager_call(manager, "destroy")


@case("raw.older-descriptor-sizes", "ABI-6", tier="full")
def _older_descriptor_sizes(subject):
    from loader.layers import LAYERS
    with Raw(subject.path, subject.record) as raw:
        instance = _instance_13(raw)
        problems, ran = [], 0
        for data in layer_cases():
            if data["layer"] not in GROWN or minor_needed(data) > 1:
                continue
            if not _claims(raw, instance, data):
                continue
            struct = DESCRIPTORS[LAYERS[data["layer"]].code]
            size = descriptor_size(struct, "1.1")
            layer = prepare(data)
            _as_older(layer, struct, size)
            what = (f"{data['id']} with a descriptor of Backend API 1.1's size ({size} bytes, "
                    f"0x{POISON:02X} after it)")
            ran += 1
            subject.note(f"{what}: the backend must read nothing past struct_size")
            message = full_message()
            status = raw.is_layer_supported(instance, layer, message)
            if status != OK:
                problems.append(f"{what}: is_layer_supported refused it (status {status}: "
                                f"{message.text!r}), though it takes the same layer in full")
                continue
            inputs = layer_inputs(data)
            output, problem = _execute(raw, instance, layer, inputs,
                                       tuple(layer.output.dimensions[:layer.output.num_dimensions]))
            if problem:
                problems.append(f"{what}: {problem}")
                continue
            try:
                compare(data, inputs, output, what="read with the defaults of 1.3's members")
            except Failed as failure:
                problems.append(f"{what}: {failure}")
        if not ran:
            raise NotSupported(f"the backend claims none of the kit's {', '.join(GROWN)} cases")
        if problems:
            raise Failed("; ".join(problems[:4]))
