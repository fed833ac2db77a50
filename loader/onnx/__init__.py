"""ONNX models in: ``load_model`` turns a model (a path, bytes or an ``onnx.ModelProto``) into a
``loader.Network`` that takes and returns what ONNX Runtime takes and returns for the same model
(docs/onnx.md). It needs the optional ``onnx`` package (``pip install 'dynamic-backends[onnx]'``).

- ``model``: reading the file and its external data (confined to the model's directory), and
  the structural checks of a malformed model;
- ``importer``: the driver: static shapes, constant folding, conversion in topological order,
  the layout plan; it names no operator;
- ``ops``: one module per family of operators, each converter registered for the ONNX operator
  and opset version it handles;
- ``values`` and ``builder``: what a converter reads and how it adds layers.
"""
from loader.onnx.errors import ModelError, UnsupportedModelError

EXTRA_HINT = "pip install 'dynamic-backends[onnx]'"


def require_onnx():
    """The ``onnx`` module, or an ImportError naming the extra that brings it."""
    try:
        import onnx
    except ImportError as error:
        raise ImportError(f"loader.onnx needs the 'onnx' package, which is not installed: "
                          f"{EXTRA_HINT}") from error
    return onnx


def load_model(model, input_shapes=None):
    """A ``loader.Network`` from an ONNX model: a path (str or os.PathLike), the model's bytes, or
    an ``onnx.ModelProto``. ``input_shapes`` maps input names to shapes (tuples of ints) and
    fixes symbolic dimensions; every dimension must be known after it. Raises ModelError for a
    malformed model and UnsupportedModelError listing every node that cannot be expressed."""
    require_onnx()
    from loader.onnx import importer
    return importer.import_model(model, input_shapes)


__all__ = ["ModelError", "UnsupportedModelError", "load_model"]
