"""Reading an ONNX model as untrusted input: its bytes, its external data (never opened outside
the model's directory), and its tensors (every size checked against the bytes that hold it
before anything is allocated)."""
import os
import stat

import numpy as np

from loader.onnx.errors import ModelError

MAX_MODEL_BYTES = 2**31 - 1          # protobuf's own limit for one message
MAX_ELEMENTS = 2**40                # as loader.layers: no tensor larger

# ONNX data type -> NumPy dtype, for the types a model may hold as constants.
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
          7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
          13: np.uint64}
DTYPE_NAMES = {0: "undefined", 1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16",
               6: "int32", 7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "float64",
               12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128", 16: "bfloat16"}


def dtype_name(code) -> str:
    return DTYPE_NAMES.get(code, f"data type {code}")


def read(model):
    """(ModelProto, the directory external data may come from or None, a name for messages)."""
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model, None, "the model"
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _parse(bytes(model), "the model bytes"), None, "the model bytes"
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        data = _read_file(path)
        try:
            return _parse(data, path), os.path.dirname(os.path.abspath(path)), path
        finally:
            del data        # the parsed model holds what it needs: never two copies after this
    raise TypeError(f"load_model takes a path, bytes or an onnx.ModelProto, not "
                    f"{type(model).__name__}")


def _read_file(path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as error:
        raise ModelError(f"{path}: cannot be read: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(f"{path}: not a regular file")
        if info.st_size > MAX_MODEL_BYTES:
            raise ModelError(f"{path}: {info.st_size} bytes, more than a model file may hold "
                             f"(keep large weights as external data)")
        data = bytearray(info.st_size)
        view, total = memoryview(data), 0
        while total < len(data):
            got = os.readv(fd, [view[total:]])
            if got == 0:
                break       # the file shrank while read: parse what there is
            total += got
        if os.read(fd, 1):
            raise ModelError(f"{path}: the file grew while it was read")
        del view
        if total < len(data):
            del data[total:]
        return data         # parsed as it is: a bytes copy would double the file's memory
    except OSError as error:
        raise ModelError(f"{path}: cannot be read: {error.strerror or error}") from None
    finally:
        os.close(fd)


def _parse(data, where: str):
    import onnx
    if not data:
        raise ModelError(f"{where}: empty, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as error:       # protobuf's DecodeError and what a corrupt message raises
        raise ModelError(f"{where}: not an ONNX model (the bytes do not parse: "
                         f"{' '.join(str(error).split())[:200] or type(error).__name__})") from None
    if not model.HasField("graph"):
        raise ModelError(f"{where}: not an ONNX model (no graph)")
    return model


# -- external data ------------------------------------------------------------------------------

def load_external_data(model, directory, where):
    """Bring every tensor kept outside the model file into it: each file is looked up in the
    model's directory only (not absolute, no '..', no symbolic link leading out), and its
    offset and length must lie inside the file."""
    for tensor in _tensors_with_external_data(model.graph):
        fields = {entry.key: entry.value for entry in tensor.external_data}
        name = tensor.name or "(unnamed)"
        if directory is None:
            raise ModelError(f"initializer {name!r}: its data is in an external file, which "
                             f"only a model loaded from its path can name")
        location = fields.get("location", "")
        data = _read_confined(directory, location, fields, f"initializer {name!r}", where)
        tensor.raw_data = data
        del tensor.external_data[:]
        tensor.data_location = 0     # DEFAULT


def _tensors_with_external_data(graph):
    for tensor in graph.initializer:
        if tensor.data_location == 1:   # EXTERNAL
            yield tensor
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t") and attribute.t.data_location == 1:
                yield attribute.t


def _read_confined(directory, location, fields, what, where) -> bytes:
    if not location or "\0" in location:
        raise ModelError(f"{what}: external data with no usable location")
    if os.path.isabs(location):
        raise ModelError(f"{what}: external data location {location!r} is absolute; it must "
                         f"be inside the model's directory")
    parts = location.replace("\\", "/").split("/")
    if ".." in parts:
        raise ModelError(f"{what}: external data location {location!r} climbs out of the "
                         f"model's directory")
    root = os.path.realpath(directory)
    path = os.path.join(root, *parts)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        raise ModelError(f"{what}: external data {location!r} leads out of the model's "
                         f"directory (through a symbolic link)")
    try:
        offset = int(fields.get("offset", "0"))
        length = int(fields["length"]) if "length" in fields else None
    except ValueError:
        raise ModelError(f"{what}: external data offset or length is not an integer") from None
    try:
        fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as error:
        raise ModelError(f"{what}: external data {location!r}: {error.strerror or error}") from None
    try:
        size = os.fstat(fd).st_size
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ModelError(f"{what}: external data {location!r} is not a regular file")
        if length is None:
            length = size - offset
        if offset < 0 or length < 0 or offset + length > size:
            raise ModelError(f"{what}: external data {location!r}: offset {offset} and length "
                             f"{length} lie outside the file ({size} bytes)")
        data = os.pread(fd, length, offset)
        if len(data) != length:
            raise ModelError(f"{what}: external data {location!r} ended early")
        return data
    finally:
        os.close(fd)


# -- tensors ------------------------------------------------------------------------------------

def tensor_to_array(tensor, what) -> np.ndarray:
    """The NumPy array of a TensorProto, every size checked against the bytes that hold it."""
    from onnx import numpy_helper
    code = tensor.data_type
    if code not in DTYPES:
        raise ModelError(f"{what}: tensors of type {dtype_name(code)} are not supported")
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{what}: negative dimension in {dims}")
    count = 1
    for d in dims:
        count *= d
    if count > MAX_ELEMENTS:
        raise ModelError(f"{what}: {dims} holds {count} elements, more than 2^40")
    if tensor.HasField("segment"):
        raise ModelError(f"{what}: segmented tensors are not supported")
    if tensor.data_location == 1:
        raise ModelError(f"{what}: its external data was not loaded")
    dtype = np.dtype(DTYPES[code]).newbyteorder("<")
    itemsize = dtype.itemsize
    if tensor.HasField("raw_data") or len(tensor.raw_data):
        raw = tensor.raw_data
        if len(raw) != count * itemsize:
            raise ModelError(f"{what}: {len(raw)} bytes of data for shape {dims} of "
                             f"{dtype_name(code)} ({count * itemsize} expected)")
        # A read-only view of the model's own bytes (little-endian, as ONNX stores them): the
        # weights are not copied unless a layer needs them in another layout.
        array = np.frombuffer(raw, dtype=dtype).reshape(dims)
        return array if dtype.isnative else array.astype(dtype.newbyteorder("="))
    else:
        held = {1: len(tensor.float_data), 11: len(tensor.double_data), 7: len(tensor.int64_data),
                12: len(tensor.uint64_data), 13: len(tensor.uint64_data)}.get(
            code, len(tensor.int32_data))
        if held != count:
            raise ModelError(f"{what}: {held} values for shape {dims} ({count} expected)")
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as error:    # numpy_helper's own checks, whatever they raise
        raise ModelError(f"{what}: cannot be read: {' '.join(str(error).split())[:200]}") from None
    if array.shape != tuple(dims):
        raise ModelError(f"{what}: data of shape {list(array.shape)} for dims {dims}")
    return array
