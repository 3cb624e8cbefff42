"""The worker as a Ray actor: :class:`PointWorker` behind async methods the driver calls.

No Ray import here: :mod:`.ray_backend` makes this class a remote actor. The driver pulls records
with :meth:`ActorWorker.next` (a long poll: it returns once records are waiting, at most
``BATCH_INTERVAL_S`` after the first of them, or when the window ends), so records travel in
batches, as from a local worker process.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from typing import Any

from specgauge.load.workers.protocol import BATCH_INTERVAL_S, BATCH_MAX_RECORDS
from specgauge.load.workers.worker import PointWorker, WorkerFailure, WorkerTask

IDLE_POLL_S = 1.0  # a long poll with nothing to say returns an empty batch after this long


class ActorWorker:
    """One worker of a split point, run as an async Ray actor."""

    def __init__(self, task: WorkerTask) -> None:
        self.worker = PointWorker(task)
        self.index = task.share.worker
        self.measuring: asyncio.Future | None = None
        self.stop_asked = False

    async def prepare(self) -> tuple[str, Any]:
        """Warm the pool and send the warm-up; ``("ready", WorkerReady)`` or ``("failed", ...)``."""
        try:
            return "ready", await self.worker.prepare()
        except Exception as exc:  # noqa: BLE001 — reported to the driver as one message
            return "failed", WorkerFailure.of(self.index, exc)

    async def clock(self) -> int:
        """This worker's monotonic clock now (ns), for the driver's offset estimate."""
        return perf_counter_ns()

    async def go(self) -> None:
        """Start the measured window now."""
        self.measuring = asyncio.ensure_future(self.worker.measure())

    async def stop(self) -> None:
        """Stop early: requests in flight are cancelled; :meth:`next` then says ``stopped``."""
        self.stop_asked = True
        if self.measuring is not None and not self.measuring.done():
            self.measuring.cancel()

    async def next(self) -> tuple[str, Any]:
        """The next message: a batch of records, or how the window ended."""
        measuring = self.measuring
        assert measuring is not None, "next() before go()"
        if not self.worker.buffer and not measuring.done():
            waiter = asyncio.ensure_future(self.worker.new_records.wait())
            await asyncio.wait([measuring, waiter], timeout=IDLE_POLL_S, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        if self.worker.buffer and not measuring.done() and len(self.worker.buffer) < BATCH_MAX_RECORDS:
            await asyncio.wait([measuring], timeout=BATCH_INTERVAL_S)
        if self.worker.buffer or not measuring.done():
            return "records", self.worker.take()
        if measuring.cancelled() or self.stop_asked:
            return "stopped", None
        if measuring.exception() is not None:
            return "failed", WorkerFailure.of(self.index, measuring.exception())
        return "done", measuring.result()

    async def close(self) -> None:
        """Close the session."""
        await self.worker.close()
