"""Backend API versions and the compatibility rule (docs/loading.md, The checks)."""
import numbers
from typing import NamedTuple

from loader import _core
from loader.errors import InvalidArgumentError

UINT32_MAX = 2**32 - 1


def _component(name: str, value) -> int:
    """A version number as the ABI carries it: an integer from 0 to 2^32 - 1 (uint32_t)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"BackendVersion {name} must be an integer, not "
                        f"{type(value).__name__} ({value!r})")
    value = int(value)
    if not 0 <= value <= UINT32_MAX:
        raise InvalidArgumentError(f"BackendVersion {name} is {value}, must be from 0 to "
                                   f"{UINT32_MAX}")
    return value


class _Version(NamedTuple):
    major: int
    minor: int


class BackendVersion(_Version):
    """A Backend API version, MAJOR.MINOR: two integers from 0 to 2^32 - 1, as GetVersion
    reports them. Anything else raises TypeError (not an integer, bool included) or
    InvalidArgumentError, a ValueError (out of range)."""

    __slots__ = ()

    def __new__(cls, major, minor):
        return super().__new__(cls, _component("major", major), _component("minor", minor))

    @classmethod
    def _make(cls, iterable):  # also what _replace uses: checked like the constructor
        return cls(*iterable)

    @classmethod
    def _from_checked(cls, major: int, minor: int) -> "BackendVersion":
        """A version from two ints already known to be in range (no re-check)."""
        return tuple.__new__(cls, (major, minor))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: The Backend API version this runtime implements (from abi/backend_api.h).
BACKEND_API_VERSION = BackendVersion(_core.API_VERSION_MAJOR, _core.API_VERSION_MINOR)


def _version(name: str, value) -> BackendVersion:
    if isinstance(value, BackendVersion):
        return value
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a BackendVersion or a (major, minor) pair, not {value!r}")
    return BackendVersion(*value)


def is_backend_compatible(backend_version, api_version=BACKEND_API_VERSION) -> bool:
    """A backend built against ``backend_version`` runs on a runtime of ``api_version`` iff the
    majors are equal and the backend's minor is not newer. Each is a BackendVersion or a
    (major, minor) pair, checked as BackendVersion checks it."""
    backend = _version("backend_version", backend_version)
    api = _version("api_version", api_version)
    return _core.is_compatible(backend.major, backend.minor, api.major, api.minor)
