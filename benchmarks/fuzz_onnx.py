"""ONNX models as hostile input: mutants of real models (small ones built here the way exporters
write them, and optionally exported files given with --model) imported with
``loader.onnx.load_model`` in child processes. Counts crashes (the child killed by a signal), hangs
(no answer within the timeout), and exceptions other than ModelError and UnsupportedModelError
(the goal is 0 of each), and saves each such mutant.

    python benchmarks/fuzz_onnx.py [--mutants 3000] [--seed 1] [--model FILE.onnx]...
                                   [--timeout 20] [--save DIR]

Mutations: truncations and byte flips of the serialized model; field edits of the parsed model
(attributes set to huge, negative, empty or wrong-typed values; initializer dims and data
changed; inputs renamed, removed or repeated; op types swapped; opsets changed; shapes set to
absurd dimensions; external data pointing anywhere).
"""
import argparse
import collections
import multiprocessing
import os
import random
import sys
import tempfile
import traceback

import numpy as np

OUTCOMES = ("imported", "model-error", "unsupported", "exception", "crash", "hang")


def seed_models():
    """Small models of the kinds real exporters write."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    def make(nodes, inputs, inits, opset=17):
        graph = helper.make_graph(nodes, "seed", inputs,
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                                  inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    cnn = make([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n0"], axis=0),
        helper.make_node("Unsqueeze", ["n0", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus"], ["shape"], axis=0),
        helper.make_node("Reshape", ["p", "shape"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["gm"], transB=1),
        helper.make_node("Softmax", ["gm"], ["y"], axis=-1)],
        [x], [init("w", 4, 3, 3, 3), init("b", 4), init("g", 4), init("be", 4), init("m", 4),
              numpy_helper.from_array(np.ones(4, np.float32), "v"),
              numpy_helper.from_array(np.array(0, np.int64), "zero"),
              numpy_helper.from_array(np.array([0], np.int64), "axes"),
              numpy_helper.from_array(np.array([-1], np.int64), "minus"),
              init("fw", 5, 64), init("fb", 5)])
    t = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 16])
    transformer = make([
        helper.make_node("LayerNormalization", ["x", "ls", "lb"], ["ln"], axis=-1),
        helper.make_node("MatMul", ["ln", "wq"], ["q"]),
        helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "qt"], ["att"]),
        helper.make_node("Softmax", ["att"], ["sm"], axis=-1),
        helper.make_node("MatMul", ["sm", "q"], ["o"]),
        helper.make_node("Add", ["o", "x"], ["res"]),
        helper.make_node("Slice", ["res", "st", "en", "ax"], ["sl"]),
        helper.make_node("Gelu", ["sl"], ["y"])],
        [t], [init("ls", 16), init("lb", 16), init("wq", 16, 16),
              numpy_helper.from_array(np.array([0], np.int64), "st"),
              numpy_helper.from_array(np.array([1], np.int64), "en"),
              numpy_helper.from_array(np.array([1], np.int64), "ax")], opset=20)
    seg = make([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], group=1, pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["c", "", "scales"], ["u"], mode="linear"),
        helper.make_node("Pad", ["u", "pads"], ["pd"], mode="reflect"),
        helper.make_node("ConvTranspose", ["pd", "wt"], ["y"], strides=[2, 2])],
        [x], [init("w", 4, 3, 3, 3), init("b", 4), init("wt", 4, 2, 3, 3),
              numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
              numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")])
    return [m.SerializeToString() for m in (cnn, transformer, seg)]


WEIRD_INTS = [0, -1, 1, 2, 3, 2**31, 2**62, -2**62, 1 << 40, 7]


def mutate(data: bytes, rng: random.Random) -> bytes:
    import onnx
    kind = rng.randrange(4)
    if kind == 0:
        return data[:rng.randrange(len(data))]
    if kind == 1:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    model = onnx.ModelProto()
    model.ParseFromString(data)
    graph = model.graph
    for _ in range(rng.randint(1, 3)):
        choice = rng.randrange(9)
        if choice == 0 and graph.node:
            node = rng.choice(graph.node)
            if node.attribute:
                attribute = rng.choice(node.attribute)
                if attribute.ints:
                    attribute.ints[rng.randrange(len(attribute.ints))] = rng.choice(WEIRD_INTS)
                elif attribute.type == onnx.AttributeProto.INT:
                    attribute.i = rng.choice(WEIRD_INTS)
                else:
                    attribute.type = rng.choice([1, 2, 3, 6, 7])
        elif choice == 1 and graph.initializer:
            tensor = rng.choice(graph.initializer)
            if tensor.dims:
                tensor.dims[rng.randrange(len(tensor.dims))] = rng.choice(WEIRD_INTS)
            else:
                tensor.dims.append(rng.choice(WEIRD_INTS))
        elif choice == 2 and graph.node:
            node = rng.choice(graph.node)
            if node.input:
                node.input[rng.randrange(len(node.input))] = rng.choice(
                    ["", "ghost", graph.node[0].output[0], node.output[0]])
        elif choice == 3 and graph.node:
            rng.choice(graph.node).op_type = rng.choice(
                ["Relu", "Conv", "Reshape", "Slice", "Concat", "Gemm", "Pad", "Resize",
                 "Unknown", "Loop", "If"])
        elif choice == 4:
            model.opset_import[0].version = rng.choice([1, 9, 11, 13, 18, 99, -1])
        elif choice == 5 and graph.input:
            dims = graph.input[0].type.tensor_type.shape.dim
            if dims:
                dims[rng.randrange(len(dims))].dim_value = rng.choice(WEIRD_INTS)
        elif choice == 6 and graph.initializer:
            tensor = rng.choice(graph.initializer)
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", rng.choice(["/etc/passwd", "../x", "w.bin", ""])),
                               ("offset", str(rng.choice(WEIRD_INTS))),
                               ("length", str(rng.choice(WEIRD_INTS)))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
        elif choice == 7 and graph.initializer:
            tensor = rng.choice(graph.initializer)
            tensor.raw_data = tensor.raw_data[:rng.randrange(len(tensor.raw_data) + 1)]
        elif choice == 8 and graph.node:
            node = graph.node.add()
            node.CopyFrom(rng.choice(graph.node))
    return model.SerializeToString()


def _import(path, connection):
    import loader.onnx
    try:
        loader.onnx.load_model(path, input_shapes=None)
        connection.send(("imported", ""))
    except loader.onnx.ModelError as error:
        connection.send(("model-error", str(error)[:100]))
    except loader.onnx.UnsupportedModelError as error:
        connection.send(("unsupported", str(error)[:100]))
    except BaseException:
        connection.send(("exception", traceback.format_exc(limit=4)))


def run(path, timeout):
    parent, child = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_import, args=(path, child))
    process.start()
    child.close()
    if parent.poll(timeout):
        try:
            result = parent.recv()
        except EOFError:
            result = None
        process.join()
        if result is not None:
            return result
    else:
        process.kill()
        process.join()
        return "hang", f"no answer within {timeout} s"
    return "crash", f"exit status {process.exitcode}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutants", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--model", action="append", default=[], help="an exported model too")
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--save", metavar="DIR")
    args = parser.parse_args(argv)
    seeds = seed_models()
    for path in args.model:
        with open(path, "rb") as f:
            seeds.append(f.read())
    import loader.onnx  # noqa: F401  (imported once before forking)
    counts = collections.Counter()
    problems = []
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "model.onnx")
        with open(os.path.join(work, "w.bin"), "wb") as f:
            f.write(b"\0" * 64)
        for index in range(args.mutants):
            rng = random.Random(args.seed * 1_000_003 + index)
            data = mutate(seeds[index % len(seeds)], rng)
            with open(path, "wb") as f:
                f.write(data)
            outcome, detail = run(path, args.timeout)
            counts[outcome] += 1
            if outcome in ("exception", "crash", "hang"):
                problems.append((index, outcome, detail))
                if args.save:
                    os.makedirs(args.save, exist_ok=True)
                    with open(os.path.join(args.save, f"{index}.onnx"), "wb") as f:
                        f.write(data)
    print(f"{args.mutants} mutants of {len(seeds)} models, seed {args.seed}")
    for outcome in OUTCOMES:
        print(f"  {outcome:<12} {counts[outcome]}")
    for index, outcome, detail in problems[:10]:
        print(f"\n-- mutant {index} ({outcome}):\n{detail}")
    bad = counts["exception"] + counts["crash"] + counts["hang"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
