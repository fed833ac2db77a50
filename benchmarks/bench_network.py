"""Real models through the runtime against ONNX Runtime: time per inference, load time, peak
memory, where the time goes, and the distance to this machine's arithmetic floor.

    python benchmarks/bench_network.py [--models mobilenet_v2,resnet18,...] [--threads 1,2]
                                       [--rounds 15] [--models-dir DIR] [--no-memory]
                                       [--layers 30] [--decisions] [--against OLD.so]

Each model is one of torchvision's (random weights, fixed seed, eval mode), exported to ONNX
once and kept in --models-dir (default ~/.cache/dynamic-backends/models; exporting needs torch
and torchvision, running needs onnx and onnxruntime: pip install -e '.[zoo]'). Batch 1,
3x224x224. For each model and each thread count T:

- time: ``loader.onnx.load_model`` then ``load_network`` on the reference backend
  (REFERENCE_BACKEND_THREADS=T), and an ONNX Runtime CPU session with T intra-op threads (and,
  at the largest T, with its default threading too; the faster one counts), in one child
  process per model and T; rounds interleaved, median of each; the ratio is throughput, ours
  over ONNX Runtime's (above 1: we are faster). Outputs are compared (relative to the largest
  magnitude) so that a fast wrong answer cannot pass unnoticed.
- load: import plus load_network, and ONNX Runtime's session creation.
- memory: peak RSS of a fresh process that loads the model and runs it three times, less the
  RSS it had with everything imported (one process for ours, one for ONNX Runtime's).
- floor: the model's multiply-add FLOPs (convolutions, fully connected, MatMul) over the peak
  that benchmarks/floors/fma_peak.c measures on T threads; ``ours/floor`` is how many times the
  floor our time is.
- profile: the reference backend's own events from a profiled execute, summed per kind of step
  (a fused step counts under the layer types it covers).
- decisions (--decisions): the per-step thread counts the compiled program made, as its profile
  events name them ("fused Convolution2d (2 threads)"; no count: the calling thread alone), with
  each step's time.
- against (--against OLD.so): another build of the reference backend (a copy of an older
  reference_backend/backends/Reference_CpuRef_backend.so), loaded in the same child process from
  a directory of its own and timed in the same interleaved rounds: this checkout's speed over
  its, and whether the two give the same bits.

Then the runtime's own time per layer: a chain of LAYERS cheap layers against a chain of one,
everything outside the backend call.
"""
import argparse
import json
import os
import resource
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _timing import interleaved, per_call  # noqa: E402

MODELS = ["mobilenet_v2", "mobilenet_v3_large", "resnet18", "resnet50", "efficientnet_b0",
          "vit_b_16"]
SIZE = 224


# -- the models ----------------------------------------------------------------------------------

def model_path(directory, name):
    return os.path.join(directory, f"{name}.onnx")


def ensure_model(directory, name):
    """The model's file, exported now if it is not there yet (None and why without torch)."""
    path = model_path(directory, name)
    if os.path.exists(path):
        return path, None
    try:
        import zoo_check
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError as error:
        return None, f"{path} is missing and exporting it needs torch and torchvision ({error})"
    exporter = "dynamo" if name in zoo_check.TRANSFORMERS else "torchscript"
    data = zoo_check.export(zoo_check.build(name), name, exporter, SIZE)
    os.makedirs(directory, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=directory, delete=False) as f:
        f.write(data)
    os.replace(f.name, path)
    return path, None


def network_flops(net):
    """2 x the multiply-adds of the convolutions, fully connected layers and MatMuls."""
    total = 0
    for layer in net.layers:
        out = net.tensor(layer.name).shape
        if layer.type in ("Convolution2d", "TransposeConvolution2d"):
            w = net.tensor(layer.inputs[1]).shape       # [O, kh, kw, I / groups]
            if layer.type == "Convolution2d":
                total += 2 * int(np.prod(out)) * int(np.prod(w[1:]))
            else:                                       # every input pixel meets the kernel
                x = net.tensor(layer.inputs[0]).shape
                total += 2 * int(np.prod(x)) * int(np.prod(w[:3]))
        elif layer.type == "DepthwiseConvolution2d":
            w = net.tensor(layer.inputs[1]).shape       # [1, kh, kw, C * multiplier]
            total += 2 * int(np.prod(out)) * w[1] * w[2]
        elif layer.type in ("FullyConnected", "MatMul"):
            total += 2 * int(np.prod(out)) * net.tensor(layer.inputs[0]).shape[-1]
    return total


