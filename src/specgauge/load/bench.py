"""Run a benchmark sweep (or finish an interrupted one) and store every request as it finishes.

The programmatic entry of ``specgauge bench``: :func:`run_benchmark` and :func:`resume_benchmark`
return a :class:`RunSummary`; ``compare`` and the demo call them without the CLI.
"""

from __future__ import annotations

import asyncio
import dataclasses
import platform
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from specgauge import __version__
from specgauge.analysis.aggregate import (PointAggregate, Window, aggregate_point, server_spec_as_dict,
                                          window_from_records)
from specgauge.analysis.saturation import load_warnings
from specgauge.client.probe import check_reachable, detect_model, fingerprint, server_of
from specgauge.errors import UserError
from specgauge.load.bench_config import BenchConfig, restore_headers
from specgauge.load.plan import Endpoint, PointSpec, prompt_order
from specgauge.load.runner import PointOutcome, run_point
from specgauge.load.sessions import session_of
from specgauge.load.workers.split import Placement
from specgauge.report.formatting import describe_point
from specgauge.load.workload import prepare_workload
from specgauge.report.progress import BenchProgress, NullProgress
from specgauge.store import PointRow, RunRow, Store, StoreWriteError
from specgauge.store.turn_writer import TurnWriter
from specgauge.suites.model import Suite
from specgauge.suites.registry import load_suite


@dataclass(frozen=True)
class PointResult:
    """One finished point of a run."""

    point_index: int
    spec: dict
    aggregate: PointAggregate


@dataclass(frozen=True)
class RunSummary:
    """What a run produced; the full detail is in the store under ``run_id``."""

    run_id: int
    status: str
    points: tuple[PointResult, ...]

    @property
    def flagged(self) -> bool:
        return any(p.aggregate.flagged for p in self.points)


class RunStopped(UserError):
    """A run stopped before its end for a reason outside specgauge (the server stopped answering,
    the store cannot be written). It is marked ``failed`` with the reason, everything stored stays,
    and ``--resume`` finishes it; the exit code is the cause's (3 server, 4 store)."""

    def __init__(self, run_id: int, cause: UserError, where: str) -> None:
        super().__init__(f"run {run_id} stopped: {cause}{where}")
        self.run_id = run_id
        self.cause = cause
        self.exit_code = cause.exit_code

    def with_resume(self, command: str) -> UserError:
        """This error as one line ending in the command (``specgauge bench --resume 3 --db r.db``)
        that finishes the run, with the exit code kept."""
        from specgauge.load.outage import ServerDown
        from specgauge.load.workers.protocol import WorkerLost

        when = "when the server answers again" if isinstance(self.cause, ServerDown) else \
            "once the worker's machine is back (or with fewer workers)" if isinstance(self.cause, WorkerLost) else \
            "once the store can be written (free space, or move the file)"
        error = UserError(f"{self}; {when}, finish it with: {command}")
        error.exit_code = self.exit_code
        return error


def _stop_run(store: Store, run_id: int, progress: BenchProgress, exc: BaseException,
              point: PointRow | None) -> BaseException:
    """Mark the run stopped by ``exc`` (best effort: the store may be what failed); the exception
    to raise in its place."""
    if isinstance(exc, sqlite3.Error):
        exc = StoreWriteError(store.path, exc)
    interrupted = isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt))
    status = "interrupted" if interrupted else "failed"
    error = None if interrupted else (str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}")
    try:
        store.commit()
        store.set_run_status(run_id, status, error=error)
    except (sqlite3.Error, StoreWriteError):  # cannot be written: the run stays 'running', resumable all the same
        pass
    store.release_run(run_id)
    progress.run_finished(run_id, status)
    if isinstance(exc, UserError) and exc.exit_code != 2 and point is not None:
        return RunStopped(run_id, exc, _where(store, point))
    return exc


def _where(store: Store, point: PointRow) -> str:
    """``; at point c=4: 136 of 600 requests stored`` (best effort)."""
    try:
        stored = len(store.measured_indices(point.id))
    except sqlite3.Error:
        return ""
    total = point.spec.get("num_requests")
    return f"; at point {describe_point(point.spec)}: {stored}{f' of {total}' if total else ''} requests stored"


def _endpoint(config: BenchConfig, model: str | None) -> Endpoint:
    return Endpoint(base_url=config.url, api=config.api, model=model, api_key=config.api_key,
                    headers=config.headers, tokenizer_path=config.tokenizer_path, insecure=config.insecure,
                    context_length=config.prepared.context_length if config.prepared is not None else None)


