"""The misuses of the descriptors of Backend API 1.3 that the raw-interface cases commit
(conformance/raw_descriptors.py): each a valid layer, which tells whether the backend claims it,
and the change that makes it wrong. A runtime never builds these (the Python API refuses them
first); a backend must refuse each from is_layer_supported and create_workload, with a message,
and never crash.

    MISUSES[group] = [(what, valid layer, change), ...]

A layer is a spec as layer_runs.spec builds it; a change takes the raw.Layer built from it and
edits its C structs in place.
"""
from conformance.layer_runs import spec
from conformance.raw_structs import MAX_DIMENSIONS

INT64_MIN = -2**63


def _shape(info, dims):
    info.num_dimensions = len(dims)
    for d in range(MAX_DIMENSIONS):
        info.dimensions[d] = dims[d] if d < len(dims) else 0


def _shapes(*dims):
    """A change that gives input 0, 1, ... and then the output these shapes."""
    def change(layer):
        for info, shape in zip(layer.infos, dims):
            _shape(info, shape)
    return change


def _set(**members):
    """A change of descriptor members (an array member takes a list)."""
    def change(layer):
        for name, value in members.items():
            if isinstance(value, list):
                array = getattr(layer.descriptor, name)
                for k in range(len(array)):
                    array[k] = value[k] if k < len(value) else 0
            else:
                setattr(layer.descriptor, name, value)
    return change


def _both(*changes):
    def change(layer):
        for one in changes:
            one(layer)
    return change


def _layer(layer, inputs, descriptor=None):
    return spec("raw13", 0, layer, inputs, descriptor)


SEVEN = [1, 1, 1, 1, 1, 2, 3]

RANK = [
    ("a rank-7 Transpose", _layer("Transpose", [[2, 1, 1, 1, 1, 3]]),
     _both(_shapes([3, 1, 1, 1, 1, 1, 2], [2, 1, 1, 1, 1, 1, 3]), _set(perm=[6, 5, 4, 3, 2, 1, 0]))),
    ("a rank-7 Subtraction", _layer("Subtraction", [[2, 3], [2, 3]]), _shapes(SEVEN, SEVEN, SEVEN)),
    ("a rank-7 ElementwiseUnary", _layer("ElementwiseUnary", [[2, 3]], {"function": "abs"}),
     _shapes(SEVEN, SEVEN)),
    ("a rank-0 ElementwiseUnary", _layer("ElementwiseUnary", [[2, 3]], {"function": "abs"}),
     _shapes([], [])),
    ("a rank-7 Slice", _layer("Slice", [[2, 3]]),
     _both(_shapes(SEVEN, SEVEN), _set(begin=[0] * 7, step=[1] * 7))),
    ("a rank-7 Pad", _layer("Pad", [[2, 3]], {"pads": [0, 0, 0, 0]}), _shapes(SEVEN, SEVEN)),
    ("a rank-7 Reduce (its mask naming axis 6)",
     _layer("Reduce", [[2, 3]], {"function": "sum", "axes": [1]}),
     _both(_shapes(SEVEN, SEVEN[:6] + [1]), _set(axes=1 << 6))),
    ("a rank-7 Concatenation", _layer("Concatenation", [[2, 3], [2, 3]], {"axis": 0}),
     _shapes(SEVEN, SEVEN, [2, 1, 1, 1, 1, 2, 3])),
    ("a rank-7 MatMul", _layer("MatMul", [[2, 3], [3, 2]]),
     _shapes([1, 1, 1, 1, 1, 2, 3], [1, 1, 1, 1, 1, 3, 2], [1, 1, 1, 1, 1, 2, 2])),
]

