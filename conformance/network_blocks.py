"""Real blocks of real networks, built in the kit from Backend API 1.3 layers with seeded random
weights (no model file, no optional package), run on the backend alone and compared with the
float64 reference (NET-8):

- ``net.block-mobilenet-v2``: an inverted residual (1x1 expansion and ReLU6, depthwise 3x3 and
  ReLU6, 1x1 projection with its batch normalization, residual addition);
- ``net.block-resnet-bottleneck``: a bottleneck with a strided projection shortcut, then one with
  the identity shortcut (1x1, 3x3, 1x1 convolutions, batch normalizations, ReLU);
- ``net.block-shufflenet``: a ShuffleNet V2 unit (channel split by Slice, a 1x1, depthwise 3x3,
  1x1 branch, Concatenation, then the channel shuffle: Reshape, Transpose, Reshape);
- ``net.block-transformer``: a pre-norm transformer encoder block (layer normalization, Q, K
  and V projections, two-head scaled dot-product attention with Softmax, output projection,
  GELU MLP, both residuals).

Each block is built only from layers the backend says it runs; a block with a layer it declines
is NOT_SUPPORTED, naming the layer.
"""
import numpy as np

from conformance.network_builder import Builder
from conformance.network_runs import optimizing_backend, run_and_compare
from conformance.registry import NotSupported, case

RELU6 = {"function": "bounded_relu", "a": 6.0, "b": 0.0}


class _Declined(Exception):
    pass


class _Block(Builder):
    """A Builder whose layers must all be supported (else the block is declined) and whose
    weights are scaled to keep activations of unit size, as trained networks roughly do."""

    def need(self, layer, inputs, descriptor=None):
        out = self.layer(layer, inputs, descriptor)
        if out is None:
            shapes = [list(self.shape(t)) if not isinstance(t, np.ndarray) else list(t.shape)
                      for t in inputs]
            raise _Declined(f"{layer} {descriptor or {}} on {shapes}")
        return out

    def weights(self, shape, fan_in):
        bound = np.sqrt(3.0 / fan_in)
        return self.rng.uniform(-bound, bound, shape).astype(np.float32)

    def bias(self, n):
        return self.rng.uniform(-0.1, 0.1, n).astype(np.float32)

    def conv(self, t, out, kernel=1, stride=1, depthwise=False):
        c = self.shape(t)[3]
        pad = kernel // 2
        if depthwise:
            w = self.weights((1, kernel, kernel, c), kernel * kernel)
            return self.need("DepthwiseConvolution2d", [t, w, self.bias(c)],
                             {"padding": pad, "stride": stride})
        w = self.weights((out, kernel, kernel, c), kernel * kernel * c)
        return self.need("Convolution2d", [t, w, self.bias(out)],
                         {"padding": pad, "stride": stride})

    def batch_norm(self, t):
        c = self.shape(t)[-1]
        stats = [self.rng.uniform(-0.2, 0.2, c), self.rng.uniform(0.5, 2.0, c),
                 self.rng.uniform(0.5, 1.5, c), self.rng.uniform(-0.2, 0.2, c)]
        return self.need("BatchNormalization", [t] + [s.astype(np.float32) for s in stats])

    def dense(self, t, out):
        """x @ W + b over the last axis, as exporters write a linear layer of a sequence."""
        k = self.shape(t)[-1]
        y = self.need("MatMul", [t, self.weights((k, out), k)])
        return self.need("Addition", [y, self.bias(out)])

    def layer_norm(self, t):
        d = self.shape(t)[-1]
        return self.need("LayerNormalization", [t, self.rng.uniform(0.8, 1.2, d).astype(np.float32),
                                                 self.bias(d)])


def mobilenet_v2(backend, seed):
    b = _Block(backend, seed)
    x = b.net.add_input("image", (1, 8, 8, 8))
    t = b.need("Activation", [b.conv(x, 48)], RELU6)
    t = b.need("Activation", [b.conv(t, 48, kernel=3, depthwise=True)], RELU6)
    t = b.batch_norm(b.conv(t, 8))
    return b.network([("features", b.need("Addition", [t, x]))])


