"""A loader.Network evaluated layer by layer with the kit's plain NumPy layers
(``conformance.reference``): the ground truth networks are compared with."""
import numpy as np

from conformance import reference


def evaluate_network(network, inputs):
    """Output name -> float64 array for ``inputs`` (input name -> array)."""
    values = {name: np.asarray(inputs[name], dtype=np.float64) for name in network.inputs}
    values.update({name: a.astype(np.float64) for name, a in network.constants.items()})
    for layer in network.layers:
        values[layer.name] = reference.evaluate(layer.type, [values[n] for n in layer.inputs],
                                                layer.descriptor)
    return {name: values[source] for name, source in network.outputs.items()}
