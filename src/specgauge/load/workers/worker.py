"""The worker side of a split point, the same code in a local process and in a Ray actor.

:class:`PointWorker` opens its own session, warms its share of the pool, sends its share of the
warm-up (:meth:`prepare`); then, when the driver says go, measures its slots (:meth:`measure`) on
its own monotonic clock — every latency of a request is taken where the request was sent — while a
monitor samples its event-loop lag. Finished records wait in a buffer the host drains in batches
(:meth:`take`); the host (local process or actor) carries them to the driver.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns

from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.records import RequestRecord
from specgauge.client.session import gc_frozen, open_session, warm_pool
from specgauge.client.tokens import load_tokenizer
from specgauge.errors import UserError
from specgauge.load.traces.replay import suite_trace_times
from specgauge.load.outage import ServerDown
from specgauge.load.runner import execute_plan
from specgauge.load.workers.split import WorkerShare
from specgauge.suites.model import Suite

LOOP_LAG_TICK_S = 0.01  # the monitor asks to wake every 10 ms; how late it wakes is the loop's lag


@dataclass(frozen=True)
class WorkerTask:
    """All a worker needs for its share of a point (pickled to a process or an actor)."""

    share: WorkerShare
    endpoint: Endpoint
    suite: Suite
    skip: frozenset[int] = frozenset()
    timeouts: Timeouts = Timeouts()


@dataclass(frozen=True)
class WorkerReady:
    """A worker with its pool warm and its warm-up sent, waiting for the start."""

    worker: int
    host: str
    pid: int
    boot_id: str          # same boot id as the driver: same monotonic clock (same machine)
    connect_ms: list[float]


@dataclass(frozen=True)
class WorkerReport:
    """A worker's measured window on its own clock, and its self-check figures."""

    worker: int
    host: str
    pid: int
    window_start_ns: int
    window_end_ns: int
    records: int
    loop_lag_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class WorkerFailure:
    """Why a worker stopped before its end: the server went away, bad input, or a crash."""

    worker: int
    kind: str             # "server_down" | "user" | "crash"
    message: str
    exit_code: int = 1
    base_url: str = ""
    reason: str = ""
    failures: int = 0

    @classmethod
    def of(cls, worker: int, exc: BaseException) -> "WorkerFailure":
        if isinstance(exc, ServerDown):
            return cls(worker, "server_down", str(exc), exc.exit_code, exc.base_url, exc.reason, exc.failures)
        if isinstance(exc, UserError):
            return cls(worker, "user", str(exc), exc.exit_code)
        return cls(worker, "crash", f"{type(exc).__name__}: {exc}")

    def as_error(self) -> UserError:
        """The failure as the driver raises it (a :class:`ServerDown` stays one)."""
        if self.kind == "server_down":
            return ServerDown(self.base_url, self.reason, self.failures)
        error = UserError(self.message)
        error.exit_code = self.exit_code
        return error


def boot_id() -> str:
    """This machine's boot id (Linux), else its host name: equal ids share one monotonic clock."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


class PointWorker:
    """One worker's share of a point: :meth:`prepare`, :meth:`measure`, :meth:`take`, :meth:`close`."""

    def __init__(self, task: WorkerTask) -> None:
        self.task = task
        self.buffer: list[RequestRecord] = []
        self.new_records = asyncio.Event()
        self._stack = AsyncExitStack()
        self._session = None
        self._connect_ms: list[float] = []

    async def prepare(self) -> WorkerReady:
        """Open the session, warm this worker's pool, send its warm-up requests (not recorded)."""
        task = self.task
        if task.endpoint.tokenizer_path:
            load_tokenizer(task.endpoint.tokenizer_path)
        self._session = await self._stack.enter_async_context(open_session(task.timeouts, self._connect_ms,
                                                                                 insecure=task.endpoint.insecure))
        await warm_pool(self._session, task.endpoint, task.share.pool_size, task.timeouts)
        warm_items = task.share.warmup(len(task.suite.requests))
        if warm_items:
            warm_spec = dataclasses.replace(task.share.spec, mode="closed", trace_speed=None,
                                            concurrency=task.share.pool_size,
                                            num_requests=len(warm_items), duration_s=None, rate=None,
                                            max_concurrency=None)
            await execute_plan(self._session, task.endpoint, task.suite, warm_spec, warm_items, on_record=None,
                               timeouts=task.timeouts, window_start_ns=perf_counter_ns(), deadline_ns=None)
        self._stack.enter_context(gc_frozen())  # collected now, not at the start; no GC pause until close()
        return WorkerReady(task.share.worker, socket.gethostname(), os.getpid(), boot_id(), list(self._connect_ms))

    def _keep(self, record: RequestRecord) -> None:
        self.buffer.append(record)
        self.new_records.set()

    def take(self) -> list[RequestRecord]:
        """The records finished since the last call (in completion order)."""
        batch, self.buffer = self.buffer, []
        self.new_records.clear()
        return batch

    async def measure(self) -> WorkerReport:
        """Measure this worker's slots from now (its own clock; GC frozen since :meth:`prepare`),
        sampling the event loop's lag."""
        task, share = self.task, self.task.share
        trace_times = suite_trace_times(task.suite) if share.point.trace_speed is not None else None
        items = share.slots(len(task.suite.requests), task.skip, trace_times)
        loop_lag_ms: list[float] = []
        monitor = asyncio.ensure_future(_sample_loop_lag(loop_lag_ms))
        sent = 0

        def on_record(record: RequestRecord) -> None:
            nonlocal sent
            sent += 1
            self._keep(record)

        try:
            start_ns = perf_counter_ns()
            deadline_ns = start_ns + int(share.point.duration_s * 1e9) if share.point.duration_s else None
            await execute_plan(self._session, task.endpoint, task.suite, share.spec, items, on_record=on_record,
                               timeouts=task.timeouts, window_start_ns=start_ns, deadline_ns=deadline_ns)
            end_ns = perf_counter_ns()
        finally:
            monitor.cancel()
        return WorkerReport(share.worker, socket.gethostname(), os.getpid(), start_ns, end_ns, sent, loop_lag_ms)

    async def close(self) -> None:
        """Close the session (its connections); the garbage collector runs again."""
        await self._stack.aclose()


async def _sample_loop_lag(into: list[float]) -> None:
    """Append, every tick, how much later than asked the event loop woke this task (ms)."""
    while True:
        asked = perf_counter_ns()
        await asyncio.sleep(LOOP_LAG_TICK_S)
        into.append(max(0.0, (perf_counter_ns() - asked) / 1e6 - LOOP_LAG_TICK_S * 1e3))

