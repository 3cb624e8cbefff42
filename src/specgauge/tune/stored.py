"""A tune as one result in the results store (id ``tN``): its plan when it starts, then its result
document and the bench runs it made (docs/tune.md, "Stored").

The result document is ``render.result_document`` plus the tune id and the heat map; it is read
back into a :class:`~specgauge.tune.run.TuneResult` by pydantic (the dataclasses' own types), so
``specgauge report tN`` renders exactly what ``tune`` printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from typing import Iterator

from pydantic import TypeAdapter, ValidationError

from specgauge import __version__
from specgauge.analysis.results import ServerSetting
from specgauge.errors import UserError
from specgauge.load.stop_signals import StoppedBySignal
from specgauge.load.bench_config import redacted_headers
from specgauge.store import Store, StoreWriteError
from specgauge.tune.heatmap import heat_map_document
from specgauge.tune.render import result_document
from specgauge.tune.run import TunePlan, TuneResult


def plan_document(plan: TunePlan) -> dict:
    """The plan as stored (``tunes.plan_json``), with the specgauge version that ran it; the secrets
    (``--api-key``, ``--header`` values) are never stored."""
    document = dataclasses.asdict(plan)
    del document["api_key"]
    document["headers"] = redacted_headers(plan.headers)
    return {**document, "tool_version": __version__}


@contextlib.contextmanager
def tune_stopped_marked(store: Store, tune_id: int) -> Iterator[None]:
    """Mark the tune ``interrupted`` (Ctrl-C) or ``failed`` (with the error) when the block raises;
    best effort, the store may be what failed. Its bench runs stay in the store either way."""
    try:
        yield
    except BaseException as exc:
        interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError, StoppedBySignal))
        error = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        try:
            store.finish_tune(tune_id, status="interrupted" if interrupted else "failed", error=" ".join(error.split()))
        except (sqlite3.Error, StoreWriteError):
            pass
        raise


def tune_document(tune_id: int | None, result: TuneResult, settings: tuple[ServerSetting, ...]) -> dict:
    """The JSON document of a tune: ``result_document`` plus its id and heat map."""
    return {"tune_id": tune_id, **result_document(result, settings), "heat_map": heat_map_document(result)}


def store_tune(store: Store, tune_id: int, result: TuneResult, settings: tuple[ServerSetting, ...]) -> dict:
    """Link every point's bench run to the tune, store its document and mark it done; returns the document."""
    for stage, points in (("measure", result.points), ("verify", result.verify_points)):
        for point in points:
            store.link_tune_run(tune_id, point.run_id, stage=stage, arm=point.arm, concurrency=point.concurrency,
                                round=point.round)
    document = tune_document(tune_id, result, settings)
    store.finish_tune(tune_id, status="done", result=document)
    return document


@dataclasses.dataclass(frozen=True)
class StoredTune:
    """A finished tune read back from the store."""

    tune_id: int
    plan: dict
    result: TuneResult
    settings: tuple[ServerSetting, ...]
    started_at: str
    finished_at: str | None


def load_tune(store: Store, tune_id: int) -> StoredTune:
    """The tune ``tune_id`` as it was stored; a tune with no result (still running, failed,
    interrupted) or one this specgauge cannot read is a one-line :class:`UserError`."""
    row = store.get_tune(tune_id)
    if row.result is None:
        why = f": {row.error}" if row.error else ""
        raise UserError(f"tune {tune_id} is {row.status} and has no result to report{why}")
    try:
        result = TypeAdapter(TuneResult).validate_python(row.result)
        settings = tuple(ServerSetting.model_validate(s) for s in row.result.get("settings") or ())
    except ValidationError as exc:
        raise UserError(f"tune {tune_id}: its stored result does not match this specgauge's format "
                        f"({exc.error_count()} error(s)); upgrade specgauge") from None
    return StoredTune(tune_id, row.plan, result, settings, row.started_at, row.finished_at)
