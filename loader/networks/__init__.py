"""Networks (docs/networks.md): building a graph of layers and running it on backends.

- ``network``: ``Network``, built with ``add_*`` calls, every shape checked as it is added;
- ``serialized``: its plain-data form and the ``.json``/``.yaml`` + ``.npz`` files;
- ``planning``: which backend takes each layer, the sub-graphs offered to optimizers, the one
  check of a backend's answer, the steps in execution order and the buffers: the ``Plan``;
- ``execution``: ``LoadedNetwork``, which creates what a plan needs and runs it;
- ``profiling``: events of an execution and the Chrome trace;
- ``compiled``: the exported form of a loaded network (rule 12.8);
- ``cli``: ``backend-loader plan`` and ``backend-loader run``.

The C side (sub-graph descriptions, views, compiled sub-graphs, the executor's loop) is part of
``loader._core``.
"""
from loader.networks.execution import LoadedNetwork
from loader.networks.network import Layer, Network, Tensor
from loader.networks.profiling import ProfileEvent

__all__ = ["Layer", "LoadedNetwork", "Network", "ProfileEvent", "Tensor"]