def _check_sessions_placement(suite: Suite, placement: Placement) -> None:
    """A suite with sessions runs in this process: a session's turns are one user's, and the worker
    split deals out request indices, not sessions."""
    if suite.has_sessions and not placement.single_process:
        raise UserError(f"suite '{suite.name}' has multi-turn sessions, which run in one process for now; "
                        f"drop --workers / --ray-address")


async def run_benchmark(config: BenchConfig, store: Store, progress: BenchProgress | None = None, *,
                        placement: Placement = Placement()) -> RunSummary:
    """Run every point of ``config`` against its server, storing each request as it finishes;
    ``placement`` says where the load runs (this process by default; worker processes or Ray actors).

    Raises :class:`UserError` before anything is stored when the suite is unknown, the server
    cannot be reached or the workload cannot be sent as asked (:mod:`specgauge.load.workload`).
    """
    run = await open_run(config, store, progress, placement=placement)
    try:
        return await _run_points(run.run_id, store, run.endpoint, run.suite, run.config, run.progress, placement)
    finally:
        store.release_run(run.run_id)


@dataclass(frozen=True)
class OpenRun:
    """A created run whose points the caller runs one at a time (``compare`` interleaves two
    servers' runs point by point). Made by :func:`open_run`; run points with :func:`run_point_at`,
    end with :func:`close_run`."""

    run_id: int
    store: Store
    endpoint: Endpoint
    suite: Suite
    config: BenchConfig
    progress: BenchProgress
    placement: Placement = Placement()


async def open_run(config: BenchConfig, store: Store, progress: BenchProgress | None = None, *,
                   placement: Placement = Placement()) -> OpenRun:
    """Create the run of ``config`` and its pending points without running any of them.

    Same checks as :func:`run_benchmark` (suite known, server reachable) before anything is stored.
    """
    progress = progress or NullProgress()
    load_suite(config.suite)
    config.point_specs()
    probe = _endpoint(config, config.model)
    await check_reachable(probe)
    model = config.model or await detect_model(probe)
    config = await prepare_workload(config, _endpoint(config, model), Path(store.path).resolve().parent)
    suite = load_suite(config.suite)
    _check_sessions_placement(suite, placement)
    specs = config.point_specs()
    endpoint = _endpoint(config, model)
    server = await fingerprint(endpoint)
    endpoint = dataclasses.replace(endpoint, server=server_of(server))   # probed once, remembered
    run_id = store.create_run(
        tool_version=__version__, host=platform.node(), url=config.url, api=config.api, model=model,
        config=config.stored(), suite_name=suite.name, suite_version=suite.version,
        suite_hash=suite.content_hash, server_fingerprint=server,
        server_info=server.get("server_info"), response_headers=server.get("headers"),
    )
    store.claim_run(run_id)
    store.add_points(run_id, [dataclasses.asdict(spec) for spec in specs])
    progress.run_started(run_id, len(specs), resumed=False)
    return OpenRun(run_id, store, endpoint, suite, config, progress, placement)


async def run_point_at(run: OpenRun, point_index: int) -> PointResult:
    """Run one pending point of an :class:`OpenRun`; a failure or interruption marks the run so."""
    point = next(p for p in run.store.get_points(run.run_id) if p.point_index == point_index)
    try:
        await _run_point(run.store, point, run.endpoint, run.suite, run.config, run.progress, run.placement)
    except BaseException as exc:
        stopped = _stop_run(run.store, run.run_id, run.progress, exc, point)
        if stopped is exc:
            raise
        raise stopped from None
    done = next(p for p in run.store.get_points(run.run_id) if p.point_index == point_index)
    return PointResult(done.point_index, done.spec, PointAggregate.from_dict(done.aggregates))


def close_run(run: OpenRun) -> RunSummary:
    """Mark an :class:`OpenRun` done once all its points ran (else ``interrupted``: resumable)."""
    points = run.store.get_points(run.run_id)
    status = "done" if all(p.status == "done" for p in points) else "interrupted"
    run.store.set_run_status(run.run_id, status)
    run.store.release_run(run.run_id)
    run.progress.run_finished(run.run_id, status)
    return _summary(run.run_id, status, points)


async def resume_benchmark(run_id: int, store: Store, progress: BenchProgress | None = None, *,
                           api_key: str | None = None,
                           headers: tuple[tuple[str, str], ...] = (),
                           placement: Placement = Placement()) -> RunSummary:
    """Finish run ``run_id`` with the config it was started with: unfinished points run, and a
    partial point runs only its missing request indices (same seed, same prompt order).

    ``api_key`` (else ``OPENAI_API_KEY``) and ``headers`` supply the secrets that were not stored.
    """
    progress = progress or NullProgress()
    run = store.get_run(run_id)
    store.claim_run(run_id)  # a second process resuming the same run refuses here, before sending anything
    try:
        return await _resume_claimed(run, store, progress, api_key=api_key, headers=headers, placement=placement)
    finally:
        store.release_run(run_id)