# -- the floor -----------------------------------------------------------------------------------

def fma_peak(threads):
    """GFLOP/s of floors/fma_peak.c on ``threads`` threads (best of three), or None."""
    build = tempfile.mkdtemp()
    binary = os.path.join(build, "fma_peak")
    try:
        subprocess.run(["cc", "-O2", "-march=native", "-pthread",
                        os.path.join(HERE, "floors", "fma_peak.c"), "-o", binary],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return {t: None for t in threads}
    return {t: max(float(subprocess.run([binary, str(t)], capture_output=True, text=True,
                                        check=True).stdout.split()[1]) for _ in range(3))
            for t in threads}


# -- one model, in a child process ---------------------------------------------------------------

def _ort_session(path, threads):
    import onnxruntime as ort
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _input(proto_or_path):
    import onnx
    proto = onnx.load(proto_or_path, load_external_data=False)
    name = proto.graph.input[0].name
    shape = [d.dim_value or 1 for d in proto.graph.input[0].type.tensor_type.shape.dim]
    return name, np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def child_time(path, threads, rounds, with_default, against=None):
    import loader
    import loader.onnx
    name, x = _input(path)
    feeds = {name: x}
    start = time.perf_counter()
    net = loader.onnx.load_model(path)
    imported = time.perf_counter()
    runtime = loader.Runtime()
    loaded = runtime.load_network(net, backends=["CpuRef"])
    ours_load = (imported - start, time.perf_counter() - imported)
    start = time.perf_counter()
    sessions = {f"ort {threads}t": _ort_session(path, threads)}
    ort_load = time.perf_counter() - start
    if with_default:
        sessions["ort default"] = _ort_session(path, 0)

    got = next(iter(loaded.execute(feeds).values()))
    want = sessions[f"ort {threads}t"].run(None, feeds)[0]
    difference = float(np.max(np.abs(got - want))) / (float(np.max(np.abs(want))) or 1.0)

    candidates = {"ours": lambda: loaded.execute(feeds)}
    other = before = None
    if against:
        # another build of the reference backend, loaded from a directory of its own
        other_dir = tempfile.mkdtemp(prefix="bench-network-")
        shutil.copy(against, os.path.join(other_dir, "Reference_CpuRef_backend.so"))
        other = loader.Runtime(dynamic_backends_path=other_dir)
        before = other.load_network(net, backends=["CpuRef"])
        same = bool(np.array_equal(next(iter(before.execute(feeds).values())), got))
        candidates["against"] = lambda: before.execute(feeds)
    for label, session in sessions.items():
        candidates[label] = (lambda s: lambda: s.run(None, feeds))(session)
    one = min(interleaved(candidates, repeats=1, warmup=1).values())
    rounds = max(3, min(rounds, int(20.0 / max(one * len(candidates), 1e-3))))
    # ONNX Runtime's intra-op threads spin for tens of milliseconds after a run returns: whatever
    # runs next on the same cores within that time loses them (the reference backend's ResNet-18
    # on two threads measured 34 ms 20 ms after an ONNX Runtime run, 22 ms 50 ms after it)
    times = interleaved(candidates, repeats=rounds, warmup=1, settle=0.1)
    ort_label = min(sessions, key=lambda label: times[label])

    profile, decisions = {}, []
    types = {layer.name: layer.type for layer in net.layers}
    for round in range(3):
        time.sleep(0.1)             # ONNX Runtime's threads spinning (above) done
        loaded.execute(feeds, profile=True)
        for event in loaded.last_profile:
            if event.source != "backend":
                continue
            if round == 0:
                decisions.append((event.name, event.layers[0], (event.end_ns - event.start_ns) / 1e3))
            kinds = []
            for layer in event.layers:
                kind = types.get(layer, "?")
                if kind not in kinds:
                    kinds.append(kind)
            key = "+".join(kinds[:3]) + ("+..." if len(kinds) > 3 else "")
            profile[key] = profile.get(key, 0) + (event.end_ns - event.start_ns) / 3e6
    steps = [step.kind for step in loaded.plan]
    if before is not None:
        before.unload()
        other.close()
        shutil.rmtree(other_dir)
    result = {"ours_ms": times["ours"] * 1e3, "ort_ms": times[ort_label] * 1e3,
              "against_ms": times["against"] * 1e3 if against else None,
              "same_as_against": same if against else None,
              "ort_label": ort_label, "rounds": rounds, "difference": difference,
              "import_s": ours_load[0], "load_network_s": ours_load[1], "ort_load_s": ort_load,
              "layers": len(net.layers), "steps": len(steps), "flops": network_flops(net),
              "profile_ms": profile, "decisions": decisions}
    loaded.unload()
    runtime.close()
    return result


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def child_memory(path, which):
    """Peak RSS above the RSS with everything imported, in MiB."""
    import onnxruntime  # noqa: F401  (both processes import the same modules)
    import loader
    import loader.onnx
    name, x = _input(path)
    base = _rss_kib()
    if which == "ours":
        runtime = loader.Runtime()
        loaded = runtime.load_network(loader.onnx.load_model(path), backends=["CpuRef"])
        run = lambda: loaded.execute({name: x})    # noqa: E731
    else:
        session = _ort_session(path, 0)
        run = lambda: session.run(None, {name: x})     # noqa: E731
    for _ in range(3):
        run()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak_mib": (peak - base) / 1024}


def in_child(args, threads=None):
    env = dict(os.environ)
    if threads:
        env["REFERENCE_BACKEND_THREADS"] = str(threads)
    completed = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"] + args,
                               capture_output=True, text=True, env=env)
    if completed.returncode != 0:
        tail = (completed.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {completed.returncode}: {tail}"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


# -- the runtime's own time per layer ------------------------------------------------------------

def overhead_per_layer(runtime, layers, repeats):
    """(ns per execute, ns inside the backend calls) for a chain of ``layers`` cheap layers."""
    import loader
    net = loader.Network()
    t = net.add_input("x", (1, 16))
    for i in range(layers):
        d = {"function": "relu"} if i % 2 == 0 else {"function": "leaky_relu", "a": 0.5}
        t = net.add_layer("Activation", [t], d, name=f"act{i}")
    net.add_output(t, "y")
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    calls = 2000
    with runtime.load_network(net, backends=["CpuRef"]) as loaded:
        seconds = interleaved({"execute": per_call(lambda: loaded.execute({"x": x}), calls)},
                              repeats=repeats)["execute"]
        spans = []
        for _ in range(calls):
            loaded.execute({"x": x}, profile=True)
            spans.append(sum(e.end_ns - e.start_ns for e in loaded.last_profile[1:]
                             if e.source == "runtime"))
    return seconds / calls * 1e9, statistics.median(spans)


def print_overhead(layers, repeats):
    import loader
    with loader.Runtime() as runtime:
        many, many_backend = overhead_per_layer(runtime, layers, repeats)
        one, one_backend = overhead_per_layer(runtime, 1, repeats)
    own_many, own_one = many - many_backend, one - one_backend
    print(f"\nthe runtime's own time (outside the backend call): {own_one / 1e3:.2f} us for 1 "
          f"layer, {own_many / 1e3:.2f} us for {layers}; per extra layer "
          f"{(own_many - own_one) / (layers - 1) / 1e3:.3f} us")


# -- the report ----------------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", default=None,
                        help="comma-separated thread counts (default: 1 and the CPU count)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--models-dir", default=os.path.expanduser(
        "~/.cache/dynamic-backends/models"))
    parser.add_argument("--no-memory", action="store_true", help="skip the peak RSS processes")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--decisions", action="store_true",
                        help="print each step's thread count as the compiled program decided it")
    parser.add_argument("--against", metavar="BACKEND.so",
                        help="another build of the reference backend (a copy of an older "
                             "reference_backend/backends/Reference_CpuRef_backend.so), timed "
                             "interleaved with this checkout's: the before and after on the same "
                             "load, and whether the outputs are the same bits")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        kind, path, *rest = args.child
        if kind == "time":
            result = child_time(path, int(rest[0]), int(rest[1]), rest[2] == "1",
                                rest[3] if len(rest) > 3 else None)
        else:
            result = child_memory(path, rest[0])
        print(json.dumps(result))
        return 0

    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError as error:
        print(f"bench_network needs onnx and onnxruntime ({error}): pip install -e '.[zoo]'",
              file=sys.stderr)
        return 2
    cpus = os.cpu_count() or 1
    threads = sorted({int(t) for t in args.threads.split(",")}) if args.threads else \
        sorted({1, cpus})
    peaks = fma_peak(threads)
    print(f"{cpus} CPUs; ONNX Runtime {onnxruntime.__version__}; FP32 FMA floor " + ", ".join(
        f"{t} thread{'s' * (t > 1)} {p:.0f} GFLOP/s" if p else f"{t}: not measured"
        for t, p in peaks.items()))
    print(f"\n{'model':<20} {'T':>2} {'GFLOP':>6} {'ours ms':>8} {'ORT ms':>8} {'ratio':>6} "
          f"{'floor ms':>8} {'ours/floor':>10} {'ORT/floor':>9} {'max rel diff':>12} "
          f"{'import s':>8} {'load s':>7} {'ORT load s':>10}")
    profiles = {}
    for name in [m for m in args.models.split(",") if m]:
        path, why = ensure_model(args.models_dir, name)
        if path is None:
            print(f"{name:<20} skipped: {why}")
            continue
        for t in threads:
            row = in_child(["time", path, str(t), str(args.rounds), str(int(t == threads[-1]))]
                           + ([os.path.abspath(args.against)] if args.against else []), t)
            if "error" in row:
                print(f"{name:<20} {t:>2} FAILED: {row['error'][:160]}")
                continue
            floor_ms = row["flops"] / (peaks[t] * 1e9) * 1e3 if peaks[t] else float("nan")
            print(f"{name:<20} {t:>2} {row['flops'] / 1e9:>6.2f} {row['ours_ms']:>8.2f} "
                  f"{row['ort_ms']:>8.2f} {row['ort_ms'] / row['ours_ms']:>6.2f} "
                  f"{floor_ms:>8.2f} {row['ours_ms'] / floor_ms:>10.2f} "
                  f"{row['ort_ms'] / floor_ms:>9.2f} {row['difference']:>12.1e} "
                  f"{row['import_s']:>8.2f} {row['load_network_s']:>7.2f} "
                  f"{row['ort_load_s']:>10.2f}   ({row['layers']} layers, {row['steps']} "
                  f"steps, ORT: {row['ort_label']})", flush=True)
            if row.get("against_ms"):
                print(f"{'':<20} {t:>2} against {args.against}: {row['against_ms']:.2f} ms, this "
                      f"checkout {row['against_ms'] / row['ours_ms']:.3f}x its speed, "
                      f"{'the same bits' if row['same_as_against'] else 'different bits'}",
                      flush=True)
            profiles[(name, t)] = row["profile_ms"]
            if args.decisions:
                threaded = sum("threads)" in event for event, _, _ in row["decisions"])
                print(f"  per-step thread decisions ({threaded} of {len(row['decisions'])} steps "
                      f"on more than one thread; us from one profiled execute):")
                for event, layer, us in row["decisions"]:
                    print(f"    {event:<44} {us:>8.1f}  {layer}")
        if not args.no_memory:
            ours, theirs = (in_child(["memory", path, which]) for which in ("ours", "ort"))
            if "error" in ours or "error" in theirs:
                print(f"{name:<20} peak memory FAILED: {ours.get('error') or theirs['error']}")
            else:
                print(f"{name:<20} peak RSS above the imports: ours {ours['peak_mib']:.0f} MiB, "
                      f"ONNX Runtime {theirs['peak_mib']:.0f} MiB")

    print("\nwhere our time goes (the reference backend's own events, ms per inference):")
    for (name, t), profile in profiles.items():
        total = sum(profile.values()) or 1.0
        top = sorted(profile.items(), key=lambda item: -item[1])[:6]
        print(f"  {name} {t}t: " + ", ".join(f"{kind} {ms:.2f} ({ms / total:.0%})"
                                             for kind, ms in top))
    print_overhead(args.layers, 5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
