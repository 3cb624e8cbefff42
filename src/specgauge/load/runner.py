"""Run one load point: warm the pool, warm up, measure a window, diff the server's counters.

The measured window is executed by :func:`execute_plan` over a list of planned slots. Here one
process runs them all; with ``--workers``/``--ray-address`` each worker runs its share of the slots
through the same :func:`execute_plan` (:mod:`specgauge.load.workers`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Callable, Coroutine, Iterable, TypeVar

from specgauge.client.endpoint import Endpoint, Timeouts, request_headers
from specgauge.client.probe import detect_model, unreachable_reason
from specgauge.client.records import RequestRecord
from specgauge.client.send import send_request
from specgauge.client.tokens import load_tokenizer
from specgauge.client.session import StreamSession, gc_frozen, open_session, warm_pool
from specgauge.client.server_metrics import SpecCounters, counters_between, scrape_spec_snapshot
from specgauge.load.outage import OutageGuard
from specgauge.load.plan import PlannedRequest, PointSpec, plan_requests, prompt_order
from specgauge.load.sessions import SessionEnds, run_session, think_time_s
from specgauge.load.traces.replay import suite_trace_times
from specgauge.suites.model import Suite

T = TypeVar("T")
WARMUP_SEED_OFFSET = 1_000_003


@dataclass
class PointOutcome:
    """What a point produced: its measured records and the runner's own figures."""

    records: list[RequestRecord]          # measured requests, in completion order
    window_start_ns: int
    window_end_ns: int
    warmup_records: int                   # warm-up requests sent (not in ``records``)
    connect_ms: list[float]               # set-up time of every connection the point opened
    send_lag_ms: list[float]              # actual minus scheduled send, per measured request
    server_spec: SpecCounters | None      # server-side speculation figures for the point
    server_spec_before: dict | None       # raw snapshots the figures came from
    server_spec_after: dict | None
    model: str | None = None              # the model name sent (given or auto-detected)
    workers: list[dict] = dataclasses.field(default_factory=list)  # one summary per worker of a split point
    session_ends: SessionEnds | None = None   # a suite with sessions: why some ended early


def run_async(coro: Coroutine[object, object, T]) -> T:
    """Run ``coro`` on a uvloop event loop when uvloop is installed (asyncio's otherwise)."""
    try:
        import uvloop
        loop_factory = uvloop.new_event_loop
    except ImportError:
        loop_factory = None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(coro)


async def execute_plan(session: StreamSession, endpoint: Endpoint, suite: Suite, spec: PointSpec,
                       items: Iterable[PlannedRequest], *, on_record: Callable[[RequestRecord], None] | None,
                       timeouts: Timeouts, window_start_ns: int,
                       deadline_ns: int | None, session_ends: SessionEnds | None = None) -> list[RequestRecord]:
    """Send ``items`` under ``spec``'s load mode; return their records (completion order).

    Closed loop: ``spec.concurrency`` users share the slot list; each user's next request is
    scheduled the moment its last one ended (so send lag shows client-side delay, ``on_record``
    included). Open loop: slot ``i`` is scheduled at ``window_start + offset_i``; with
    ``max_concurrency`` a slot also waits for a free place (that wait shows up as lag).
    No new request starts after ``deadline_ns``; requests in flight finish.

    Connection-level failures go through an :class:`~specgauge.load.outage.OutageGuard`: when the
    server stops answering, :class:`~specgauge.load.outage.ServerDown` is raised, nothing more is
    sent, requests in flight are cancelled, and the failures of the outage are not returned.

    A suite with sessions (:mod:`specgauge.load.sessions`): each slot is a whole session, its turns
    sent in order on the user (or open-loop arrival) that took the slot; ``session_ends`` counts the
    sessions that ended early.
    """
    records: list[RequestRecord] = []
    ends = session_ends if session_ends is not None else SessionEnds()
    sessions = suite.has_sessions
    guard = OutageGuard(endpoint.base_url, lambda: unreachable_reason(endpoint))

    def keep(finished: list[RequestRecord]) -> None:
        for record in finished:
            records.append(record)
            if on_record is not None:
                on_record(record)

    async def admit(record: RequestRecord) -> None:
        keep(guard.admit(record))
        if guard.suspect:
            keep(await guard.check())

    async def one(item: PlannedRequest, scheduled_ns: int) -> None:
        def send(request, request_index: int, scheduled: int):
            return send_request(session, endpoint, request, request_index=request_index,
                                prompt_index=item.prompt_index, max_tokens=spec.max_tokens,
                                sampling=spec.sampling(request_index), scheduled_ns=scheduled, timeouts=timeouts,
                                ignore_eos=spec.ignore_eos)

        if not sessions:
            await admit(await send(suite.requests[item.prompt_index], item.request_index, scheduled_ns))
            return
        await run_session(
            suite.requests[item.prompt_index], item.request_index, scheduled_ns, send=send, keep=admit,
            endpoint=endpoint, max_tokens=spec.max_tokens, ends=ends,
            think=lambda turn: think_time_s(spec.seed, item.request_index, turn, spec.think_time_ms,
                                            spec.think_time_distribution),
            may_continue=lambda: not guard.probing and (deadline_ns is None or perf_counter_ns() < deadline_ns))

    try:
        async with asyncio.TaskGroup() as group:
            if spec.mode == "closed":
                slots = iter(items)

                async def user() -> None:
                    free_since = window_start_ns
                    for item in slots:  # one shared iterator: each user takes the next free slot
                        if deadline_ns is not None and perf_counter_ns() >= deadline_ns:
                            return
                        if guard.probing:
                            await guard.wait_clear()
                            free_since = perf_counter_ns()
                        await one(item, free_since)
                        free_since = perf_counter_ns()

                for _ in range(int(spec.concurrency or 1)):  # a user with no slot left just returns
                    group.create_task(user())
            else:
                await _open_loop(group, one, guard, spec, items, window_start_ns, deadline_ns)
    except BaseExceptionGroup as errors:  # the first failure (an on_record error, say) as itself
        raise errors.exceptions[0] from None
    keep(await guard.settle())
    return records


