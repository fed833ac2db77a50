"""Checks of descriptor values and input shapes, shared by every layer family: each names the
layer and the key, says what was expected, and raises TypeError for the wrong kind of value or
InvalidLayerError for a value out of range."""
import numbers
from typing import Dict, Sequence, Tuple

import numpy as np

from loader.errors import InvalidLayerError

Shape = Tuple[int, ...]
UINT32_MAX = 2**32 - 1
INT64_MAX = 2**63 - 1
FLOAT32_MAX = float(np.finfo(np.float32).max)
MAX_RANK_1_3 = 6                    # BACKEND_MAX_LAYER_RANK


def is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def integer(layer, key, value, minimum=0, maximum=UINT32_MAX) -> int:
    if not is_int(value):
        raise TypeError(f"{layer}: {key!r} must be an integer, not {type(value).__name__}")
    value = int(value)
    if not minimum <= value <= maximum:
        raise InvalidLayerError(f"{layer}: {key!r} is {value}, must be from {minimum} to "
                                f"{maximum}")
    return value


def integers(layer, key, value, count=None, minimum=-INT64_MAX - 1, maximum=INT64_MAX) -> list:
    """A list of integers (``count`` of them when given)."""
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise TypeError(f"{layer}: {key!r} must be a list of integers, not {value!r}")
    if count is not None and len(value) != count:
        raise InvalidLayerError(f"{layer}: {key!r} has {len(value)} entries, {count} expected")
    return [integer(layer, key, v, minimum, maximum) for v in value]


def pair(layer, key, value, minimum):
    """An int for both axes, or [y, x]."""
    if is_int(value):
        value = [value, value]
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != 2:
        raise TypeError(f"{layer}: {key!r} must be an integer or [y, x], not {value!r}")
    return [integer(layer, key, v, minimum) for v in value]


def padding(layer, value):
    """An int for every side, [y, x], or [top, bottom, left, right]."""
    if is_int(value):
        value = [value] * 4
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) == 2:
        value = [value[0], value[0], value[1], value[1]]
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != 4:
        raise TypeError(f"{layer}: 'padding' must be an integer, [y, x] or "
                        f"[top, bottom, left, right], not {value!r}")
    return [integer(layer, "padding", v, 0) for v in value]


def boolean(layer, key, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{layer}: {key!r} must be true or false, not {value!r}")
    return bool(value)


def real(layer, key, value, positive=False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{layer}: {key!r} must be a number, not {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise InvalidLayerError(f"{layer}: {key!r} must be finite, not {value}")
    if abs(value) > FLOAT32_MAX:  # the C descriptor holds a float
        raise InvalidLayerError(f"{layer}: {key!r} is {value}, beyond float32's range "
                                f"(±{FLOAT32_MAX:.6g})")
    if positive and not value > 0:
        raise InvalidLayerError(f"{layer}: {key!r} is {value}, must be greater than 0")
    return value


def choice(layer, key, value, choices: Dict[str, int]) -> int:
    if not isinstance(value, str) or value not in choices:
        raise InvalidLayerError(f"{layer}: {key!r} is {value!r}, one of "
                                f"{', '.join(map(repr, choices))} is expected")
    return choices[value]


def axis(layer, key, value, rank) -> int:
    """An axis of a tensor of ``rank``, negative counting from the end (ONNX), resolved."""
    if not is_int(value):
        raise TypeError(f"{layer}: {key!r} must be an integer axis, not {value!r}")
    value = int(value)
    if not -rank <= value < rank:
        raise InvalidLayerError(f"{layer}: {key!r} is {value}, out of range for a tensor of "
                                f"rank {rank} (from {-rank} to {rank - 1})")
    return value % rank


def rank(layer, what, shape, expected):
    if len(shape) != expected:
        raise InvalidLayerError(f"{layer}: {what} must have {expected} dimensions, "
                                f"got shape {list(shape)}")


def ranks_1_to_6(layer, shapes: Sequence[Shape]):
    """Layer types of Backend API 1.3 take tensors of rank 1 to 6."""
    for index, shape in enumerate(shapes):
        if not 1 <= len(shape) <= MAX_RANK_1_3:
            raise InvalidLayerError(f"{layer}: input {index} has rank {len(shape)} (shape "
                                    f"{list(shape)}); this layer takes tensors of rank 1 to "
                                    f"{MAX_RANK_1_3}")


def broadcast(layer, *shapes: Shape) -> Shape:
    try:
        return tuple(int(v) for v in np.broadcast_shapes(*shapes))
    except ValueError:
        raise InvalidLayerError(f"{layer}: shapes {', '.join(str(list(s)) for s in shapes)} do "
                                f"not broadcast") from None


def elements(shape) -> int:
    count = 1
    for v in shape:
        count *= v
    return count
