"""Raw-interface case (MSG-1): message buffers of 0, 1 and 16 bytes with canaries around them,
then a NULL buffer of size 0, given to calls that must refuse; nothing may be written outside
the buffer, and what is written inside must end with a NUL."""
from typing import List

from conformance.raw import Message, Raw, relu_layer
from conformance.raw_structs import OK
from conformance.registry import Failed, case

MESSAGE_SIZES = (0, 1, 16)


def _check_sizes(subject, call, what) -> List[str]:
    """Call ``call(message)`` with message buffers of each size; every call must be refused with
    nothing written outside the buffer."""
    problems = []
    for size in MESSAGE_SIZES:
        message = Message(size)
        status = call(message)
        if status == OK:
            problems.append(f"{what}: answered OK with a {size}-byte message buffer")
        problem = message.problem()
        if problem:
            problems.append(f"{what}: {problem}")
    if not problems:
        # message_size 0 with a NULL buffer, as the ABI allows: a write through it crashes here
        empty = Message(0)
        empty.pointer = None
        subject.note(f"{what}, with message_size 0 and a NULL message buffer (allowed by the "
                     f"ABI); a crash here is a write through it")
        call(empty)
    return problems


@case("raw.message-buffers", "MSG-1", tier="full")
def _raw_message_buffers(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        factory = raw.factory(instance)
        layer = relu_layer()
        layer.description.layer_type = 9999
        problems = []
        try:
            problems += _check_sizes(subject, lambda m: raw.is_layer_supported(instance, layer, m),
                                     "is_layer_supported of an unknown layer type")
            problems += _check_sizes(subject, lambda m: raw.create_workload(factory, layer, m)[0],
                                     "create_workload of an unknown layer type")
        finally:
            raw.destroy_factory(factory)
        if problems:
            raise Failed("; ".join(problems[:4]))
