"""Exports Keras' MobileNetV2 (random weights, fixed seed) to ONNX through tf2onnx, for
``zoo_check.py --file``: a model no PyTorch exporter wrote, NHWC from its input on.

    python benchmarks/export_keras.py OUT.onnx      # needs tensorflow and tf2onnx
"""
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf, tf2onnx, numpy as np
tf.random.set_seed(0)
model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3), classes=1000)
spec = (tf.TensorSpec((1, 224, 224, 3), tf.float32, name="input"),)
proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=17)
open(sys.argv[1], "wb").write(proto.SerializeToString())
print("ok", len(proto.graph.node))
