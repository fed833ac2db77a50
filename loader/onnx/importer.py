"""The import driver: read and check the model, fix every input's shape, then convert the nodes
in topological order (each converter folds what is constant and adds layers for the rest),
collecting every node that cannot be expressed, and expose the outputs in the model's own
layout. It names no operator: ``ops`` does."""
import heapq
from typing import Dict, List

import numpy as np

from loader.errors import NetworkError
from loader.onnx import model as _model
from loader.onnx import ops
from loader.onnx.builder import Builder
from loader.onnx.errors import ModelError, UnsupportedModelError
from loader.onnx.values import Attributes, Unsupported, Value

MIN_OPSET = 11
MAX_NODES = 1_000_000
MAX_DIMENSION = 2**40


def import_model(source, input_shapes=None):
    import onnx
    import onnx.defs
    from loader.networks import Network
    proto, directory, where = _model.read(source)
    _model.load_external_data(proto, directory, where)
    opset = _opset(proto, where, onnx.defs.onnx_opset_version())
    graph = proto.graph
    if len(graph.node) > MAX_NODES:
        raise ModelError(f"{where}: {len(graph.node)} nodes, more than {MAX_NODES}")
    initializers = _initializers(graph, where)
    order = _topological_order(graph, initializers, where)
    net = Network()
    builder = Builder(net, initializers, where)
    values: Dict[str, Value] = builder.values
    for node in graph.node:
        for name in dict.fromkeys(node.input):
            if name:
                builder.readers.setdefault(name, []).append(node)
    builder.graph_outputs = {v.name for v in graph.output}
    remaining = {}                          # readers of each value not converted yet
    for node in graph.node:
        for name in set(node.input):
            remaining[name] = remaining.get(name, 0) + 1
    for name in builder.graph_outputs:
        remaining[name] = remaining.get(name, 0) + 1
    for value_info in graph.input:
        if value_info.name in initializers:
            continue                    # an initializer listed as an input too: a constant
        values[value_info.name] = _model_input(builder, value_info,
                                               (input_shapes or {}).get(value_info.name), where)
    unknown_inputs = set(input_shapes or {}) - {v.name for v in graph.input}
    if unknown_inputs:
        raise ModelError(f"{where}: input_shapes names {sorted(unknown_inputs)}, which are not "
                         f"inputs of the model (its inputs: "
                         f"{[v.name for v in graph.input if v.name not in initializers]})")
    refused, poisoned = [], set()
    inferred = None                         # ONNX's shape inference, once something is refused

    def stand_in(node):
        """Values standing in for a refused node's outputs, from ONNX's shape inference, so
        that the nodes after it are still checked (and listed) rather than skipped."""
        nonlocal inferred
        if inferred is None:
            inferred = _inferred_shapes(proto)
        for name in node.output:
            known = inferred.get(name) if name else None
            if known is None:
                poisoned.add(name)
                continue
            stand = builder.unique(f"{name} (refused)")
            try:
                builder.net.add_input(stand, known)
            except NetworkError:            # a shape no tensor can have: skip what follows
                poisoned.add(name)
                continue
            values[name] = Value.runtime(stand, known)

    for index in order:
        node = graph.node[index]
        label = node.name or f"{node.op_type}_{index}"
        where_node = f"node {label!r} ({node.op_type})"
        builder.node_name = node.name or f"{node.op_type}_{index}"
        produced = [name for name in node.output if name]
        if produced and all(name in builder.absorbed for name in produced):
            for name in produced:       # folded into the node before it (a BatchNormalization)
                values[name] = builder.absorbed[name]
            continue
        if node.domain not in ("", "ai.onnx"):
            refused.append((node.name, node.op_type, opset, f"operators of domain "
                            f"{node.domain!r} are not supported"))
            stand_in(node)
            continue
        convert = ops.converter(node.op_type, opset)
        if convert is None:
            refused.append((node.name, node.op_type, opset, "no converter for this operator"))
            stand_in(node)
            continue
        if any(name in poisoned for name in node.input if name):
            poisoned.update(node.output)    # follows a refused node: not listed again
            continue
        try:
            _check_arity(node, opset, where_node)
            inputs = [builder.value(name) if name else None for name in node.input]
            attributes = Attributes(node, where_node)
            outputs = convert(builder, node, inputs, attributes, opset)
            unread = sorted(attributes.names() - attributes.read)
            if unread:      # an attribute nobody read could change the meaning: never ignore it
                raise Unsupported(f"attribute{'s' * (len(unread) > 1)} "
                                  f"{', '.join(map(repr, unread))} not supported")
        except Unsupported as reason:
            refused.append((node.name, node.op_type, opset, str(reason)))
            stand_in(node)
            continue
        except ModelError as error:
            raise ModelError(f"{where}: {error}") from None
        except NetworkError as error:
            raise ModelError(f"{where}: {where_node}: {error}") from None
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as error:
            # what NumPy raises for operands that do not fit together: the model is inconsistent
            text = " ".join(str(error).split())[:300]
            raise ModelError(f"{where}: {where_node}: inconsistent with its inputs "
                             f"{[list(v.shape) if v is not None else None for v in inputs]}: "
                             f"{text}") from None
        _bind(values, node, outputs, where_node, where)
        for name in set(node.input):   # nothing reads it any more: free it (weights, mostly)
            remaining[name] -= 1
            if remaining[name] == 0:
                values.pop(name, None)
    if refused:
        raise UnsupportedModelError(refused, len(graph.node))
    for value_info in graph.output:
        value = values.get(value_info.name)
        if value is None:
            raise ModelError(f"{where}: output {value_info.name!r} is produced by no node")
        try:
            _model_output(builder, value_info.name, value, where)
        except Unsupported as reason:
            raise UnsupportedModelError([("", "(output)", opset, str(reason))]) from None
    net.onnx_origin = dict(builder.origin)
    net.onnx_opset = opset
    return net


