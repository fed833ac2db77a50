"""The model zoo check: torchvision's models with random weights (fixed seed, eval mode),
exported by ``torch.onnx.export`` in both modes (the dynamo exporter and the TorchScript one at
opset 17), imported with ``loader.onnx.load_model`` and run on the backends, each compared with
ONNX Runtime on the same random input: the largest difference must be at most 1e-4 of the
output's largest magnitude. Prints one row per model and exporter: ONNX nodes, layers after
import, the relative difference, import time, and our execute time next to ONNX Runtime's
(interleaved, medians of rounds).

    python benchmarks/zoo_check.py [--models resnet18,mobilenet_v2] [--exporters dynamo,torchscript]
                                   [--rounds 10] [--through backend|numpy] [--keep DIR]
                                   [--file MODEL.onnx]...

``--file`` checks a model exported elsewhere too (a Keras model through tf2onnx, say: see
benchmarks/README.md for the command), with a random input of the shape it declares.

Needs the development extra: pip install -e '.[zoo]' (torch, torchvision, onnxscript,
onnxruntime). Without them it says so and exits 2.
"""
import argparse
import io
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

CLASSIFIERS = ["resnet18", "resnet50", "resnext50_32x4d", "mobilenet_v2", "mobilenet_v3_small",
               "mobilenet_v3_large", "efficientnet_b0", "squeezenet1_1", "shufflenet_v2_x1_0",
               "densenet121", "googlenet", "mnasnet1_0", "regnet_y_400mf", "alexnet", "vgg11",
               "convnext_tiny"]
TRANSFORMERS = ["vit_b_16"]              # the dynamo exporter only
SEGMENTATION = ["lraspp_mobilenet_v3_large"]
SMALL = ["resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0"]
TOLERANCE = 1e-4


def build(name):
    import torch
    import torchvision
    torch.manual_seed(0)
    if name in SEGMENTATION:
        net = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)
    elif name == "googlenet":
        net = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    else:
        net = getattr(torchvision.models, name)(weights=None)
    with torch.no_grad():           # a head initialized to zeros would make every output 0
        for parameter in net.parameters():
            if parameter.dim() >= 2 and not parameter.any():
                parameter.normal_(0, 0.02)
        # fresh batch normalizations are identities (mean 0, variance 1, scale 1, shift 0): an
        # import that mishandled their statistics would pass unseen
        for module in net.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.running_mean.normal_(0, 0.1)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0, 0.1)
    net.eval()
    return net


class _OutputOnly:
    """Segmentation models return a dict: export its 'out' tensor."""

    def __new__(cls, net):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = net

            def forward(self, x):
                out = self.net(x)
                return out["out"] if isinstance(out, dict) else out
        return Wrapped().eval()


def export(net, name, exporter, size=224) -> bytes:
    import torch
    x = torch.randn(1, 3, size, size)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            program = torch.onnx.export(net, (x,), dynamo=True, verbose=False)
            program.save(buffer)
        else:
            torch.onnx.export(net, (x,), buffer, dynamo=False, opset_version=17,
                              input_names=["input"], output_names=["output"])
    return buffer.getvalue()


