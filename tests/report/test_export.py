"""Exports (JSON contract, CSV of points and of requests) and the summary table, from a store
filled with hand-made records whose figures are known."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

from specgauge.analysis.aggregate import Window, aggregate_point
from specgauge.client.records import ErrorClass, RequestRecord, TokenCountSource
from specgauge.report.export import run_document, to_csv
from specgauge.report.terminal import run_table, runs_table
from specgauge.store import Store
from cli_testkit import run_cli as cli

MS = 1_000_000


def _record(index: int, *, fail: bool = False) -> RequestRecord:
    send = index * 100 * MS
    record = RequestRecord(request_index=index, prompt_index=index % 3, domain="coding", api="openai-chat",
                           t_send_ns=send, t_headers_ns=send + 5 * MS, t_end_ns=send + 50 * MS,
                           chunk_times_ns=[send + 10 * MS, send + 20 * MS, send + 40 * MS],
                           chunk_tokens=[1, 1, 2], output_tokens=4, token_count_source=TokenCountSource.SERVER,
                           finish_reason="length", status_code=200)
    if fail:
        record.chunk_times_ns, record.chunk_tokens, record.output_tokens = [], [], None
        record.error_class, record.error_message, record.status_code = ErrorClass.HTTP_5XX, "boom", 503
    return record


@pytest.fixture
def filled_db(tmp_path):
    """Run 1: point c=1 with 4 good requests; point c=8 with 3 good and 1 failed (flagged)."""
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        run_id = store.create_run(tool_version="0.1.0", host="h", url="http://127.0.0.1:1", api="openai-chat",
                                  model="m", config={"concurrency": [1, 8]}, suite_name="smoke", suite_version=1,
                                  suite_hash="0" * 64)
        ids = store.add_points(run_id, [{"mode": "closed", "concurrency": c, "num_requests": 4} for c in (1, 8)])
        for point_id, failures in zip(ids, (set(), {3})):
            records = [_record(i, fail=i in failures) for i in range(4)]
            for record in records:
                store.add_request(point_id, record)
            aggregate = aggregate_point(records, [Window(0, 400 * MS)])
            store.finish_point(point_id, windows=[[0, 400 * MS]], aggregates=aggregate.to_dict())
        store.set_run_status(run_id, "done")
    return db


def test_export_json_is_the_bench_contract(filled_db):
    result = cli("export", "1", "--format", "json", "--db", str(filled_db))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["run_id"] == 1 and [p["concurrency"] for p in doc["points"]] == [1, 8]
    first, second = doc["points"]
    # 4 requests x 4 tokens over a 0.4 s window = 40 tok/s; TTFT 10 ms each; E2E 50 ms each.
    assert first["output_tokens_per_s"] == pytest.approx(40.0)
    assert first["ttft_ms"] == {"mean": 10.0, "p50": 10.0, "p90": 10.0, "p99": 10.0, "count": 4}
    assert first["e2e_ms"]["p99"] == pytest.approx(50.0)
    assert (second["num_ok"], second["num_errors"], second["flagged"]) == (3, 1, True)
    assert second["flag_reason"] == "error rate 25% > 5%" and second["output_tokens_per_s"] == pytest.approx(30.0)


def test_export_points_csv(filled_db, tmp_path):
    out = tmp_path / "points.csv"
    result = cli("export", "1", "--format", "csv", "--output", str(out), "--db", str(filled_db))
    assert result.returncode == 0 and result.stdout == ""
    rows = list(csv.DictReader(out.open()))
    assert [r["concurrency"] for r in rows] == ["1", "8"]
    assert float(rows[0]["output_tokens_per_s"]) == pytest.approx(40.0)
    assert float(rows[0]["ttft_ms_p50"]) == pytest.approx(10.0)
    assert json.loads(rows[1]["errors_by_class"]) == {"http_5xx": 1} and rows[1]["flagged"] == "True"


def test_export_requests_csv_and_json(filled_db):
    rows = list(csv.DictReader(io.StringIO(cli("export", "1", "--format", "csv", "--requests",
                                               "--db", str(filled_db)).stdout)))
    assert len(rows) == 8
    failed = [r for r in rows if r["ok"] == "False"]
    assert len(failed) == 1 and failed[0]["error_class"] == "http_5xx" and failed[0]["status_code"] == "503"
    good = rows[0]
    assert float(good["ttft_ms"]) == pytest.approx(10.0) and float(good["tpot_ms"]) == pytest.approx(10.0)
    assert json.loads(good["chunk_offsets_ms"]) == [10.0, 20.0, 40.0] and json.loads(good["chunk_tokens"]) == [1, 1, 2]

    doc = json.loads(cli("export", "1", "--requests", "--db", str(filled_db)).stdout)
    assert doc["run_id"] == 1 and len(doc["requests"]) == 8
    assert doc["requests"][0]["headers_ms"] == pytest.approx(5.0)


def test_export_unknown_run_and_unwritable_output(filled_db, tmp_path):
    result = cli("export", "7", "--db", str(filled_db))
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0 and "no run 7" in result.stderr
    result = cli("export", "1", "--output", str(tmp_path / "no" / "such" / "dir.json"), "--db", str(filled_db))
    assert result.returncode == 2 and "cannot write" in result.stderr and "Traceback" not in result.stderr


def test_show_and_runs_print_tables(filled_db):
    shown = cli("show", "1", "--db", str(filled_db))
    assert shown.returncode == 0 and "c=8" in shown.stdout and "error rate 25% > 5%" in shown.stdout
    listed = cli("runs", "--db", str(filled_db))
    assert listed.returncode == 0 and "smoke@1" in listed.stdout and "c=1,c=8" in listed.stdout
    row = next(line for line in listed.stdout.splitlines() if "smoke@1" in line)
    assert "2/2" in row and row.rstrip("│ ").endswith("1")   # both points done, one flagged


def test_summary_table_marks_flagged_points_in_red(filled_db):
    with Store.open(filled_db, create=False) as store:
        table = run_table(store.get_run(1), store.get_points(1))
        listing = runs_table([(run, store.get_points(run.id)) for run in store.list_runs()])
    console = Console(record=True, width=200, color_system="truecolor")
    console.print(table)
    console.print(listing)
    text = console.export_text(clear=False)
    html = console.export_html(inline_styles=True)
    assert "error rate 25% > 5%" in text and "40.0" in text    # c=1 row: 40 tok/s
    assert "token counts: server" in text
    assert "color: #800000" in html and "error rate 25% &gt; 5%" in html  # red reason


def test_to_csv_of_nothing_is_empty():
    assert to_csv([]) == ""


def test_an_unfinished_point_exports_with_null_figures(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run_id = store.create_run(tool_version="0.1.0", host="h", url="http://127.0.0.1:1", api="sglang", model=None,
                                  config={}, suite_name="smoke", suite_version=1, suite_hash="0" * 64)
        store.add_points(run_id, [{"mode": "open", "rate": 2.0, "num_requests": 8}])
        doc = run_document(store.get_run(run_id), store.get_points(run_id))
    (point,) = doc["points"]
    assert (point["status"], point["mode"], point["rate"], point["concurrency"]) == ("pending", "open", 2.0, None)
    assert point["num_ok"] is None and point["accept_length"] is None
    assert point["ttft_ms"] == {"mean": None, "p50": None, "p90": None, "p99": None, "count": None}
