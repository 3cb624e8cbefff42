"""Finding one's way: comparison ids in show and runs, the resume hint, clocks, phase labels."""

import io
import json
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from specgauge.compare.orchestrate import StageProgress
from specgauge.report.progress import NullProgress
from specgauge.report.terminal import RichProgress, resume_command
from specgauge.store import Store
from cli_testkit import run_cli

FIXTURE = Path(__file__).parents[1] / "compare" / "fixtures" / "compare_result.json"


def stored_comparison(db, schedule=None) -> int:
    """The fixture comparison in ``db``; with ``schedule``, its recommendation carries that schedule."""
    result = json.loads(FIXTURE.read_text())
    if schedule is not None:
        result["recommendation"]["schedule"] = schedule
    with Store.open(db) as store:
        comparison_id = store.create_comparison({"baseline": {"kind": "url", "value": "http://127.0.0.1:1"},
                                                 "speculative": {"kind": "url", "value": "http://127.0.0.1:2"}})
        store.finish_comparison(comparison_id, status="done", result=result)
    return comparison_id


def test_show_takes_a_comparison_id_and_runs_lists_comparisons(tmp_path):
    db = str(tmp_path / "n.db")
    comparison_id = stored_comparison(db)
    shown = run_cli("show", f"c{comparison_id}", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "single stream, per domain" in shown.stdout and "recommendation:" in shown.stdout
    listed = run_cli("runs", "--db", db)
    assert listed.returncode == 0, listed.stderr
    assert f"c{comparison_id}" in listed.stdout and "http://127.0.0.1:2" in listed.stdout
    bad = run_cli("show", "x1", "--db", db)
    assert bad.returncode == 2 and "comparison id (e.g. c3)" in bad.stderr


def test_runs_lists_a_comparisons_schedule_beside_its_threshold(tmp_path):
    db = str(tmp_path / "n.db")
    threshold = json.loads(FIXTURE.read_text())["recommendation"]["disable_above"]
    plain = stored_comparison(db)   # a recommendation stored before schedules: the threshold alone
    scheduled = stored_comparison(db, schedule=[[1, threshold, 3], [threshold + 1, 256, 0]])
    listed = run_cli("runs", "--db", db)
    assert listed.returncode == 0, listed.stderr
    rows = {cid: next(line for line in listed.stdout.splitlines() if f" c{cid} " in line) for cid in (plain, scheduled)}
    assert f"disable above {threshold}" in rows[plain] and "schedule" not in rows[plain]
    assert f"disable above {threshold} · schedule [[1,{threshold},3],[{threshold + 1},256,0]]" in rows[scheduled]


def test_the_resume_hint_names_a_store_that_is_not_the_default():
    assert resume_command(4, "specgauge.db") == "specgauge bench --resume 4"
    assert resume_command(4, "/data/my runs.db") == "specgauge bench --resume 4 --db '/data/my runs.db'"
    console = Console(file=io.StringIO(), width=200)
    progress = RichProgress(console, db="/tmp/other.db")
    progress.run_started(4, 1, resumed=False)
    progress.run_finished(4, "interrupted")
    assert "specgauge bench --resume 4 --db /tmp/other.db" in console.file.getvalue()


def test_a_points_clock_stops_when_the_point_ends():
    progress = RichProgress(Console(file=io.StringIO(), width=200))
    progress.run_started(1, 1, resumed=False)
    progress.point_started(0, "c=1", 2, 0)
    task = progress._progress.tasks[0]
    progress.point_finished(0, SimpleNamespace(output_tokens_per_s=10.0, flagged=False, flag_reason=None,
                                               num_errors=0))
    frozen = task.elapsed
    assert task.stop_time is not None and task.elapsed == frozen
    progress.run_finished(1, "done")


def test_the_verify_phase_is_labelled_in_the_progress():
    class Labels(NullProgress):
        def __init__(self):
            self.labels = []

        def point_started(self, point_index, label, total, already_done):
            self.labels.append(label)

    inner = Labels()
    StageProgress(inner, "speculative", "sweep:c=4", "verify").point_started(0, "c=4", 8, 0)
    StageProgress(inner, "baseline", "sweep:c=4").point_started(0, "c=4", 8, 0)
    assert inner.labels == ["verify spec sweep c=4", "base sweep c=4"]