def median_ms(run, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def check(name, exporter, rounds, through, keep=None, data=None):
    import onnx
    import onnxruntime as ort
    import loader
    import loader.onnx
    if data is None:
        net = build(name)
        if name in SEGMENTATION:
            net = _OutputOnly(net)
        data = export(net, name, exporter)
        if keep:
            with open(os.path.join(keep, f"{name}.{exporter}.onnx"), "wb") as f:
                f.write(data)
    proto = onnx.load_model_from_string(data)
    input_name = proto.graph.input[0].name
    shape = [d.dim_value or 1 for d in proto.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    start = time.perf_counter()
    network = loader.onnx.load_model(data)
    import_s = time.perf_counter() - start
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, {input_name: x})[0]
    row = {"model": name, "exporter": exporter, "nodes": len(proto.graph.node),
           "layers": len(network.layers), "import_s": import_s}
    if through == "numpy":
        from conformance.network_reference import evaluate_network
        got = next(iter(evaluate_network(network, {input_name: x}).values()))
        ours = float("nan")
        theirs = median_ms(lambda: session.run(None, {input_name: x}), rounds)
    else:
        with loader.Runtime() as runtime, runtime.load_network(network) as loaded:
            got = next(iter(loaded.execute({input_name: x}).values()))
            ours_t, theirs_t = [], []
            for _ in range(rounds):          # interleaved, so both see the same machine
                ours_t.append(median_ms(lambda: loaded.execute({input_name: x}), 1))
                theirs_t.append(median_ms(lambda: session.run(None, {input_name: x}), 1))
            ours, theirs = statistics.median(ours_t), statistics.median(theirs_t)
    scale = float(np.max(np.abs(want))) or 1.0
    row.update(difference=float(np.max(np.abs(got - want))) / scale, ours_ms=ours,
               ort_ms=theirs)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None,
                        help="comma-separated (default: all, or none when --file is given)")
    parser.add_argument("--exporters", default="dynamo,torchscript")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--through", choices=("backend", "numpy"), default="backend")
    parser.add_argument("--keep", metavar="DIR", help="keep the exported models here")
    parser.add_argument("--small", action="store_true", help="only the small models")
    parser.add_argument("--file", action="append", default=[], metavar="MODEL.onnx",
                        help="also check a model exported elsewhere")
    args = parser.parse_args(argv)
    try:
        import onnxruntime  # noqa: F401
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as error:
        print(f"the zoo check needs torch, torchvision and onnxruntime ({error}): "
              f"pip install -e '.[zoo]'", file=sys.stderr)
        return 2
    if args.small:
        models = SMALL
    elif args.models is not None:
        models = [m for m in args.models.split(",") if m]
    else:
        models = [] if args.file else CLASSIFIERS + TRANSFORMERS + SEGMENTATION
    print(f"{'model':<26} {'exporter':<12} {'nodes':>6} {'layers':>6} {'max rel diff':>13} "
          f"{'import s':>9} {'ours ms':>9} {'ORT ms':>9} {'ratio':>6}")
    failures = 0
    for name in models:
        for exporter in [e for e in args.exporters.split(",") if e]:
            if name in TRANSFORMERS and exporter != "dynamo":
                continue
            try:
                row = check(name, exporter, args.rounds, args.through, args.keep)
            except Exception as error:      # report and go on with the next model
                failures += 1
                print(f"{name:<26} {exporter:<12} FAILED: {type(error).__name__}: "
                      f"{str(error).splitlines()[0][:160]}")
                continue
            ok = row["difference"] <= TOLERANCE
            failures += not ok
            ratio = row["ort_ms"] / row["ours_ms"] if row["ours_ms"] == row["ours_ms"] else \
                float("nan")
            print(f"{name:<26} {exporter:<12} {row['nodes']:>6} {row['layers']:>6} "
                  f"{row['difference']:>13.2e} {row['import_s']:>9.2f} {row['ours_ms']:>9.1f} "
                  f"{row['ort_ms']:>9.1f} {ratio:>6.2f}{'' if ok else '  TOO FAR'}", flush=True)
    for path in args.file:
        with open(path, "rb") as f:
            data = f.read()
        name = os.path.basename(path)
        try:
            row = check(name, "(file)", args.rounds, args.through, data=data)
        except Exception as error:
            failures += 1
            print(f"{name:<26} {'(file)':<12} FAILED: {type(error).__name__}: "
                  f"{str(error).splitlines()[0][:160]}")
            continue
        ok = row["difference"] <= TOLERANCE
        failures += not ok
        ratio = row["ort_ms"] / row["ours_ms"] if row["ours_ms"] == row["ours_ms"] else float("nan")
        print(f"{name:<26} {'(file)':<12} {row['nodes']:>6} {row['layers']:>6} "
              f"{row['difference']:>13.2e} {row['import_s']:>9.2f} {row['ours_ms']:>9.1f} "
              f"{row['ort_ms']:>9.1f} {ratio:>6.2f}{'' if ok else '  TOO FAR'}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
