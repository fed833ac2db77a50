"""The two ways an ONNX model can be refused (docs/onnx.md)."""
from loader.errors import NetworkError


class ModelError(NetworkError):
    """The model is malformed: truncated or garbage bytes, a name used before it is defined, a
    cycle, a missing initializer, a wrong attribute type, an inconsistent shape, external data
    outside the model's directory. The message names the node (or the file) and the problem."""


class UnsupportedModelError(NetworkError):
    """The model is well formed but uses operators, attributes or data types this product cannot
    express. The message lists every such node at once (name, op type, opset, why); ``problems``
    holds them as (node name, op type, opset, reason) tuples."""

    def __init__(self, problems, total_nodes=None):
        self.problems = list(problems)
        lines = [f"  {name or '(unnamed)'} ({op} opset {opset}): {why}"
                 for name, op, opset, why in self.problems]
        count = len(self.problems)
        head = (f"the model uses {count} node{'s' * (count != 1)} this product cannot express"
                + (f" (of {total_nodes})" if total_nodes else "") + ":")
        super().__init__("\n".join([head] + lines))
