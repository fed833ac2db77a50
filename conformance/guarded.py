"""Memory safety (MEM-1): every layer runs with its buffers placed against guard pages, so that an
overrun, an underrun or a write to an input faults in the case that does it, at the execution
that does it. Before each execution the worker announces what it is about to try; when the
worker dies, the controller reports that announcement with the signal.

Each buffer is its own anonymous mapping: an inaccessible page right after its last byte (or,
in a second run, right before its first), and inputs made read-only in a third.
"""
from typing import List

import numpy as np

from conformance.guard_pages import Arena
from conformance.layer_runs import describe, inputs_for, layer_cases, spec
from conformance.registry import Failed, NotSupported, case


def _placed(arena, where, array):
    target = arena.after(array.nbytes, array.shape) if where == "after" else \
        arena.before(array.nbytes, array.shape)
    target[...] = array
    return target


def run_guarded(subject, workload, label: str, inputs: List[np.ndarray], output_shape):
    """Execute ``workload`` once per placement; a fault kills the worker right after the note
    that says which buffer was guarded, and how."""
    names = [f"input {i}" for i in range(len(inputs))]
    plain_out = np.empty(output_shape, np.float32)
    steps = [("after", i) for i in range(len(inputs) + 1)] + [("read-only", None)] + \
        [("before", i) for i in range(len(inputs) + 1)]
    for how, index in steps:
        with Arena() as arena:
            arrays = [a.copy() for a in inputs]
            out = plain_out
            if how == "read-only":
                arrays = [_placed(arena, "after", a) for a in arrays]
                for a in arrays:
                    arena.read_only(a)
                subject.note(f"{label}: every input is read-only; a crash here is a write into "
                             f"an input")
            else:
                role = names[index] if index < len(inputs) else "the output"
                if index < len(inputs):
                    arrays[index] = _placed(arena, how, arrays[index])
                else:
                    out = _placed(arena, how, np.zeros(output_shape, np.float32))
                edge = "past the end of" if how == "after" else "before the start of"
                subject.note(f"{label}: {role} placed against a guard page; a crash here is an "
                             f"access {edge} {role}")
            workload.execute(arrays, [out])
            for i, (before, after) in enumerate(zip(inputs, arrays)):
                if not np.array_equal(before.view(np.uint32), after.view(np.uint32)):
                    changed = int(np.sum(before.view(np.uint32) != after.view(np.uint32)))
                    raise Failed(f"{label}: execute wrote into input {i} ({changed} of "
                                 f"{before.size} values changed); inputs are read-only")


def memory_specs(layer) -> List[dict]:
    """A few generated shapes with odd sizes for the guarded runs (MEM-1)."""
    chosen = {
        "Activation": [spec("memory", 0, "Activation", [[13]], {"function": "sigmoid"})],
        "Addition": [spec("memory", 1, "Addition", [[3, 1], [5]])],
        "Multiplication": [spec("memory", 2, "Multiplication", [[1], [2, 3]])],
        "FullyConnected": [spec("memory", 3, "FullyConnected", [[2, 5], [3, 5], [3]]),
                           spec("memory", 4, "FullyConnected", [[1, 7], [7, 2]],
                                {"transpose_weights": False})],
        "Convolution2d": [spec("memory", 5, "Convolution2d", [[1, 5, 4, 3], [2, 3, 3, 3]],
                               {"padding": [1, 1, 1, 1]})],
        "DepthwiseConvolution2d": [spec("memory", 6, "DepthwiseConvolution2d",
                                        [[1, 5, 4, 3], [1, 3, 3, 3]], {"padding": [2, 0, 0, 2]})],
        "Pooling2d": [spec("memory", 7, "Pooling2d", [[1, 5, 5, 1]],
                           {"pool": "max", "kernel": [3, 3], "padding": [2, 2, 2, 2]})],
        "Softmax": [spec("memory", 8, "Softmax", [[7]])],
        "Reshape": [spec("memory", 9, "Reshape", [[7]], {"shape": [7, 1]})],
    }
    return chosen.get(layer, []) + _memory_specs_1_3().get(layer, [])