VALUES = [
    ("a Transpose perm that repeats an axis", _layer("Transpose", [[2, 3, 4]], {"perm": [2, 0, 1]}),
     _both(_set(perm=[0, 0, 2]), _shapes([2, 3, 4], [2, 2, 4]))),
    ("a Transpose perm that names axis 3 of 3", _layer("Transpose", [[2, 3, 4]], {"perm": [2, 0, 1]}),
     _both(_set(perm=[0, 1, 3]), _shapes([2, 3, 4], [2, 3, 4]))),
    ("a Concatenation axis equal to the rank",
     _layer("Concatenation", [[2, 3, 4], [2, 3, 4]], {"axis": 0}), _set(axis=3)),
    ("a Concatenation axis of UINT32_MAX",
     _layer("Concatenation", [[2, 3, 4], [2, 3, 4]], {"axis": 0}), _set(axis=2**32 - 1)),
    ("a Softmax axis equal to the rank", _layer("Softmax", [[3, 4]]), _set(axis=2)),
    ("a LayerNormalization axis equal to the rank",
     _layer("LayerNormalization", [[3, 4], [4]], {"axis": -1}), _set(axis=2)),
    ("a Reduce mask bit past the rank",
     _layer("Reduce", [[2, 3]], {"function": "sum", "axes": [1]}), _set(axes=1 << 2)),
    ("an empty Reduce mask", _layer("Reduce", [[2, 3]], {"function": "sum", "axes": [1]}),
     _set(axes=0)),
    ("a Slice step of 0", _layer("Slice", [[4, 5]]), _set(step=[0, 1])),
    ("a Slice start at the end of the input", _layer("Slice", [[4, 5]], {"begin": [3, 0]}),
     _set(begin=[4, 0])),
    ("a negative Slice start", _layer("Slice", [[4, 5]], {"begin": [3, 0]}), _set(begin=[-1, 0])),
    ("a Slice whose outputs read past the input", _layer("Slice", [[4, 5]]), _set(begin=[2, 0])),
    ("a Slice walked backwards past the first element", _layer("Slice", [[4, 5]]),
     _set(begin=[1, 0], step=[-1, 1])),
    ("a Slice step of INT64_MIN",
     _layer("Slice", [[4, 5]], {"begin": [3, 0], "end": [1, 5], "step": [-1, 1]}),
     _set(step=[INT64_MIN, 1])),
    ("a Resize to a height of 0", _layer("Resize", [[1, 3, 4, 2]], {"size": [6, 8]}),
     _shapes([1, 3, 4, 2], [1, 0, 8, 2])),
    ("a Resize with a zero scale", _layer("Resize", [[1, 3, 4, 2]], {"size": [6, 8]}),
     _set(scale_y=0.0)),
    ("a Resize with a negative scale", _layer("Resize", [[1, 3, 4, 2]], {"size": [6, 8]}),
     _set(scale_x=-2.0)),
    ("a Resize with a NaN scale", _layer("Resize", [[1, 3, 4, 2]], {"size": [6, 8]}),
     _set(scale_x=float("nan"))),
    ("a Convolution2d of 3 groups over 4 channels",
     _layer("Convolution2d", [[1, 5, 5, 4], [3, 3, 3, 4]]),
     _both(_set(groups=3), _shapes([1, 5, 5, 4], [3, 3, 3, 1], [1, 3, 3, 3]))),
    ("a Convolution2d of 0 groups", _layer("Convolution2d", [[1, 5, 5, 4], [3, 3, 3, 4]]),
     _set(groups=0)),
    ("a Convolution2d of 2 groups with weights of every channel",
     _layer("Convolution2d", [[1, 5, 5, 4], [2, 3, 3, 4]]), _set(groups=2)),
    ("a DepthwiseConvolution2d of 2 groups",
     _layer("DepthwiseConvolution2d", [[1, 5, 5, 2], [1, 3, 3, 2]]), _set(groups=2)),
    ("a Pad whose output would be empty", _layer("Pad", [[3, 4]], {"pads": [-2, 0, 0, 0]}),
     _set(pad_end=[-1, 0])),
    ("a Pad of INT64_MIN", _layer("Pad", [[3, 4]], {"pads": [0, 0, 0, 0]}),
     _set(pad_begin=[INT64_MIN, 0])),
    ("a reflect Pad as wide as the axis",
     _layer("Pad", [[3, 4]], {"pads": [2, 0, 0, 0], "mode": "reflect"}),
     _both(_set(pad_begin=[3, 0]), _shapes([3, 4], [6, 4]))),
    ("an unknown Pad mode", _layer("Pad", [[3, 4]], {"pads": [1, 0, 0, 0]}), _set(mode=7)),
    ("a Pooling2d dilation of 0",
     _layer("Pooling2d", [[1, 5, 5, 2]], {"pool": "max", "kernel": [2, 2]}), _set(dilation_y=0)),
    ("an unknown pool type",
     _layer("Pooling2d", [[1, 5, 5, 2]], {"pool": "max", "kernel": [2, 2]}), _set(pool_type=3)),
    ("a TransposeConvolution2d of 0 groups",
     _layer("TransposeConvolution2d", [[1, 3, 3, 4], [4, 3, 3, 2]]), _set(groups=0)),
    ("a TransposeConvolution2d of 3 groups over 4 channels",
     _layer("TransposeConvolution2d", [[1, 3, 3, 4], [4, 3, 3, 2]]),
     _both(_set(groups=3), _shapes([1, 3, 3, 4], [4, 3, 3, 2], [1, 5, 5, 6]))),
    ("a TransposeConvolution2d output padding as large as its stride and dilation",
     _layer("TransposeConvolution2d", [[1, 3, 3, 2], [2, 3, 3, 2]], {"stride": [2, 2]}),
     _both(_set(output_padding_y=2), _shapes([1, 3, 3, 2], [2, 3, 3, 2], [1, 9, 7, 2]))),
    ("a LayerNormalization epsilon of 0",
     _layer("LayerNormalization", [[3, 4], [4]], {"axis": -1}), _set(epsilon=0.0)),
    ("a Prelu slope that does not broadcast", _layer("Prelu", [[2, 3], [3]]),
     _shapes([2, 3], [2], [2, 3])),
    ("a BatchNormalization mean of the wrong length",
     _layer("BatchNormalization", [[2, 3], [3], [3], [3], [3]]),
     _shapes([2, 3], [2], [3], [3], [3], [2, 3])),
]

