"""Backend API versions and the compatibility rule (contract section 5.4)."""
from typing import NamedTuple

from loader import _core


class BackendVersion(NamedTuple):
    """A Backend API version, MAJOR.MINOR."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


#: The Backend API version this runtime implements (from abi/backend_api.h).
BACKEND_API_VERSION = BackendVersion(_core.API_VERSION_MAJOR, _core.API_VERSION_MINOR)


def is_backend_compatible(backend_version, api_version=BACKEND_API_VERSION) -> bool:
    """A backend built against ``backend_version`` runs on a runtime of ``api_version`` iff the
    majors are equal and the backend's minor is not newer."""
    backend_major, backend_minor = backend_version
    api_major, api_minor = api_version
    return backend_major == api_major and backend_minor <= api_minor