def _memory_specs_1_3():
    """The layers and members of Backend API 1.3, where reading past an edge is easiest: a
    slice walked backwards to index 0, reflection and edge padding, a cubic resize's outer taps,
    ceil_mode windows past the input, a scattered transposed convolution."""
    lowest = -2**63
    shapes = {
        "Subtraction": ([[3, 1], [5]], None), "Division": ([[2, 3], [1]], None),
        "Maximum": ([[1], [4, 1]], None), "Minimum": ([[3, 2], [2]], None),
        "Power": ([[5], [2, 1]], None), "ElementwiseUnary": ([[13]], {"function": "exp"}),
        "Prelu": ([[3, 5], [5]], None),
        "Concatenation": ([[2, 3], [1, 3], [4, 3]], {"axis": 0}),
        "Slice": ([[7, 5]], {"begin": [-1, 0], "end": [lowest, 5], "step": [-1, 2]}),
        "Transpose": ([[3, 1, 5, 2]], {"perm": [2, 0, 3, 1]}),
        "Pad": ([[5, 3]], {"pads": [4, 2, 4, 2], "mode": "reflect"}),
        "Resize": ([[1, 3, 4, 2]], {"size": [7, 5], "mode": "cubic"}),
        "Reduce": ([[3, 4, 5]], {"function": "sum", "axes": [0, 2], "keep_dims": False}),
        "BatchNormalization": ([[2, 3], [3], [3], [3], [3]], None),
        "LayerNormalization": ([[3, 7], [7], [7]], {"axis": -1}),
        "MatMul": ([[2, 1, 3, 4], [3, 4, 2]], None),
        "TransposeConvolution2d": ([[1, 3, 3, 2], [2, 3, 3, 3]],
                                   {"stride": [2, 2], "output_padding": [1, 1]}),
    }
    chosen = {layer: [spec("memory13", number, layer, inputs, descriptor)]
              for number, (layer, (inputs, descriptor)) in enumerate(shapes.items())}
    extra = [("Convolution2d", [[1, 5, 4, 4], [4, 3, 3, 2]], {"groups": 2, "padding": [1, 1, 1, 1]}),
             ("Pooling2d", [[1, 5, 5, 1]], {"pool": "average", "kernel": [2, 2], "stride": [2, 2],
                                           "ceil_mode": True, "count_include_pad": True}),
             ("Pooling2d", [[1, 6, 5, 2]], {"pool": "l2", "kernel": [2, 2], "dilation": [2, 2],
                                           "padding": [1, 1, 1, 1], "ceil_mode": True}),
             ("Softmax", [[7, 3]], {"axis": 0, "log": True})]
    for number, (layer, inputs, descriptor) in enumerate(extra, len(shapes)):
        chosen.setdefault(layer, []).append(spec("memory13", number, layer, inputs, descriptor))
    return chosen


def _memory_case(layer_name):
    def run(subject):
        import loader
        backend = subject.backend()
        specs = [d for d in layer_cases() if d["layer"] == layer_name] + \
            memory_specs(layer_name)
        manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
        factory = backend.create_workload_factory(manager)
        ran = 0
        for data in specs:
            inputs = inputs_for(data, subject.seed)
            if not backend.is_layer_supported(data["layer"], inputs, data.get("descriptor")):
                continue
            try:
                workload = factory.create_workload(data["layer"], inputs, data.get("descriptor"))
            except loader.BackendError as error:
                raise Failed(f"{describe(data)}: create_workload failed: {error}")
            if manager is not None:
                manager.acquire()
            try:
                run_guarded(subject, workload, describe(data), inputs,
                            workload.output_shape)
            except loader.BackendError as error:
                raise Failed(f"{describe(data)}: execute failed with guarded buffers: "
                             f"{error}")
            finally:
                if manager is not None:
                    manager.release()
                workload.close()
            ran += 1
        if not ran:
            raise NotSupported(f"the backend supports none of the kit's {layer_name} cases")
    return run


def _register():
    from loader.layers import LAYERS
    for name in LAYERS:
        case(f"memory.{name}", "MEM-1", tier="full")(_memory_case(name))


_register()
