"""Exports Keras' MobileNetV2 (random weights, fixed seed) to ONNX through tf2onnx, for
``zoo_check.py --file``: a model no PyTorch exporter wrote, NHWC from its input on.

    python benchmarks/export_keras.py OUT.onnx      # needs tensorflow and tf2onnx

The classifier's softmax is left out and the batch normalizations get random statistics: a
freshly built Keras MobileNetV2 answers 0.001 for every class, which any import would match.
"""
import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

tf.random.set_seed(0)
rng = np.random.default_rng(0)
model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3), classes=1000,
                                          classifier_activation=None)
for layer in model.layers:
    if isinstance(layer, tf.keras.layers.BatchNormalization):
        gamma, beta, mean, variance = layer.get_weights()
        n = gamma.shape
        layer.set_weights([rng.uniform(0.5, 1.5, n).astype(np.float32),
                           rng.normal(0, 0.1, n).astype(np.float32),
                           rng.normal(0, 0.1, n).astype(np.float32),
                           rng.uniform(0.5, 1.5, n).astype(np.float32)])
spec = (tf.TensorSpec((1, 224, 224, 3), tf.float32, name="input"),)
proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=17)
with open(sys.argv[1], "wb") as f:
    f.write(proto.SerializeToString())
print("ok", len(proto.graph.node))
