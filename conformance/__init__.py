"""Conformance kit for dynamic backends."""
import functools


@functools.lru_cache(maxsize=None)
def version() -> str:
    """The kit's version: that of the installed dynamic-backends distribution. Looked up on
    first use, not at import (every worker process imports this package)."""
    try:
        from importlib.metadata import PackageNotFoundError, version as distribution_version
        return distribution_version("dynamic-backends")
    except (ImportError, PackageNotFoundError):
        return "0+unknown"
