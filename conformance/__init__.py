"""Conformance kit for dynamic backends."""


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
        return version("dynamic-backends")
    except (ImportError, PackageNotFoundError):
        return "0+unknown"


__version__ = _version()
