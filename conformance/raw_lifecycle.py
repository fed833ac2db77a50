"""Raw-interface case (LIFE-4) on the order of a memory manager's calls: release before any
acquire, a second acquire without a release; each must be refused with INVALID_STATE and a
reason, and the manager must stay usable."""
from conformance.raw import Raw, full_message, refusal_problem
from conformance.raw_structs import OK
from conformance.registry import Failed, NotSupported, case


@case("lifecycle.memory-manager-misuse", "LIFE-4", tier="full")
def _memory_manager_misuse(subject):
    with Raw(subject.path, subject.record) as raw:
        instance = raw.new_instance()
        pointer = raw.memory_manager(instance)
        if pointer is None:
            raise NotSupported("the backend provides no memory manager")
        problems = []

        def call(name):
            message = full_message()
            return raw.manager_call(pointer, name, message.pointer, message.size), message
        try:
            problem = refusal_problem("release before any acquire", *call("release"))
            if problem:
                problems.append(problem)
            status, message = call("acquire")
            if status != OK:
                raise Failed(f"the first acquire failed with status {status}: {message.text!r}")
            problem = refusal_problem("a second acquire without a release", *call("acquire"))
            if problem:
                problems.append(problem)
            status, message = call("release")
            if status != OK:
                problems.append(f"release after a refused second acquire failed with status "
                                f"{status}: {message.text!r}")
        finally:
            raw.manager_call(pointer, "destroy")
        if problems:
            raise Failed("; ".join(problems) + " (expected INVALID_STATE with a reason)")