def _restore_run(run: RunRow, *, api_key: str | None, headers: tuple[tuple[str, str], ...],
                 url: str | None = None) -> tuple[BenchConfig, Suite, Endpoint]:
    """A stored run's config (secrets given again, ``url`` replaced), suite (unchanged, or a
    :class:`UserError`) and endpoint."""
    config = _restore_config(run.config, api_key=api_key, headers=headers)
    if url is not None:
        config = config.model_copy(update={"url": url.rstrip("/")})
    suite = load_suite(config.suite)
    if suite.content_hash != run.suite_hash:
        raise UserError(f"run {run.id} used suite {run.suite_name}@{run.suite_version} with hash "
                        f"{run.suite_hash[:12]}, but '{config.suite}' now has hash {suite.content_hash[:12]}; "
                        f"the prompts changed, so the run cannot be resumed")
    return config, suite, dataclasses.replace(_endpoint(config, run.model), server=server_of(run.server_fingerprint))


async def reopen_run(run_id: int, store: Store, progress: BenchProgress | None = None, *, url: str | None = None,
                     api_key: str | None = None, headers: tuple[tuple[str, str], ...] = (),
                     placement: Placement = Placement()) -> OpenRun:
    """Run ``run_id`` as an :class:`OpenRun` again (``compare --resume``), claimed by this process:
    :func:`run_point_at` finishes its unfinished points. ``url`` replaces the stored one (a
    launched arm listens on a new port)."""
    progress = progress or NullProgress()
    run = store.get_run(run_id)
    config, suite, endpoint = _restore_run(run, api_key=api_key, headers=headers, url=url)
    store.claim_run(run_id)
    points = store.get_points(run_id)
    if not all(p.status == "done" for p in points):
        await check_reachable(endpoint)
        store.set_run_status(run_id, "running")
    progress.run_started(run_id, len(points), resumed=True)
    return OpenRun(run_id, store, endpoint, suite, config, progress, placement)


async def _resume_claimed(run: RunRow, store: Store, progress: BenchProgress, *, api_key: str | None,
                          headers: tuple[tuple[str, str], ...], placement: Placement) -> RunSummary:
    run_id = run.id
    config, suite, endpoint = _restore_run(run, api_key=api_key, headers=headers)
    _check_sessions_placement(suite, placement)
    points = store.get_points(run_id)
    progress.run_started(run_id, len(points), resumed=True)
    if all(p.status == "done" for p in points):
        store.set_run_status(run_id, "done")
        progress.run_finished(run_id, "done")
        return _summary(run_id, "done", store.get_points(run_id))
    await check_reachable(endpoint)
    store.set_run_status(run_id, "running")
    return await _run_points(run_id, store, endpoint, suite, config, progress, placement)


def _restore_config(stored: dict, *, api_key: str | None, headers: tuple[tuple[str, str], ...]) -> BenchConfig:
    data = dict(stored, headers=restore_headers(stored.get("headers", []), headers), api_key=api_key)
    return BenchConfig.model_validate(data)


def resumable_by_index(spec: PointSpec) -> bool:
    """Whether a partial point can be finished by sending only its missing request indices.

    Yes for a closed-loop point with a request count: the same users send the rest, each index
    with its own prompt. No for a duration-bounded point (no fixed set of indices) and for an
    open-loop point (the missing arrivals, sent at their scheduled times, would be a thinner
    load than the stated rate): those rerun whole.
    """
    return spec.mode == "closed" and spec.num_requests is not None


async def _run_points(run_id: int, store: Store, endpoint: Endpoint, suite: Suite, config: BenchConfig,
                      progress: BenchProgress, placement: Placement = Placement()) -> RunSummary:
    point = None
    try:
        for point in store.get_points(run_id):
            if point.status != "done":
                await _run_point(store, point, endpoint, suite, config, progress, placement)
        store.set_run_status(run_id, "done")
    except BaseException as exc:
        stopped = _stop_run(store, run_id, progress, exc, point)
        if stopped is exc:
            raise
        raise stopped from None
    progress.run_finished(run_id, "done")
    return _summary(run_id, "done", store.get_points(run_id))


