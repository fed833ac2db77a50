"""Backends out of process (CONTRACT-models section 16): ``Runtime(backend_host="process")``.

Each registered backend runs in a backend host of its own, one per backend id and runtime,
started at its first use: ``dynamic-backend-host`` (C, ``loader/native/host/``), which loads
the same file through the same checks as registration did and serves the Backend API calls on
a channel. A backend that crashes, exits or hangs takes only its host down; the caller gets
``BackendCrashedError`` (or ``BackendTimeoutError``) naming the call, and the next use starts a
fresh host.

The design, in the order a call travels:

- ``backend`` and ``objects``: ``HostBackend`` and the objects it creates have the interface
  and the errors of their ``loader._core`` counterparts (the same checks, made by the same
  functions, in the same order); each backend call becomes one request.
- ``process``: ``HostProcess``, one host's life: start (from one launcher thread, because the
  host dies with the thread that started it), one lock around each request, crash and
  timeout handling (reap, name the call from the host's status page, keep its last output),
  restarts and the ``max_restarts`` rule, shutdown.
- ``channel``: the payloads of requests and replies, read back as untrusted input. The frames,
  segments and the hot path (a workload's execute) are C, in ``loader._core``
  (``loader/host/_segment.pxi``, ``loader/host/_channel.pxi``).
- ``executor``: ``HostExecutor``, a loaded network's steps bound once in their hosts, one
  request per run of consecutive steps on one host.

Tensors never travel through the channel: they live in memfd segments the runtime creates,
seals and hands over, mapped by both processes; a request names (segment, offset, size).
"""
from loader.host.backend import HostBackend, HostedLibrary
from loader.host.process import HostProcess, HostSettings, check_limits

MODES = ("in-process", "process")

__all__ = ["HostBackend", "HostProcess", "HostSettings", "HostedLibrary", "MODES",
           "check_limits"]
