"""ONNX's own node tests (the float32 ones the installed ``onnx`` package generates) imported
with ``loader.onnx.load_model`` and run, each compared with the outputs ONNX expects. Prints, per
operator: passed, refused (UnsupportedModelError: the product cannot express it, with the
reason), wrong (ran, but a different answer: the goal is 0), error (another exception: 0) and,
in the backend mode, crashes (each test runs in a child process then: 0).

    python benchmarks/onnx_node_tests.py [--through backend|numpy] [-k SUBSTRING] [--list]

A node test's input that only configures an operator (Resize's scales, Pad's pads, Clip's
bounds, ...) is given to the importer as a constant, as a deployed model has it; everything else
is fed at run time. ``--through numpy`` evaluates the imported network with the kit's float64 references instead of
a backend (checks the importer and the references alone). A result is right within the test's
own tolerance or 1e-4 of the output's scale, whichever is larger (float32 against float64
references).
"""
import argparse
import collections
import multiprocessing
import sys
import traceback
import warnings

import numpy as np


def float32_cases(select=None):
    import onnx
    from onnx.backend.test.case import node
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = node.collect_testcases(None)
    keep = []
    for case in cases:
        values = list(case.model.graph.input) + list(case.model.graph.output)
        if all(v.type.HasField("tensor_type") and v.type.tensor_type.elem_type ==
               onnx.TensorProto.FLOAT for v in values):
            if select is None or select in case.name:
                keep.append(case)
    return keep


def operators(case):
    ops = [n.op_type for n in case.model.graph.node]
    main = [op for op in ops if op not in ("Constant", "Identity")] or ops
    return main[-1] if main else "(none)"


def close(got, expected, case):
    if got.shape != expected.shape:
        return f"shape {list(got.shape)}, expected {list(expected.shape)}"
    both_nan = np.isnan(got) & np.isnan(expected)
    scale = float(np.max(np.abs(expected[np.isfinite(expected)]), initial=0.0)) or 1.0
    atol = max(case.atol, 1e-4 * scale)
    rtol = max(case.rtol, 1e-4)
    bad = ~both_nan & ~np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=False)
    bad &= ~(np.isinf(got) & np.isinf(expected) & (np.sign(got) == np.sign(expected)))
    if np.any(bad):
        i = np.unravel_index(np.argmax(bad), bad.shape)
        return f"at {list(i)}: {got[i]!r}, expected {expected[i]!r}"
    return None


# Inputs that configure an operator rather than carry data: a model that is run (not a node
# test) has them as constants, and a static import needs them so. A node test's input used
# only in these places is given to the importer as an initializer holding the test's data.
PARAMETER_SLOTS = {"Resize": {1, 2, 3}, "Clip": {1, 2}, "Pad": {1, 2, 3}, "Slice": {1, 2, 3, 4},
                   "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Squeeze": {1}, "Unsqueeze": {1},
                   "Split": {1}, "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1},
                   "ReduceMin": {1}, "ReduceProd": {1}, "ReduceL1": {1}, "ReduceL2": {1},
                   "ReduceSumSquare": {1}, "ReduceLogSum": {1}, "ReduceLogSumExp": {1},
                   "ConstantOfShape": {0}, "Range": {0, 1, 2}}


def _frozen(model, feeds):
    """The model with its configuration inputs turned into initializers, and the feeds left."""
    from onnx import numpy_helper
    uses = {}
    for node in model.graph.node:
        for slot, name in enumerate(node.input):
            uses.setdefault(name, []).append(slot in PARAMETER_SLOTS.get(node.op_type, ()))
    frozen = [name for name in feeds if uses.get(name) and all(uses[name])]
    if not frozen:
        return model, feeds, []
    copy = type(model)()
    copy.CopyFrom(model)
    keep = [v for v in copy.graph.input if v.name not in frozen]
    del copy.graph.input[:]
    copy.graph.input.extend(keep)
    for name in frozen:
        copy.graph.initializer.append(numpy_helper.from_array(feeds[name], name))
    return copy, {k: v for k, v in feeds.items() if k not in frozen}, frozen


