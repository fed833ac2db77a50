"""Generated layer cases: seeded, reproducible sweeps beside the fixed ones of layer_cases.yaml.

Per layer, the sweeps cover ranks and shapes (size-1 dimensions, broadcasting both ways and across
ranks), reduction and channel lengths around every SIMD and blocking boundary up to a few
thousand, every class of parameters (1x1 and large kernels, stride above the kernel, padding on
each side alone, dilation, depthwise multipliers, stride, dilation and kernel different per axis)
and classes of values (large magnitudes, all-negative windows next to padding, +0 and -0,
denormals, negative and zero softmax beta). A second family runs one workload several times with
new inputs and, where the backend declares NonConstWeights, new weights.

The shapes and parameters are fixed; the values come from the run's seed (``--seed``, in the
report and in every reproduce command) and the case id; conformance/layer_runs.py makes them and
judges the outputs.
"""
from conformance.families import register_families
from conformance.layer_runs import WEIGHTED, compare, describe, inputs_for, layer_cases, spec
from conformance.registry import Failed, NotSupported, case


# -- the sweeps --------------------------------------------------------------------------------

BOUNDARIES = [1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256,
              257, 1000, 1023, 1024, 1025, 2047, 2048, 2049, 4097]
CHANNELS = [1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65]
SIDES = ([1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1])


def _activations():
    functions = [{"function": "relu"}, {"function": "bounded_relu", "a": 1.0, "b": -1.0},
                 {"function": "sigmoid"}, {"function": "tanh"}, {"function": "leaky_relu", "a": 0.01}]
    classes = [("large", 1e4, [257]), ("zeros", 1.0, [64]), ("denormal", 1.0, [33]),
               ("uniform", 20.0, [1]), ("uniform", 20.0, [2, 1, 9]), ("uniform", 20.0, [1025])]
    specs = []
    for function in functions:
        for values, scale, shape in classes:
            specs.append(spec("activation", len(specs), "Activation", [shape], function, values,
                              scale))
    return specs


def _broadcasts():
    pairs = [([5], [3, 5]), ([3, 1], [2, 1, 4]), ([1], [2, 3]), ([4, 1], [2, 3, 1, 1]),
             ([6], [2, 3, 1, 6]), ([1, 4, 1], [3, 1, 5]), ([2, 1, 3], [4, 1]), ([3, 5], [5]),
             ([1, 1], [1]), ([33], [33]), ([2, 3, 4], [1]), ([1], [1]), ([7, 1, 1, 2], [1, 3, 1]),
             ([1, 2, 1, 1, 3], [4, 1, 1])]
    specs = []
    for layer in ("Addition", "Multiplication"):
        for a, b in pairs:
            specs.append(spec(layer.lower(), len(specs), layer, [a, b]))
    return specs


def _fully_connected():
    specs = []
    for i, k in enumerate(BOUNDARIES):
        transpose = i % 2 == 0
        shapes = [[2, k], [3, k] if transpose else [k, 3]] + ([[3]] if i % 3 == 0 else [])
        specs.append(spec("fc", i, "FullyConnected", shapes, {"transpose_weights": transpose}))
    specs.append(spec("fc", len(specs), "FullyConnected", [[5, 1], [1, 1]], {}, "denormal"))
    return specs


def _convolutions():
    specs, family = [], "conv"

    def add(x, w, bias=False, values="uniform", **d):
        shapes = [x, w] + ([[w[0]]] if bias else [])
        specs.append(spec(family, len(specs), "Convolution2d", shapes, d or None, values))
    for stride in ([2, 2], [3, 3], [2, 1], [1, 3]):
        add([1, 7, 9, 5], [4, 1, 1, 5], stride=stride)
    add([2, 6, 6, 3], [2, 1, 1, 3], bias=True, stride=[2, 2], padding=[1, 0, 0, 1])
    for stride in ([2, 1], [1, 2], [3, 1]):
        add([1, 8, 7, 3], [2, 3, 3, 3], stride=stride, padding=[1, 1, 1, 1])
    add([1, 9, 9, 2], [2, 2, 2, 2], stride=[3, 3])
    for side in SIDES:
        add([1, 6, 7, 2], [3, 3, 3, 2], padding=side)
        add([1, 5, 6, 2], [2, 2, 3, 2], padding=side)
    for dilation in ([2, 1], [1, 3], [2, 3]):
        add([1, 10, 11, 2], [2, 3, 2, 2], dilation=dilation, padding=[1, 0, 2, 1])
    add([1, 9, 9, 2], [2, 7, 7, 2], padding=[3, 3, 3, 3])
    add([1, 8, 6, 3], [2, 5, 3, 3], bias=True)
    add([1, 11, 13, 3], [2, 3, 2, 3], stride=[2, 3], dilation=[1, 2], padding=[0, 1, 2, 0])
    for c in CHANNELS:
        add([1, 4, 5, c], [3, 3, 3, c], bias=c % 2 == 1, padding=[1, 1, 1, 1])
    add([1, 5, 5, 2], [2, 3, 3, 2], values="zeros", padding=[1, 1, 1, 1])
    return specs


def _depthwise():
    specs = []

    def add(x, w, bias=False, **d):
        shapes = [x, w] + ([[w[3]]] if bias else [])
        specs.append(spec("depthwise", len(specs), "DepthwiseConvolution2d", shapes, d or None))
    for m in (1, 2, 3):
        add([1, 6, 7, 3], [1, 3, 3, 3 * m], bias=m == 2, padding=[1, 1, 1, 1])
    for stride in ([2, 1], [1, 2], [3, 3]):
        add([1, 9, 8, 2], [1, 3, 3, 4], stride=stride)
    add([1, 5, 5, 2], [1, 1, 1, 2], stride=[2, 2])
    for dilation in ([2, 1], [1, 2]):
        add([1, 9, 9, 2], [1, 3, 2, 2], dilation=dilation, padding=[1, 1, 0, 2])
    for side in SIDES:
        add([1, 6, 6, 3], [1, 3, 3, 3], padding=side)
    for c in (7, 8, 9, 17, 33):
        add([1, 4, 4, c], [1, 3, 3, c], padding=[1, 1, 1, 1])
    return specs


