"""The driver side of a split point: start the workers, one barrier, records to the store, figures.

1. Each worker warms its pool and sends its warm-up; the driver waits for all of them (``ready``).
2. The driver snapshots the server's speculation counters, notes its own clock and tells every
   worker to go; each starts its window at once on its own clock.
3. Batches of finished records arrive as the workers send them; each record's times are moved onto
   the driver's clock by the worker's clock offset (0 on this machine: one monotonic clock; a
   remote worker's offset is estimated by the round trips of :func:`clock_offset_ns`) and handed to
   ``on_record`` — the store writes them as today. Latencies are differences of one worker's own
   readings, so no offset ever enters one.
4. The point's window is the union of the workers' windows on the driver's clock (they overlap:
   one start, so it is the span from the first start to the last end). Each worker's start offset
   (its window start minus the go) is reported with its send lag and event-loop lag.

A worker that dies, or the server going away on one, stops the others (they send what they
finished), and the error names the worker; what was stored stays, ``--resume`` sends the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
from time import perf_counter_ns
from typing import Awaitable, Callable

from specgauge.client.endpoint import Endpoint, Timeouts, request_headers
from specgauge.client.probe import detect_model
from specgauge.client.records import RequestRecord
from specgauge.client.server_metrics import counters_between, scrape_spec_snapshot
from specgauge.client.session import open_session
from specgauge.load.plan import PointSpec
from specgauge.load.runner import PointOutcome
from specgauge.load.workers.protocol import WorkerHandle, WorkerLost
from specgauge.load.workers.report import worker_summary
from specgauge.load.workers.split import Placement, split_point
from specgauge.load.workers.worker import WorkerFailure, WorkerReady, WorkerReport, WorkerTask, boot_id
from specgauge.suites.model import Suite

ClockProbe = Callable[[], Awaitable[int]]


def shift_record(record: RequestRecord, offset_ns: int) -> RequestRecord:
    """``record`` with every time moved by ``offset_ns`` (worker clock → driver clock)."""
    if offset_ns == 0:
        return record

    def moved(value: int | None) -> int | None:
        return None if value is None else value + offset_ns

    return dataclasses.replace(record, scheduled_ns=moved(record.scheduled_ns), t_send_ns=moved(record.t_send_ns),
                               t_headers_ns=moved(record.t_headers_ns), t_end_ns=moved(record.t_end_ns),
                               chunk_times_ns=[t + offset_ns for t in record.chunk_times_ns])


async def clock_offset_ns(read_worker_clock: ClockProbe, rounds: int = 8) -> int:
    """Driver clock minus worker clock, from the round trip with the least delay (its midpoint is
    taken as the moment the worker read its clock)."""
    best: tuple[int, int] | None = None
    for _ in range(rounds):
        sent = perf_counter_ns()
        worker_ns = await read_worker_clock()
        back = perf_counter_ns()
        if best is None or back - sent < best[0]:
            best = (back - sent, (sent + back) // 2 - worker_ns)
    assert best is not None
    return best[1]


async def run_point_on_workers(endpoint: Endpoint, suite: Suite, spec: PointSpec, placement: Placement, *,
                               on_record: Callable[[RequestRecord], None],
                               skip_request_indices: frozenset[int] = frozenset(),
                               timeouts: Timeouts = Timeouts(),
                               on_connections: Callable[[int, int], None] | None = None) -> PointOutcome:
    """Run one point split over ``placement``'s workers; the :class:`PointOutcome` of the whole point,
    with one summary per worker in ``workers``. Raises :class:`WorkerLost` when a worker dies,
    :class:`~specgauge.load.outage.ServerDown` when the server stops answering one of them."""
    if endpoint.model is None and endpoint.api != "sglang":
        endpoint = dataclasses.replace(endpoint, model=await detect_model(endpoint))
    shares = split_point(spec, placement.workers if placement.ray_address is None else
                         _ray_worker_count(placement))
    tasks = [WorkerTask(share, endpoint, suite, frozenset(i for i in skip_request_indices if share.owns(i)), timeouts)
             for share in shares]
    handles, probes = _start(tasks, placement)
    records: list[RequestRecord] = []
    finished = False
    try:
        readies: list[WorkerReady] = await _all_ready(handles)
        if on_connections is not None:
            total = sum(len(r.connect_ms) for r in readies)
            on_connections(total, total)
        offsets = [0 if ready.boot_id == boot_id() else await clock_offset_ns(probe)
                   for ready, probe in zip(readies, probes)]
        async with open_session(timeouts, insecure=endpoint.insecure) as session:
            headers = request_headers(endpoint)
            before = await scrape_spec_snapshot(session.http, endpoint.base_url, headers)
            go_ns = perf_counter_ns()
            await asyncio.gather(*(handle.go() for handle in handles))
            reports = await _collect(handles, offsets, records, on_record)
            after = await scrape_spec_snapshot(session.http, endpoint.base_url, headers)
        finished = True
    finally:
        await asyncio.gather(*(handle.close(kill=not finished) for handle in handles), return_exceptions=True)
    windows = [(report.window_start_ns + offset, report.window_end_ns + offset)
               for report, offset in zip(reports, offsets)]
    summaries = [worker_summary(handle.name, ready, report, offset, go_ns,
                                [r for r in records if r.request_index >= 0 and tasks[i].share.owns(r.request_index)])
                 for i, (handle, ready, report, offset) in enumerate(zip(handles, readies, reports, offsets))]
    lags = [r.send_lag_ns / 1e6 for r in records if r.send_lag_ns is not None]
    return PointOutcome(records=records, window_start_ns=min(w[0] for w in windows),
                        window_end_ns=max(w[1] for w in windows), warmup_records=spec.warmup_requests,
                        connect_ms=[ms for ready in readies for ms in ready.connect_ms], send_lag_ms=lags,
                        server_spec=counters_between(before, after), server_spec_before=before or None,
                        server_spec_after=after or None, model=endpoint.model, workers=summaries)


def _ray_worker_count(placement: Placement) -> int:
    from specgauge.load.workers.ray_backend import planned_actor_count

    return planned_actor_count(placement)


def _start(tasks: list[WorkerTask], placement: Placement) -> tuple[list[WorkerHandle], list[ClockProbe | None]]:
    if placement.ray_address is None:
        from specgauge.load.workers.local import local_workers

        return list(local_workers(tasks)), [None] * len(tasks)
    from specgauge.load.workers.ray_backend import ray_workers

    handles = ray_workers(tasks, placement)
    return list(handles), [handle.read_clock for handle in handles]


async def _all_ready(handles: list[WorkerHandle]) -> list[WorkerReady]:
    async def one(handle: WorkerHandle) -> WorkerReady:
        kind, body = await handle.receive()
        if kind == "failed":
            raise _named(handle, body)
        if kind != "ready":
            raise WorkerLost(handle.name, f"sent {kind!r} before it was ready")
        handle.name = f"{handle.name.split(' (')[0]} (pid {body.pid} on {body.host})"
        return body

    return await _first_error_stops_all(handles, [one(h) for h in handles])


async def _collect(handles: list[WorkerHandle], offsets: list[int], records: list[RequestRecord],
                   on_record: Callable[[RequestRecord], None]) -> list[WorkerReport]:
    """Take every worker's batches until each is done; move them onto the driver's clock, keep them."""
    async def pump(handle: WorkerHandle, offset: int) -> WorkerReport:
        while True:
            kind, body = await handle.receive()
            if kind == "records":
                for record in body:
                    record = shift_record(record, offset)
                    records.append(record)
                    on_record(record)
            elif kind == "done":
                return body
            elif kind == "failed":
                raise _named(handle, body)
            elif kind == "stopped":
                return None  # type: ignore[return-value]  — only after a stop, which raises first
            else:
                raise WorkerLost(handle.name, f"sent an unknown message {kind!r}")

    return await _first_error_stops_all(handles, [pump(h, o) for h, o in zip(handles, offsets)])


def _named(handle: WorkerHandle, failure: WorkerFailure) -> BaseException:
    error = failure.as_error()
    if failure.kind == "crash":
        return WorkerLost(handle.name, failure.message)
    error.args = (f"{error} (on {handle.name})",)
    return error


async def _first_error_stops_all(handles: list[WorkerHandle], coros: list) -> list:
    """Run one coroutine per worker; the first to fail (or a cancellation) asks every worker to stop,
    waits for their last records (the coroutines keep reading), then raises that failure."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        failed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
        if not failed:
            return [t.result() for t in tasks]
        error = failed[0].exception()
    except asyncio.CancelledError:
        error = None
    await asyncio.gather(*(handle.stop() for handle in handles), return_exceptions=True)
    await asyncio.wait(tasks, timeout=30.0)  # the others' last records still flow to on_record
    for task in tasks:
        if not task.done():
            task.cancel()
        elif not task.cancelled():
            task.exception()  # retrieved: a second failure is not logged as never retrieved
    if error is None:
        raise asyncio.CancelledError
    raise error
