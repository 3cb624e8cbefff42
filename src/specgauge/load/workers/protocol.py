"""What a worker host (local process or Ray actor) tells the driver, and how the driver talks to it.

Messages from a worker, in order: ``("ready", WorkerReady)``, then any number of
``("records", [RequestRecord, ...])``, then one of ``("done", WorkerReport)``,
``("failed", WorkerFailure)`` (records finished before the failure were sent first) or
``("stopped", None)`` (the driver asked it to stop). A worker that vanishes (process killed, node
lost) raises :class:`WorkerLost` from :meth:`WorkerHandle.receive`.
"""

from __future__ import annotations

from typing import Any, Protocol

from specgauge.errors import UserError

BATCH_INTERVAL_S = 0.02   # a worker sends what finished at most this long ago
BATCH_MAX_RECORDS = 512   # ... or sooner, once this many are waiting


class WorkerLost(UserError):
    """A worker process or actor died during a point (exit code 5); what it had sent is stored and
    ``--resume`` sends the rest."""

    exit_code = 5

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name} died ({detail})")
        self.worker_name = name


class WorkerHandle(Protocol):
    """The driver's end of one worker."""

    name: str  # "worker 2/4 (pid 1234 on host-a)" once ready, "worker 2/4" before

    async def receive(self) -> tuple[str, Any]:
        """The worker's next message; :class:`WorkerLost` when it is gone."""

    async def go(self) -> None:
        """Start the measured window now."""

    async def stop(self) -> None:
        """Ask the worker to stop early (it answers ``("stopped", None)`` after its last records)."""

    async def close(self, *, kill: bool) -> None:
        """Release the worker (end the process or actor); ``kill``: at once, without waiting."""