def _poolings():
    specs = []

    def add(pool, x, kernel, values="uniform", **d):
        specs.append(spec("pool", len(specs), "Pooling2d", [x], {"pool": pool, "kernel": kernel, **d},
                          values))
    for pool in ("max", "average"):
        for side in SIDES:
            add(pool, [1, 6, 7, 3], [3, 3], padding=side)
            add(pool, [1, 5, 7, 2], [2, 3], padding=side, stride=[1, 2])
        add(pool, [1, 7, 7, 2], [2, 2], stride=[3, 3])
        add(pool, [2, 6, 5, 3], [3, 2], stride=[2, 1], padding=[1, 2, 1, 1])
        add(pool, [1, 1, 1, 4], [1, 1])
        add(pool, [1, 9, 9, 17], [3, 3], stride=[2, 2], padding=[1, 1, 1, 1])
    for side in SIDES + ([1, 1, 1, 1],):
        add("max", [1, 6, 6, 3], [3, 3], "negative", padding=side)
    return specs


def _softmaxes():
    specs = []
    betas = [1.0, 0.5, -1.0, 2.0, -0.5, 0.0]
    for i, cols in enumerate([1, 2, 7, 8, 9, 63, 64, 65, 100, 127, 128, 129, 1000, 1025, 4097]):
        specs.append(spec("softmax", len(specs), "Softmax", [[2, cols]], {"beta": betas[i % 6]},
                          scale=5.0))
    for beta in (1.0, -1.0, -0.25, 0.0):
        for cols in (10, 65):
            specs.append(spec("softmax", len(specs), "Softmax", [[3, cols]], {"beta": beta},
                              "large", 1e3))
    specs.append(spec("softmax", len(specs), "Softmax", [[2, 2, 3, 5]], {"beta": -2.0}, scale=3.0))
    specs.append(spec("softmax", len(specs), "Softmax", [[4, 8]], {"beta": 1.0}, "zeros"))
    return specs


def _reshapes():
    pairs = [([2, 3, 4], [24]), ([24], [2, 3, 4]), ([1, 5, 1], [5]), ([7], [7, 1, 1]),
             ([4, 6], [-1, 3]), ([1], [1, 1, 1, 1, 1, 1, 1, 1])]
    return [spec("reshape", i, "Reshape", [a], {"shape": b}) for i, (a, b) in enumerate(pairs)]


register_families({
    "activation": _activations, "broadcast": _broadcasts, "fully-connected": _fully_connected,
    "convolution": _convolutions, "depthwise": _depthwise, "pooling": _poolings,
    "softmax": _softmaxes, "reshape": _reshapes,
}, "LAYER-1")


# -- repeated execution of one workload --------------------------------------------------------

def _repeat_case(layer):
    def run(subject):
        import loader
        backend = subject.backend()
        candidates = [d for d in layer_cases() if d["layer"] == layer]
        data = next((d for d in candidates if backend.is_layer_supported(
            d["layer"], [tuple(s) for s in d["inputs"]], d.get("descriptor"))), None)
        if data is None:
            raise NotSupported(f"the backend supports none of the kit's {layer} cases")
        nonconst = bool(backend.capabilities.get("NonConstWeights", False))
        weights_from = 1 if layer in WEIGHTED else len(data["inputs"])
        manager = backend.create_memory_manager() if backend.features["MemoryManager"] else None
        workload = backend.create_workload_factory(manager).create_workload(
            data["layer"], [tuple(s) for s in data["inputs"]], data.get("descriptor"))
        generated = dict(data, values="uniform", scale=data.get("scale", 1.0))

        def fresh(key):
            return inputs_for(generated, subject.seed, key)
        inputs = fresh("first")
        steps = [("the first execution", None),
                 ("new values written into the same input buffers", "in place"),
                 ("new input arrays", "new arrays")]
        if nonconst and weights_from < len(inputs):
            steps += [("new weights in the same buffers (the backend declares NonConstWeights)",
                       "weights in place"),
                      ("new weight arrays (the backend declares NonConstWeights)", "weights")]
        try:
            for number, (what, change) in enumerate(steps, 1):
                new = fresh(f"step{number}")
                if change == "in place":
                    for i in range(weights_from):
                        inputs[i][...] = new[i]
                elif change == "new arrays":
                    inputs = new[:weights_from] + inputs[weights_from:]
                elif change == "weights in place":
                    for i in range(weights_from, len(inputs)):
                        inputs[i][...] = new[i]
                elif change == "weights":
                    inputs = inputs[:weights_from] + new[weights_from:]
                if manager is not None:
                    manager.acquire()
                subject.note(f"execution {number} of one workload of {describe(data)}, after {what}")
                try:
                    [out] = workload.execute(inputs)
                finally:
                    if manager is not None:
                        manager.release()
                compare(generated, inputs, out, subject.seed,
                        f"execution {number} of one workload, after {what}")
        except loader.BackendError as error:
            raise Failed(f"{describe(data)}: a repeated execution failed: {error}")
    return run


def _register_repeats():
    from loader.layers import LAYERS
    for name in LAYERS:
        case(f"layers.repeated-{name}", "LAYER-2", tier="full")(_repeat_case(name))


_register_repeats()