async def _run_point(store: Store, point: PointRow, endpoint: Endpoint, suite: Suite, config: BenchConfig,
                     progress: BenchProgress, placement: Placement = Placement()) -> None:
    spec = PointSpec(**point.spec)
    stored = store.measured_indices(point.id)
    if suite.has_sessions:   # slots are sessions: one whose first turn is stored was sent (load/sessions.py)
        stored = frozenset(session_of(i) for i in stored)
    if stored and not resumable_by_index(spec):
        store.delete_requests(point.id)
        stored = frozenset()
    segment = store.next_segment(point.id)
    store.start_point(point.id)
    total, done = spec.num_requests, len(stored)
    if suite.has_sessions and total is not None:   # progress counts turns: every turn is a stored request
        total = sum(suite.requests[p].num_turns for p in prompt_order(spec.seed, len(suite.requests), total))
        done = len(store.measured_indices(point.id))
    progress.point_started(point.point_index, describe_point(point.spec), total, done)

    writer = TurnWriter(store, point.id, segment)  # inserted at once, committed this loop turn

    def on_record(record) -> None:
        writer(record)
        progress.request_finished(record)

    outcome = None
    if spec.num_requests is None or len(stored) < spec.num_requests:
        try:
            on_connections = getattr(progress, "connections_opened", None)
            if placement.single_process:
                outcome = await run_point(endpoint, suite, spec, on_record=on_record, skip_request_indices=stored,
                                          on_connections=on_connections)
            else:
                from specgauge.load.workers.driver import run_point_on_workers

                outcome = await run_point_on_workers(endpoint, suite, spec, placement, on_record=on_record,
                                                     skip_request_indices=stored, on_connections=on_connections)
        finally:
            writer.flush()
        store.checkpoint()  # between points, never inside a measured window
    windows, aggregate = _aggregate_stored(store, point.id, outcome, segment, config.max_error_rate, point.spec)
    if outcome is not None and outcome.session_ends is not None:
        aggregate = dataclasses.replace(aggregate, session_notes=outcome.session_ends.notes())
    store.finish_point(
        point.id, windows=[[w.start_ns, w.end_ns] for w in windows], aggregates=aggregate.to_dict(),
        server_spec_before=server_spec_as_dict(outcome.server_spec_before) if outcome is not None else None,
        server_spec_after=server_spec_as_dict(outcome.server_spec_after) if outcome is not None else None,
    )
    progress.point_finished(point.point_index, aggregate)


def _aggregate_stored(store: Store, point_id: int, outcome: PointOutcome | None, segment: int,
                      max_error_rate: float, spec: dict) -> tuple[list[Window], PointAggregate]:
    """Aggregate every stored request of the point over the windows of all its segments.

    The segment just run has the runner's window; an earlier one, cut short by a kill, spans its
    first send to its last stored end. Server counters and connect times cover the last run only.
    """
    segments = store.request_segments(point_id)
    windows: list[Window] = []
    for number, records in segments.items():
        if outcome is not None and number == segment:
            windows.append(Window(outcome.window_start_ns, outcome.window_end_ns))
        elif (window := window_from_records(records)) is not None:
            windows.append(window)
    resumed = len(windows) > 1
    aggregate = aggregate_point(
        [r for group in segments.values() for r in group], windows,
        connect_ms=outcome.connect_ms if outcome is not None else (),
        send_lag_ms=None if resumed or outcome is None else outcome.send_lag_ms,
        server_spec=outcome.server_spec if outcome is not None else None,
        max_error_rate=max_error_rate,
    )
    records = [r for group in segments.values() for r in group]
    aggregate = dataclasses.replace(aggregate, load_warnings=load_warnings(
        spec, records, send_lag_p50_ms=aggregate.send_lag_ms.p50, send_lag_p99_ms=aggregate.send_lag_ms.p99,
        achieved_concurrency=aggregate.achieved_concurrency, window_s=aggregate.window_s,
        e2e_p50_ms=aggregate.e2e_ms.p50))
    if outcome is not None and outcome.workers:
        from specgauge.load.workers.report import worker_warnings

        aggregate = dataclasses.replace(aggregate, workers=outcome.workers,
                                        load_warnings=[*aggregate.load_warnings, *worker_warnings(outcome.workers)])
    if resumed and aggregate.server_spec is not None:
        aggregate = dataclasses.replace(
            aggregate, server_spec={**aggregate.server_spec, "covers": "the last segment of a resumed point only"})
    return windows, aggregate


def _summary(run_id: int, status: str, points: list[PointRow]) -> RunSummary:
    return RunSummary(run_id=run_id, status=status, points=tuple(
        PointResult(p.point_index, p.spec, PointAggregate.from_dict(p.aggregates))
        for p in points if p.status == "done" and p.aggregates is not None))
