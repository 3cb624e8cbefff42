"""Schema 1 → 2: a store written before comparisons existed opens, keeps its runs, gains the tables."""

import sqlite3

from specgauge.store import SCHEMA_VERSION, Store
from specgauge.store.schema import DDL


def test_version_1_store_is_migrated_in_place(tmp_path):
    path = tmp_path / "old.db"
    connection = sqlite3.connect(path)
    connection.executescript(DDL)
    connection.execute("INSERT INTO schema_version (version) VALUES (1)")
    connection.execute("INSERT INTO runs (status, started_at, tool_version, host, url, api, config_json, suite_name,"
                       " suite_version, suite_hash) VALUES ('done', '2026-01-01T00:00:00+00:00', '0.1.0', 'h',"
                       " 'http://x', 'sglang', '{}', 'smoke', 1, 'ab')")
    connection.commit()
    connection.close()

    with Store.open(path) as store:
        assert store.get_run(1).suite_name == "smoke"
        store.set_baseline("old", 1)
        comparison = store.create_comparison({"note": "after migration"})
        store.link_comparison_run(comparison, 1, arm="baseline", stage="sweep", round=0)
        assert store.get_baseline("old").run_id == 1
        assert store.comparison_of_run(1) == comparison
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def test_new_store_has_the_comparison_tables_at_the_current_version(tmp_path):
    with Store.open(tmp_path / "new.db") as store:
        comparison = store.create_comparison({"arms": 2})
        store.finish_comparison(comparison, status="done", result={"verdict_lines": ["x"]})
        row = store.get_comparison(comparison)
        assert (row.status, row.plan, row.result) == ("done", {"arms": 2}, {"verdict_lines": ["x"]})
        assert [c.id for c in store.list_comparisons()] == [comparison]


def test_version_3_store_gains_the_tune_tables_and_keeps_its_comparisons(tmp_path):
    from specgauge.store.schema import DDL_V2, DDL_V3

    path = tmp_path / "v3.db"
    connection = sqlite3.connect(path)
    connection.executescript(DDL + DDL_V2 + DDL_V3)
    connection.execute("INSERT INTO schema_version (version) VALUES (3)")
    connection.execute("INSERT INTO runs (status, started_at, tool_version, host, url, api, config_json, suite_name,"
                       " suite_version, suite_hash) VALUES ('done', '2026-01-01T00:00:00+00:00', '0.1.0', 'h',"
                       " 'http://x', 'sglang', '{}', 'smoke', 1, 'ab')")
    connection.execute("INSERT INTO comparisons (status, started_at, plan_json) VALUES ('done', 'then', '{}')")
    connection.commit()
    connection.close()

    with Store.open(path) as store:
        assert [c.id for c in store.list_comparisons()] == [1]
        assert store.list_tunes() == []
        tune = store.create_tune({"concurrency": [1, 4]})
        store.link_tune_run(tune, 1, stage="measure", arm="k=0", concurrency=1, round=0)
        store.finish_tune(tune, status="done", result={"schedule": {"entries": [[1, 256, 0]]}})
        assert store.tune_of_run(1) == tune
        assert [(r.run_id, r.arm, r.concurrency) for r in store.tune_runs(tune)] == [(1, "k=0", 1)]
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        assert SCHEMA_VERSION == 5


def test_version_4_store_gains_the_turn_columns_and_keeps_its_requests(tmp_path):
    from specgauge.client.records import RequestRecord
    from specgauge.store.schema import DDL_V2, DDL_V3, DDL_V4

    path = tmp_path / "v4.db"
    connection = sqlite3.connect(path)
    connection.executescript(DDL + DDL_V2 + DDL_V3 + DDL_V4)
    connection.execute("INSERT INTO schema_version (version) VALUES (4)")
    connection.commit()
    connection.close()
    with Store.open(path) as store:
        run = store.create_run(tool_version="0", host="h", url="http://x", api="openai-chat", model=None,
                               config={}, suite_name="s", suite_version=1, suite_hash="ab")
        point = store.add_points(run, [{"mode": "closed"}])[0]
        store.add_request(point, RequestRecord(request_index=2001, prompt_index=3, session_index=2, turn_index=1,
                                               cached_tokens=40, prompt_tokens=64))
        (record,) = store.get_requests(point)
        assert (record.session_index, record.turn_index, record.cached_tokens) == (2, 1, 40)
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT version FROM schema_version").fetchall() == [(5,)]


def test_a_tune_row_round_trips_and_an_unknown_tune_is_one_line(tmp_path):
    import pytest

    from specgauge.errors import UserError

    with Store.open(tmp_path / "new.db") as store:
        tune = store.create_tune({"depths": [0, 3]})
        assert store.get_tune(tune).status == "running" and store.get_tune(tune).result is None
        store.finish_tune(tune, status="failed", error="every request failed")
        row = store.get_tune(tune)
        assert (row.status, row.plan, row.error) == ("failed", {"depths": [0, 3]}, "every request failed")
        assert row.finished_at is not None
        with pytest.raises(UserError, match="no tune 99 in"):
            store.get_tune(99)