def resnet_bottleneck(backend, seed):
    b = _Block(backend, seed)
    x = b.net.add_input("image", (1, 8, 8, 16))

    def bottleneck(t, width, out, stride):
        main = b.need("Activation", [b.batch_norm(b.conv(t, width))], {"function": "relu"})
        main = b.need("Activation", [b.batch_norm(b.conv(main, width, 3, stride))],
                      {"function": "relu"})
        main = b.batch_norm(b.conv(main, out))
        shortcut = t if stride == 1 and out == b.shape(t)[3] else \
            b.batch_norm(b.conv(t, out, 1, stride))
        return b.need("Activation", [b.need("Addition", [main, shortcut])], {"function": "relu"})

    t = bottleneck(x, 8, 32, 2)
    return b.network([("features", bottleneck(t, 8, 32, 1))])


def shufflenet_unit(backend, seed):
    b = _Block(backend, seed)
    n, h, w, c = 1, 6, 6, 16
    x = b.net.add_input("image", (n, h, w, c))
    kept = b.need("Slice", [x], {"begin": [0, 0, 0, 0], "end": [n, h, w, c // 2]})
    branch = b.need("Slice", [x], {"begin": [0, 0, 0, c // 2], "end": [n, h, w, c]})
    branch = b.need("Activation", [b.conv(branch, c // 2)], {"function": "relu"})
    branch = b.batch_norm(b.conv(branch, c // 2, 3, depthwise=True))
    branch = b.need("Activation", [b.conv(branch, c // 2)], {"function": "relu"})
    t = b.need("Concatenation", [kept, branch], {"axis": 3})
    t = b.need("Reshape", [t], {"shape": [n, h, w, 2, c // 2]})
    t = b.need("Transpose", [t], {"perm": [0, 1, 2, 4, 3]})
    return b.network([("features", b.need("Reshape", [t], {"shape": [n, h, w, c]}))])


def transformer_encoder(backend, seed):
    b = _Block(backend, seed)
    batch, seq, d, heads = 2, 6, 16, 2
    x = b.net.add_input("tokens", (batch, seq, d))

    def split_heads(t, perm):
        t = b.need("Reshape", [t], {"shape": [batch, seq, heads, d // heads]})
        return b.need("Transpose", [t], {"perm": perm})

    normed = b.layer_norm(x)
    q = split_heads(b.dense(normed, d), [0, 2, 1, 3])            # [batch, heads, seq, dh]
    k = split_heads(b.dense(normed, d), [0, 2, 3, 1])            # [batch, heads, dh, seq]
    v = split_heads(b.dense(normed, d), [0, 2, 1, 3])
    scores = b.need("MatMul", [q, k])
    scores = b.need("Multiplication", [scores, np.array([1 / np.sqrt(d // heads)], np.float32)])
    attention = b.need("MatMul", [b.need("Softmax", [scores], {"axis": -1}), v])
    attention = b.need("Transpose", [attention], {"perm": [0, 2, 1, 3]})
    attention = b.need("Reshape", [attention], {"shape": [batch, seq, d]})
    t = b.need("Addition", [x, b.dense(attention, d)])
    hidden = b.need("Activation", [b.dense(b.layer_norm(t), 2 * d)], {"function": "gelu"})
    return b.network([("encoded", b.need("Addition", [t, b.dense(hidden, d)]))])


def _block_case(case_id, title, build, seed):
    @case(case_id, "NET-8", tier="full")
    def run(subject):
        backend = optimizing_backend(subject)
        try:
            net = build(backend, seed)
        except _Declined as declined:
            raise NotSupported(f"the backend does not run a layer of the {title}: {declined}")
        finally:
            backend.close()
        run_and_compare(subject, [(title, net)], subject.seed)
    return run


BLOCKS = (
    ("net.block-mobilenet-v2", "MobileNetV2 inverted residual block", mobilenet_v2),
    ("net.block-resnet-bottleneck", "ResNet bottleneck blocks", resnet_bottleneck),
    ("net.block-shufflenet", "ShuffleNet V2 unit", shufflenet_unit),
    ("net.block-transformer", "transformer encoder block", transformer_encoder),
)
for _k, (_id, _title, _build) in enumerate(BLOCKS):
    _block_case(_id, _title, _build, 600 + _k)