async def _open_loop(group: asyncio.TaskGroup, one, guard: OutageGuard, spec: PointSpec,
                     items: Iterable[PlannedRequest], window_start_ns: int, deadline_ns: int | None) -> None:
    """Start each slot at its scheduled time (waiting for a free place under ``max_concurrency``)."""
    limit = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency else None

    async def limited(item: PlannedRequest, scheduled_ns: int) -> None:
        try:
            await one(item, scheduled_ns)
        finally:
            if limit is not None:
                limit.release()

    for item in items:
        scheduled_ns = window_start_ns + int(item.offset_s * 1e9)
        if deadline_ns is not None and scheduled_ns >= deadline_ns:
            return
        # uvloop's timers count whole milliseconds, so a sleep can end up to ~1 ms early: sleep
        # again, then yield the last fraction, so that no request goes out before its time
        while (early_ns := scheduled_ns - perf_counter_ns()) > 0:
            await asyncio.sleep(early_ns / 1e9 if early_ns > 1_000_000 else 0)
        if guard.probing:
            await guard.wait_clear()
        if limit is not None:
            await limit.acquire()
        group.create_task(limited(item, scheduled_ns))


async def run_point(endpoint: Endpoint, suite: Suite, spec: PointSpec, *,
                    on_record: Callable[[RequestRecord], None],
                    skip_request_indices: frozenset[int] = frozenset(),
                    timeouts: Timeouts = Timeouts(),
                    on_connections: Callable[[int, int], None] | None = None) -> PointOutcome:
    """Run one load point against ``endpoint`` and return its :class:`PointOutcome`.

    Steps: detect the model when none is given; open ``spec.pool_size`` connections; send the
    warm-up requests (own prompt order, not recorded); snapshot the server's speculation figures;
    measure the window with GC frozen, calling ``on_record`` in the event loop as each measured
    request finishes; snapshot again and diff. Slots in ``skip_request_indices`` (already stored,
    ``--resume``) are not sent. Request faults are on the records; nothing here raises for them.
    ``on_connections(opened, total)`` reports the pool being opened.
    """
    if endpoint.tokenizer_path:
        load_tokenizer(endpoint.tokenizer_path)  # a bad path fails here, before any request; and it is cached
    if endpoint.model is None and endpoint.api != "sglang":
        endpoint = dataclasses.replace(endpoint, model=await detect_model(endpoint))
    num_prompts = len(suite.requests)
    trace_times = suite_trace_times(suite) if spec.trace_speed is not None else None
    items = (item for item in plan_requests(spec, num_prompts, trace_times)
             if item.request_index not in skip_request_indices)
    connect_ms: list[float] = []
    session_ends = SessionEnds()
    async with open_session(timeouts, connect_ms, insecure=endpoint.insecure) as session:
        await warm_pool(session, endpoint, spec.pool_size, timeouts, on_connections)
        if spec.warmup_requests:
            warm_order = prompt_order(spec.seed + WARMUP_SEED_OFFSET, num_prompts, spec.warmup_requests)
            warm_items = [PlannedRequest(-1 - i, p) for i, p in enumerate(warm_order)]
            warm_spec = dataclasses.replace(spec, mode="closed", concurrency=spec.pool_size, trace_speed=None,
                                            num_requests=len(warm_items), duration_s=None)
            await execute_plan(session, endpoint, suite, warm_spec, warm_items, on_record=None,
                               timeouts=timeouts, window_start_ns=perf_counter_ns(), deadline_ns=None)
        headers = request_headers(endpoint)
        before = await scrape_spec_snapshot(session.http, endpoint.base_url, headers)
        with gc_frozen():
            window_start_ns = perf_counter_ns()
            deadline_ns = (window_start_ns + int(spec.duration_s * 1e9)) if spec.duration_s else None
            records = await execute_plan(session, endpoint, suite, spec, items, on_record=on_record,
                                         timeouts=timeouts, window_start_ns=window_start_ns,
                                         deadline_ns=deadline_ns, session_ends=session_ends)
            window_end_ns = perf_counter_ns()
        after = await scrape_spec_snapshot(session.http, endpoint.base_url, headers)
    lags = [r.send_lag_ns / 1e6 for r in records if r.send_lag_ns is not None]
    return PointOutcome(records=records, window_start_ns=window_start_ns, window_end_ns=window_end_ns,
                        warmup_records=spec.warmup_requests, connect_ms=connect_ms, send_lag_ms=lags,
                        server_spec=counters_between(before, after), server_spec_before=before or None,
                        server_spec_after=after or None, model=endpoint.model,
                        session_ends=session_ends if suite.has_sessions else None)
