"""What the NET cases share: random networks of the layers a backend claims, offered whole to its
optimizer, the answer checked by the loader's own ``planning.validate_views``, and each
substitution run on its own on random boundary inputs. Families of cases (network_cases,
network_hostile) import this; it imports none of them."""
import numpy as np

from conformance.registry import Failed, NotSupported

LAYERS_PER_NETWORK = 8


def candidates(rng, net, current, history):
    """Layer candidates (type, inputs, descriptor) that fit after tensor ``current``."""
    shape = net.tensor(current.name).shape
    options = [("Activation", [current],
                {"function": fn, "a": 0.5 if fn == "leaky_relu" else 6.0, "b": 0.0}, [])
               for fn in ("relu", "bounded_relu", "sigmoid", "tanh", "leaky_relu")]
    if len(shape) == 4:
        c = shape[3]
        o = int(rng.integers(2, 7))
        options.append(("Convolution2d", [current], {"padding": 1},
                        [(o, 3, 3, c)] + ([(o,)] if rng.integers(2) else [])))
        options.append(("DepthwiseConvolution2d", [current], {"padding": [1, 0]},
                        [(1, 3, 3, c)] + ([(c,)] if rng.integers(2) else [])))
        options.append(("Pooling2d", [current], {"pool": "max", "kernel": 2, "stride": 1}, []))
    if len(shape) == 2:
        m = int(rng.integers(3, 9))
        options.append(("FullyConnected", [current], {}, [(m, shape[1])] +
                        ([(m,)] if rng.integers(2) else [])))
        options.append(("Softmax", [current], {"beta": 1.0}, []))
    same = [t for t in history if net.tensor(t.name).shape == shape and t.name != current.name]
    if same:
        options.append(("Addition", [current, same[int(rng.integers(len(same)))]], {}, []))
    return options


def random_network(backend, seed):
    """A network of up to LAYERS_PER_NETWORK layers, each of a type and shape the backend says
    it supports; None when it supports none of the candidates."""
    import loader
    rng = np.random.default_rng(seed)
    net = loader.Network()
    shape = (1, 6, 7, 3) if seed % 2 else (4, 10)
    current = net.add_input("x", shape)
    history = [current]
    for k in range(LAYERS_PER_NETWORK):
        options = candidates(rng, net, current, history)
        rng.shuffle(options)
        for layer, inputs, descriptor, constants in options:
            shapes = [net.tensor(t.name).shape for t in inputs] + constants
            try:
                if not backend.is_layer_supported(layer, shapes, descriptor):
                    continue
            except loader.BackendError:
                continue
            sources = list(inputs)
            for j, constant in enumerate(constants):
                sources.append(net.add_constant(f"c{k}_{j}", (rng.uniform(-1, 1, constant) * 0.5)
                                                .astype(np.float32)))
            current = net.add_layer(layer, sources, descriptor, name=f"l{k}")
            history.append(current)
            break
        else:
            break
    if not net.layers:
        return None
    net.add_output(current, "y")
    return net


def note(backend, call):
    """Name the backend call about to be made (conformance.tracing), so that a crash or a hang
    in it is reported by that name; returns the loader object behind a traced one."""
    from conformance import tracing
    if isinstance(backend, tracing.Traced):
        backend._record.note(call)
        return backend._target
    return backend


def offer(backend, net):
    """(graph, spec, views) for the whole network offered as one sub-graph."""
    from loader import _core
    from loader.networks import planning
    graph = planning.Graph(net)
    spec = planning.describe_subgraph(graph, backend.id, list(range(len(net.layers))))
    views = _core.optimize_subgraph(note(backend, "optimize_subgraph"), spec,
                                    [layer.prepared for layer in net.layers], net.constants)
    return graph, spec, views


def answer(backend, net, own_requirement=True):
    """The backend's checked views for ``net`` offered whole. Invalid views fail NET-1; the
    other NET cases cannot judge them and say so (NOT_SUPPORTED, NET-1 reports the failure)."""
    import loader
    from loader.networks import planning
    try:
        graph, spec, views = offer(backend, net)
        planning.validate_views(graph, spec, views)
    except loader.InvalidOptimizationError as error:
        if own_requirement:
            raise Failed(str(error))
        raise NotSupported(f"the views are invalid (see NET-1): {error}")
    except loader.BackendError as error:
        raise Failed(f"optimize_subgraph failed on a sub-graph of layers it supports: {error}")
    return graph, spec, views


def run_substitutions(net, spec, views, seed, when="", backend=None):
    """Each substitution run on random boundary inputs (the same for a given seed): a list of
    (substitution index, layer ids, boundary input values, {output tensor: array})."""
    from loader import _core
    rng = np.random.default_rng(seed)
    runs = []
    for k, (ids, inputs, outputs, compiled) in enumerate(views.substitutions):
        names = [spec.tensors[t][0] for t in inputs]
        values = {name: (rng.uniform(-1, 1, net.tensor(name).shape)).astype(np.float32)
                  for name in names}
        arrays = [values[name] for name in names]
        results = [np.empty(net.tensor(spec.tensors[t][0]).shape, np.float32) for t in outputs]
        steps = [(f"substitution {k}", "compiled", compiled,
                  [("dynamic", j) for j in range(len(arrays))],
                  [("dynamic", len(arrays) + j) for j in range(len(results))])]
        if getattr(compiled, "hosted", False):        # --backend-host process
            from loader.host.executor import HostExecutor
            executor = HostExecutor(steps, 0, [a.nbytes for a in arrays + results], len(arrays))
        else:
            executor = _core.Executor(steps, None, len(arrays) + len(results))
        if backend is not None:
            note(backend, "execute (compiled sub-graph)")
        try:
            executor.run(arrays + results)
        except Exception as error:
            raise Failed(f"substitution {k} of {[net.layers[i].name for i in sorted(ids)]}{when} "
                         f"failed: {error}")
        runs.append((k, sorted(ids), values,
                     {spec.tensors[t][0]: out for t, out in zip(outputs, results)}))
    return runs
