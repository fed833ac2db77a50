"""Every timeout the product accepts, one rule: a positive, finite number of seconds, at most
``MAX_SECONDS`` (one day).

The bound is deliberate. Far larger values are not "a long time" to the operating system:
waiting APIs refuse timeouts beyond about 2^31 milliseconds, so an unbounded value would
surface as an OverflowError in the middle of a scan. A probe with no limit at all would defeat
the purpose of probing (a hung backend would hang the host), so probes always have one; a call
timeout of None (where the API offers one) means no limit, stated explicitly, never by a huge
number.
"""
import math
import numbers
from typing import Optional

MAX_SECONDS = 86400.0


def describe() -> str:
    return f"a number of seconds greater than 0 and at most {MAX_SECONDS:g}"


def check(value, what: str, allow_none: bool = False) -> Optional[float]:
    """``value`` (int, float or a NumPy real) as seconds; TypeError for another type,
    ValueError for a number outside the rule. None passes only with ``allow_none``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number of seconds"
                        + (" or None" if allow_none else "")
                        + f", not {type(value).__name__}")
    seconds = float(value)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
        raise ValueError(f"{what} is {value!r}; give {describe()}"
                         + (" (None: no limit)" if allow_none else ""))
    return seconds


def parse(text: str, what: str, allow_none: bool = False) -> Optional[float]:
    """Seconds written as text (an option or an environment variable); ValueError naming the
    problem. With ``allow_none``, ``none`` (any case) means no limit."""
    stripped = text.strip()
    if allow_none and stripped.lower() == "none":
        return None
    try:
        value = float(stripped)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number of seconds") from None
    return check(value, f"{what}", allow_none=False)