def run_case(case, through):
    """(outcome, detail): passed, refused, wrong or error."""
    import loader
    import loader.onnx
    inputs, expected = case.data_sets[0]
    names = [v.name for v in case.model.graph.input
             if v.name not in {t.name for t in case.model.graph.initializer}]
    feeds = {name: np.asarray(array) for name, array in zip(names, inputs)}
    model, feeds, _ = _frozen(case.model, feeds)
    feeds = {name: np.asarray(array, dtype=np.float32) for name, array in feeds.items()}
    shapes = {name: array.shape for name, array in feeds.items()}
    try:
        net = loader.onnx.load_model(model, input_shapes=shapes)
    except loader.onnx.UnsupportedModelError as error:
        return "refused", "; ".join(p[3] for p in error.problems)
    except Exception as error:
        return "error", f"load_model: {type(error).__name__}: {error}"
    try:
        if through == "numpy":
            from conformance.network_reference import evaluate_network
            outputs = evaluate_network(net, feeds)
        else:
            with loader.Runtime() as runtime, runtime.load_network(net) as loaded:
                outputs = loaded.execute(feeds)
    except loader.NoBackendForLayerError as error:
        return "refused", f"no backend: {error}"
    except Exception as error:
        return "error", f"{type(error).__name__}: {error}".splitlines()[0][:300]
    out_names = [v.name for v in case.model.graph.output]
    for name, want in zip(out_names, expected):
        problem = close(np.asarray(outputs[name], dtype=np.float64), np.asarray(want,
                                                                               dtype=np.float64),
                        case)
        if problem:
            return "wrong", f"{name}: {problem}"
    return "passed", ""


def _child(case, through, connection):
    try:
        connection.send(run_case(case, through))
    except BaseException:
        connection.send(("error", traceback.format_exc(limit=2).splitlines()[-1]))


def run_isolated(case, through, timeout=60):
    parent, child = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_child,
                                                          args=(case, through, child))
    process.start()
    child.close()
    if parent.poll(timeout):
        result = parent.recv()
        process.join()
        return result
    process.kill()
    process.join()
    if process.exitcode is not None and process.exitcode < 0:
        return "crash", f"killed by signal {-process.exitcode}"
    return "crash", "no answer (hang)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--through", choices=("backend", "numpy"), default="backend")
    parser.add_argument("-k", dest="select", help="only tests whose name holds this")
    parser.add_argument("--list", action="store_true", help="one line per test")
    parser.add_argument("--in-process", action="store_true",
                        help="backend mode without a child process per test (faster)")
    args = parser.parse_args(argv)
    cases = float32_cases(args.select)
    table = collections.defaultdict(collections.Counter)
    reasons = collections.Counter()
    details = []
    for case in cases:
        if args.through == "backend" and not args.in_process:
            outcome, detail = run_isolated(case, args.through)
        else:
            outcome, detail = run_case(case, args.through)
        table[operators(case)][outcome] += 1
        if outcome == "refused":
            reasons[detail.split(":")[0][:90]] += 1
        if outcome != "passed":
            details.append((case.name, outcome, detail))
        if args.list:
            print(f"{outcome:<8} {case.name}: {detail[:150]}")
    outcomes = ("passed", "refused", "wrong", "error", "crash")
    print(f"\n{len(cases)} float32 node tests of onnx (through {args.through})")
    print(f"{'operator':<28}" + "".join(f"{o:>9}" for o in outcomes))
    for op in sorted(table):
        print(f"{op:<28}" + "".join(f"{table[op][o]:>9}" for o in outcomes))
    totals = collections.Counter()
    for counts in table.values():
        totals.update(counts)
    print(f"{'total':<28}" + "".join(f"{totals[o]:>9}" for o in outcomes))
    print("\nTop refusal reasons:")
    for reason, count in reasons.most_common(12):
        print(f"  {count:4}  {reason}")
    bad = [d for d in details if d[1] in ("wrong", "error", "crash")]
    if bad:
        print("\nWrong, errors and crashes:")
        for name, outcome, detail in bad[:60]:
            print(f"  {outcome:<6} {name}: {detail[:200]}")
    return 1 if totals["wrong"] or totals["error"] or totals["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
