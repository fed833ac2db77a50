"""Exceptions the loader raises. Every one derives from ``BackendError``; where a builtin fits,
it derives from that too, so ``except KeyError`` and friends keep working."""


class BackendError(Exception):
    """Base of every exception the loader raises."""


class BackendNotFoundError(BackendError, KeyError):
    """No backend with that id is registered in the runtime."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class BackendCreationError(BackendError, RuntimeError):
    """BackendFactory did not produce a usable instance."""


class RuntimeClosedError(BackendError, RuntimeError):
    """The runtime was closed; it can no longer create backends."""


class LibraryClosedError(BackendError, RuntimeError):
    """The library was closed."""


class InvalidSearchPathError(BackendError, TypeError):
    """A search path argument has the wrong type."""
