"""A stored tune for the report tests: synthetic throughputs (every figure known), real bench-run
rows in a real SQLite store, stored the way ``specgauge tune`` stores it."""

from __future__ import annotations

from pathlib import Path

from specgauge.analysis.results import SpeculationSetup
from specgauge.store import Store
from specgauge.tune.arms import SCHEDULE_ARM, engine_arm
from specgauge.tune.choice import build_schedule, choose_cell
from specgauge.tune.run import PointMeasure, TunePlan, TuneResult, measurements, verify_levels
from specgauge.tune.settings import schedule_settings
from specgauge.tune.stored import plan_document, store_tune

DEPTHS = (0, 1, 3)
LEVELS = (1, 4, 16)
# tok/s per (depth, level): depth 3 best at 1, depth 1 best at 4, no speculation best at 16
THROUGHPUT = {(0, 1): 50.0, (1, 1): 70.0, (3, 1): 95.0,
              (0, 4): 180.0, (1, 4): 230.0, (3, 4): 200.0,
              (0, 16): 600.0, (1, 16): 520.0, (3, 16): 400.0}
ROUND_DRIFT = (1.0, 1.02)   # round 2 ran 2% faster for every arm: paired ratios cancel it


def _run(store: Store, arm: str, level: int) -> int:
    run_id = store.create_run(tool_version="0.1.0", host="test-host", url="http://127.0.0.1:30000", api="openai-chat",
                            model="tiny", config={"arm": arm, "concurrency": [level]}, suite_name="smoke",
                            suite_version=1, suite_hash="ab" * 32)
    store.set_run_status(run_id, "done")
    return run_id


def tune_result(store: Store) -> TuneResult:
    """The synthetic tune, its points backed by run rows in ``store``."""
    arms = [engine_arm(d, "--model tiny", "EAGLE3") for d in DEPTHS]
    points = [PointMeasure(arm.label, level, r, THROUGHPUT[(arm.depth, level)] * drift, 20.0 / (1 + arm.depth),
                           1.5, _run(store, arm.label, level))
              for r, drift in enumerate(ROUND_DRIFT) for level in LEVELS for arm in arms]
    choices = tuple(choose_cell(measurements(points, arms, level)) for level in LEVELS)
    schedule = build_schedule(choices)
    chosen = {c.cell.concurrency: c.chosen for c in choices}
    verify_points = [PointMeasure(label, level, r, THROUGHPUT[(depth, level)] * drift * factor, 10.0, 1.5,
                                  _run(store, label, level))
                     for r, drift in enumerate(ROUND_DRIFT) for level in LEVELS
                     for label, depth, factor in ((SCHEDULE_ARM, chosen[level], 0.99 + 0.01 * r),
                                                  ("k=0", 0, 1.0), ("k=3", 3, 1.0))]
    verify = verify_levels(verify_points, ["k=0", "k=3"], LEVELS, len(ROUND_DRIFT))
    return TuneResult(choices, schedule, tuple(points), 27.0, 54.0, {level: 2 for level in LEVELS}, verify, "k=3",
                      tuple(verify_points), ("a note for the report",))


def stored_tune(db: Path) -> int:
    """Store the synthetic tune in ``db``; returns its id."""
    with Store.open(db) as store:
        plan = TunePlan(arms=tuple(engine_arm(d, "--model tiny", "EAGLE3") for d in DEPTHS), concurrency=LEVELS,
                        suite="smoke")
        tune_id = store.create_tune(plan_document(plan))
        result = tune_result(store)
        settings = schedule_settings(result.schedule, SpeculationSetup(engine="specgauge", method="EAGLE3"))
        store_tune(store, tune_id, result, settings)
    return tune_id
