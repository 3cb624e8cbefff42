"""A tune stored as one result: read back equal to what was measured, its runs linked, a stopped
tune marked with why, and its document carrying the heat map with the schedule drawn on it."""

from __future__ import annotations

import json

import pytest

from specgauge.errors import UserError
from specgauge.store import Store
from specgauge.tune.heatmap import heat_map
from specgauge.tune.stored import load_tune, tune_stopped_marked

from tune_fixtures import LEVELS, THROUGHPUT, stored_tune, tune_result


def test_a_stored_tune_reads_back_equal_with_every_run_linked(tmp_path):
    tune_id = stored_tune(tmp_path / "t.db")
    with Store.open(tmp_path / "t.db", create=False) as store:
        stored = load_tune(store, tune_id)
        links = store.tune_runs(tune_id)
        row = store.get_tune(tune_id)
    expected_points = {p.run_id: p for p in (*stored.result.points, *stored.result.verify_points)}
    assert {link.run_id for link in links} == set(expected_points)
    for link in links:
        point = expected_points[link.run_id]
        assert (link.arm, link.concurrency, link.round) == (point.arm, point.concurrency, point.round)
        assert link.stage == ("verify" if point in stored.result.verify_points else "measure")
    assert row.status == "done" and row.plan["concurrency"] == list(LEVELS)
    assert stored.result.schedule.as_json_list() == row.result["schedule"]["entries"]
    assert [s.server for s in stored.settings] == ["sglang", "vllm", "specgauge"]
    # the document is plain JSON and reads back to the same result
    assert json.loads(json.dumps(row.result)) == row.result


def test_the_heat_map_marks_the_chosen_depth_and_the_schedule_range(tmp_path):
    with Store.open(tmp_path / "t.db") as store:
        result = tune_result(store)
    grid = heat_map(result)
    assert grid.depths == (0, 1, 3) and grid.bands == (None,)
    for row, choice in zip(grid.rows, result.choices):
        best = max(THROUGHPUT[(d, row.concurrency)] for d in grid.depths)
        for cell in row.cells:
            # relative to the cell's best, the paired geometric mean of the per-round ratios
            assert cell.relative == pytest.approx(THROUGHPUT[(cell.depth, row.concurrency)] / best)
            assert cell.chosen == (cell.depth == choice.chosen)
        assert sum(cell.chosen for cell in row.cells) == 1
        lo, hi = row.schedule_batch_sizes
        assert lo <= row.concurrency <= hi and row.schedule_depth == choice.chosen


def test_a_tune_that_stops_is_marked_with_why_and_has_no_result_to_report(tmp_path):
    with Store.open(tmp_path / "t.db") as store:
        tune_id = store.create_tune({"depths": [0, 3]})
        with pytest.raises(UserError):
            with tune_stopped_marked(store, tune_id):
                raise UserError("tune: every request failed at concurrency 4")
        interrupted = store.create_tune({"depths": [0, 3]})
        with pytest.raises(KeyboardInterrupt):
            with tune_stopped_marked(store, interrupted):
                raise KeyboardInterrupt
        assert store.get_tune(tune_id).status == "failed"
        assert store.get_tune(tune_id).error == "tune: every request failed at concurrency 4"
        assert store.get_tune(interrupted).status == "interrupted"
        with pytest.raises(UserError, match=f"tune {tune_id} is failed and has no result to report: tune: every"):
            load_tune(store, tune_id)
