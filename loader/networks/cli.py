"""``backend-loader plan`` and ``backend-loader run`` (docs/networks.md, docs/onnx.md): a network
file (.json or .yaml, constants in a .npz beside it) or an ONNX model (.onnx).

Exit codes: 0 done, 1 the network could not be planned or run (the message says why), 2 usage.
"""
import json
import os
import sys

from loader.errors import BackendError


def _backends(text):
    if text is None:
        return None
    return [b.strip() for b in text.split(",") if b.strip()]


def read_network(path, input_shapes=None):
    """The network in ``path``: an ONNX model (.onnx, with ``input_shapes`` for its symbolic
    dimensions) or a network file."""
    from loader.networks.network import Network
    if os.fspath(path).endswith(".onnx"):
        import loader.onnx
        return loader.onnx.load_model(path, input_shapes=input_shapes)
    if input_shapes:
        raise ValueError("--input-shape applies to ONNX models (.onnx) only")
    return Network.load(path)


def _input_shapes(specs):
    shapes = {}
    for spec in specs or ():
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(v) for v in dims.split(","))
        except ValueError:
            shape = None
        if not sep or not name or not shape:
            raise ValueError(f"--input-shape {spec!r}: expected NAME=D1,D2,... (integers)")
        shapes[name] = shape
    return shapes


def _load(args):
    """(runtime, loaded network) for the command's NETWORK, --input-shape, --backends and --path
    (checked by the caller)."""
    from loader.runtime import Runtime
    network = read_network(args.network, _input_shapes(args.input_shape))
    runtime = Runtime(dynamic_backends_path=args.path)
    try:
        return runtime, runtime.load_network(network, backends=_backends(args.backends))
    except BaseException:
        runtime.close()
        raise


def _fail(error) -> int:
    sys.stderr.write(f"backend-loader: {error}\n")
    return 1


def format_plan(report: dict, failed: dict) -> str:
    lines = ["Layers:"]
    width = max((len(layer["name"]) for layer in report["layers"]), default=0)
    for layer in report["layers"]:
        origin = f"  (ONNX node {layer['onnx_node']})" if layer.get("onnx_node") and \
            layer["onnx_node"] != layer["name"] else ""
        lines.append(f"  {layer['name']:<{width}}  {layer['type']:<22}  -> {layer['backend']}"
                     f"{origin}")
        for backend, reason in layer["declined"].items():
            lines.append(f"  {'':<{width}}  declined by {backend}: {reason}")
    lines.append("")
    lines.append("Steps:")
    for k, step in enumerate(report["steps"]):
        lines.append(f"  {k:>3}  {step['backend']:<16} {step['kind']:<9} {', '.join(step['layers'])}")
    substitutions = [s for s in report["steps"] if s["kind"] == "compiled"]
    lines.append("")
    lines.append(f"Substitutions: {len(substitutions) or 'none'}")
    for step in substitutions:
        lines.append(f"  {step['backend']}: {' + '.join(step['layers'])}")
    lines.append(f"Failed layers: {'none' if not failed else ''}".rstrip())
    for layer, by_backend in failed.items():
        for backend, reason in by_backend.items():
            lines.append(f"  {layer} on {backend}: {reason}")
    return "\n".join(lines) + "\n"


def _plan(args) -> int:
    try:
        runtime, loaded = _load(args)
    except (BackendError, OSError, ValueError, ImportError) as error:
        return _fail(error)
    with runtime, loaded:
        report = loaded.plan_report()
        if args.json:
            json.dump(report, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            sys.stdout.write(format_plan(report, loaded.failed))
    return 0


def _inputs(specs):
    import numpy as np
    inputs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--input {spec!r}: expected NAME=FILE.npy")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as error:
            raise ValueError(f"--input {name}: cannot read {path}: {error}") from None
    return inputs


def _check_outputs(args) -> None:
    """What ``run`` will write, checked before anything is loaded: a usage error naming the
    option and what is wrong with its path."""
    problem = _unwritable_file(args.profile) if args.profile else None
    if problem:
        args.parser_of_command.error(f"--profile {args.profile}: {problem}")
    problem = _unusable_directory(args.output_dir)
    if problem:
        args.parser_of_command.error(f"--output-dir {args.output_dir}: {problem}")


def _unwritable_file(path):
    if os.path.isdir(path):
        return "is a directory; give a file name for the trace"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"the directory {directory} does not exist"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"the directory {directory} is not writable"
    return None


def _unusable_directory(path):
    if os.path.exists(path):
        if not os.path.isdir(path):
            return "exists and is not a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else "is not writable"
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"cannot be created: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created: {parent} is not writable"
    return None


def _run(args) -> int:
    import numpy as np
    _check_outputs(args)
    try:
        inputs = _inputs(args.input or [])
        runtime, loaded = _load(args)
    except (BackendError, OSError, ValueError, ImportError) as error:
        return _fail(error)
    with runtime, loaded:
        try:
            outputs = loaded.execute(inputs, profile=bool(args.profile))
        except (BackendError, ValueError, TypeError) as error:
            return _fail(error)
        try:
            os.makedirs(args.output_dir, exist_ok=True)
            for name, array in outputs.items():
                np.save(os.path.join(args.output_dir, f"{name}.npy"), array)
            if args.profile:
                loaded.save_trace(args.profile)
        except OSError as error:
            return _fail(error)
    for name in outputs:
        print(os.path.join(args.output_dir, f"{name}.npy"))
    return 0


def add_network_commands(commands) -> None:
    """Register ``plan`` and ``run`` on the CLI's subparsers."""
    plan = commands.add_parser(
        "plan", help="show which backend takes each layer of a network, and why not the others",
        description="Load NETWORK (.json or .yaml, constants in a .npz beside it, or an ONNX "
                    "model, .onnx) onto the backends and print the assignment of each layer with every backend's reason "
                    "to decline, the steps in execution order, substitutions and failed layers.")
    plan.add_argument("network", metavar="NETWORK")
    plan.add_argument("--input-shape", action="append", metavar="NAME=1,3,224,224",
                     help="an ONNX model's input shape, fixing its symbolic dimensions "
                          "(repeat for each input)")
    plan.add_argument("--backends", metavar="A,B", help="backend ids in preference order "
                      "(default: every registered backend)")
    plan.add_argument("--path", metavar="DIR", help="load backends from DIR only")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.set_defaults(handler=_plan, parser_of_command=plan)

    run = commands.add_parser(
        "run", help="run a network on input arrays and write its outputs",
        description="Load NETWORK, run it on the --input arrays and write each output as "
                    "NAME.npy into --output-dir.")
    run.add_argument("network", metavar="NETWORK")
    run.add_argument("--input-shape", action="append", metavar="NAME=1,3,224,224",
                     help="an ONNX model's input shape, fixing its symbolic dimensions "
                          "(repeat for each input)")
    run.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                     help="an input array (repeat for each input)")
    run.add_argument("--backends", metavar="A,B", help="backend ids in preference order")
    run.add_argument("--path", metavar="DIR", help="load backends from DIR only")
    run.add_argument("--profile", metavar="TRACE.json",
                     help="also write a Chrome trace of the run (Perfetto opens it)")
    run.add_argument("--output-dir", default=".", metavar="DIR",
                     help="where to write the outputs (default: the current directory)")
    run.set_defaults(handler=_run, parser_of_command=run)