OUTPUTS = [
    # keep_dims flipped under an output info that followed the other value
    ("a Reduce with keep_dims whose output drops the axis",
     _layer("Reduce", [[2, 3, 4]], {"function": "sum", "axes": [1], "keep_dims": False}),
     _set(keep_dims=1)),
    ("a Reduce without keep_dims whose output keeps the axis",
     _layer("Reduce", [[2, 3, 4]], {"function": "sum", "axes": [1], "keep_dims": True}),
     _set(keep_dims=0)),
    ("a Concatenation one longer than its inputs",
     _layer("Concatenation", [[2, 3], [2, 1]], {"axis": 1}), _shapes([2, 3], [2, 1], [2, 5])),
    ("a Transpose output that is not permuted",
     _layer("Transpose", [[2, 3, 4]], {"perm": [2, 0, 1]}), _shapes([2, 3, 4], [2, 3, 4])),
    ("a MatMul output of the wrong width", _layer("MatMul", [[2, 4], [4, 3]]),
     _shapes([2, 4], [4, 3], [2, 2])),
    ("a Resize output of another batch", _layer("Resize", [[1, 3, 4, 2]], {"size": [6, 8]}),
     _shapes([1, 3, 4, 2], [2, 6, 8, 2])),
    ("a Slice output longer than its steps allow", _layer("Slice", [[6, 2]], {"step": [2, 1]}),
     _shapes([6, 2], [4, 2])),
    ("a Pooling2d output of floor's size with ceil_mode",
     _layer("Pooling2d", [[1, 5, 5, 1]], {"pool": "max", "kernel": [2, 2], "stride": [2, 2]}),
     _set(ceil_mode=1)),
    ("a TransposeConvolution2d output one row short",
     _layer("TransposeConvolution2d", [[1, 3, 3, 2], [2, 3, 3, 2]]),
     _shapes([1, 3, 3, 2], [2, 3, 3, 2], [1, 4, 5, 2])),
    ("a grouped Convolution2d output of the wrong channel count",
     _layer("Convolution2d", [[1, 5, 5, 4], [4, 3, 3, 2]], {"groups": 2}),
     _shapes([1, 5, 5, 4], [4, 3, 3, 2], [1, 3, 3, 2])),
]

MISUSES = {"rank": RANK, "values": VALUES, "outputs": OUTPUTS}