def _check_arity(node, opset, where):
    """The node's inputs and outputs against its operator's schema: a count out of range, or a
    required input left empty, is a malformed node (no converter need check it again)."""
    import onnx.defs
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except Exception:
        return
    given = len(node.input)
    if not schema.min_input <= given <= schema.max_input:
        raise ModelError(f"{where}: {given} inputs, the operator takes {schema.min_input} to "
                         f"{schema.max_input}")
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    for index, formal in enumerate(schema.inputs[:given]):
        if formal.option == single and not node.input[index]:
            raise ModelError(f"{where}: input {index} ({formal.name}) is required")
    if not schema.min_output <= len(node.output) <= schema.max_output:
        raise ModelError(f"{where}: {len(node.output)} outputs, the operator has "
                         f"{schema.min_output} to {schema.max_output}")


def _inferred_shapes(proto) -> Dict[str, tuple]:
    """name -> static shape of every float32 value ONNX's shape inference can tell."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:               # inference is a help for the refusal's list only
        return {}
    shapes = {}
    for value_info in list(inferred.graph.value_info) + list(inferred.graph.output):
        tensor_type = value_info.type.tensor_type
        if tensor_type.elem_type != 1 or not tensor_type.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else 0 for d in tensor_type.shape.dim]
        if dims and all(0 < d <= MAX_DIMENSION for d in dims):
            shapes[value_info.name] = tuple(dims)
    return shapes


def _opset(proto, where, newest) -> int:
    versions = [entry.version for entry in proto.opset_import if entry.domain in ("", "ai.onnx")]
    if not versions:
        others = [(n.name, n.op_type, 0, f"operators of domain {n.domain!r} are not supported")
                  for n in proto.graph.node if n.domain not in ("", "ai.onnx")]
        if others:
            raise UnsupportedModelError(others, len(proto.graph.node))
        raise ModelError(f"{where}: the model imports no opset of the default domain")
    opset = max(versions)
    if not MIN_OPSET <= opset <= newest:
        raise UnsupportedModelError([("", "(model)", opset,
                                      f"opset {opset}; opsets {MIN_OPSET} to {newest} (the "
                                      f"newest the installed onnx package knows) are supported")])
    return opset


def _initializers(graph, where) -> Dict[str, object]:
    """name -> TensorProto of every initializer; each is read (and checked) at its first use,
    so that weights are read once each and freed once converted."""
    result = {}
    for tensor in graph.initializer:
        if not tensor.name:
            raise ModelError(f"{where}: an initializer has no name")
        if tensor.name in result:
            raise ModelError(f"{where}: initializer {tensor.name!r} is defined twice")
        result[tensor.name] = tensor
    if len(graph.sparse_initializer):
        raise UnsupportedModelError([("", "(model)", 0, "sparse initializers are not supported")])
    return result


def _topological_order(graph, initializers, where) -> List[int]:
    """Node indices in an order where every input is produced before it is read (the file's
    order kept where it already is one). Names used before they are defined, produced twice,
    or read in a cycle are ModelErrors."""
    defined = set(initializers) | {v.name for v in graph.input}
    producer = {}
    for index, node in enumerate(graph.node):
        for name in node.output:
            if not name:
                continue
            if name in producer or name in defined:
                raise ModelError(f"{where}: {name!r} is produced twice (by node "
                                 f"{node.name or index!r} and before it)")
            producer[name] = index
    waiting = [0] * len(graph.node)
    readers = [[] for _ in graph.node]
    for index, node in enumerate(graph.node):
        for name in set(node.input):
            if not name or name in defined:
                continue
            if name not in producer:
                raise ModelError(f"{where}: node {node.name or index!r} ({node.op_type}) reads "
                                 f"{name!r}, which no node, input or initializer defines")
            waiting[index] += 1
            readers[producer[name]].append(index)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for reader in readers[index]:
            waiting[reader] -= 1
            if waiting[reader] == 0:
                heapq.heappush(ready, reader)
    if len(order) != len(graph.node):
        stuck = [graph.node[i].name or str(i) for i, c in enumerate(waiting) if c > 0]
        raise ModelError(f"{where}: the nodes form a cycle (through {stuck[:5]})")
    for value_info in graph.output:
        if value_info.name not in producer and value_info.name not in defined:
            raise ModelError(f"{where}: output {value_info.name!r} is produced by no node")
    return order


def _model_input(builder, value_info, given, where) -> Value:
    name = value_info.name
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise UnsupportedModelError([("", "(input)", 0, f"input {name!r} is not a tensor")])
    tensor_type = value_info.type.tensor_type
    if tensor_type.elem_type != 1:
        raise UnsupportedModelError([("", "(input)", 0, f"input {name!r} is "
                                      f"{_model.dtype_name(tensor_type.elem_type)}; inputs "
                                      f"must be float32")])
    declared = list(tensor_type.shape.dim) if tensor_type.HasField("shape") else None
    if given is not None:
        try:
            shape = tuple(int(v) for v in given)
        except (TypeError, ValueError):
            raise ModelError(f"input_shapes[{name!r}] must be a tuple of integers, not "
                             f"{given!r}") from None
        if declared is not None and len(declared) != len(shape):
            raise ModelError(f"input_shapes[{name!r}] has {len(shape)} dimensions, the model "
                             f"declares {len(declared)}")
        for axis, (dim, value) in enumerate(zip(declared or [], shape)):
            if dim.HasField("dim_value") and dim.dim_value != value:
                raise ModelError(f"input_shapes[{name!r}] gives {value} for dimension {axis}, "
                                 f"which the model fixes at {dim.dim_value}")
    else:
        if declared is None:
            raise ModelError(f"{where}: input {name!r} has no shape; give it in input_shapes")
        shape = []
        for axis, dim in enumerate(declared):
            if not dim.HasField("dim_value"):
                symbol = dim.dim_param or "?"
                raise ModelError(f"{where}: dimension {axis} ({symbol!r}) of input {name!r} is "
                                 f"not known: give the input's shape in input_shapes, e.g. "
                                 f"input_shapes={{{name!r}: (...)}}")
            shape.append(dim.dim_value)
        shape = tuple(shape)
    if any(v < 1 or v > MAX_DIMENSION for v in shape):
        raise ModelError(f"input {name!r}: shape {list(shape)} must have every dimension from 1 "
                         f"to 2^40")
    builder.taken.add(name)
    try:
        builder.net.add_input(name, shape)
    except NetworkError as error:
        raise ModelError(f"{where}: {error}") from None
    return Value.runtime(name, shape)


def _bind(values, node, outputs, where_node, where):
    if len(outputs) < len([n for n in node.output if n]):
        raise ModelError(f"{where}: {where_node}: produced {len(outputs)} outputs, the node "
                         f"names {len(node.output)}")
    for name, value in zip(node.output, outputs):
        if name:
            values[name] = value


def _model_output(builder, name, value: Value, where):
    net = builder.net
    if value.is_const:
        if value.const.dtype.kind not in "f" or value.const.dtype != np.float32:
            raise UnsupportedModelError([("", "(output)", 0, f"output {name!r} is a constant "
                                          f"of type {value.const.dtype}")])
    elif value.dtype != np.float32:
        raise UnsupportedModelError([("", "(output)", 0, f"output {name!r} is {value.dtype}; "
                                      f"outputs must be float32")])
    builder.node_name = name
    tensor = builder.logical(value)
    if tensor in net.inputs or tensor in net.constants:
        tensor = builder.layer("Reshape", [tensor], {"shape": list(value.shape) or [1]},
                               "/output")
    net.add_output(tensor, name)
