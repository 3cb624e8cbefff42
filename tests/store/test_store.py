"""The SQLite results store: round trips of every field, resume bookkeeping, bad files."""

import dataclasses
import sqlite3
from contextlib import closing

import pytest

from specgauge.client.records import ErrorClass, RequestRecord, TokenCountSource
from specgauge.errors import UserError
from specgauge.store import SCHEMA_VERSION, Store
from specgauge.store import codec
from specgauge.store.sqlite_store import STORED_RECORD_FIELDS


def full_record(index: int = 3) -> RequestRecord:
    """A record with every field set to a value other than its default."""
    t0 = 987_654_321_000_000
    return RequestRecord(
        request_index=index, prompt_index=7, domain="coding", api="sglang",
        scheduled_ns=t0 - 1_500, t_send_ns=t0, t_headers_ns=t0 + 2_000_000, t_end_ns=t0 + 90_000_000,
        chunk_times_ns=[t0 + 10_000_000, t0 + 10_000_001, t0 + 55_123_456, t0 + 89_999_999],
        chunk_tokens=[1, 3, 4, 2], token_count_source=TokenCountSource.TOKENIZER,
        prompt_tokens=42, output_tokens=10, output_text="déjà vu ✓ \n\"quoted\"",
        finish_reason="length", spec_verify_ct=4, spec_accept_length=2.5, spec_accept_rate=0.75,
        spec_correct_drafts=6, spec_proposed_drafts=8, spec_accept_histogram=[0, 1, 2, 1],
        status_code=500, error_class=ErrorClass.STREAM_CUT, error_message="cut after 4 chunks",
        server_request_id="req-abc",
    )


def new_run(store: Store) -> int:
    return store.create_run(tool_version="0.1.0", host="testhost", url="http://127.0.0.1:1", api="sglang",
                            model="m", config={"concurrency": [1, 8], "seed": 0}, suite_name="smoke",
                            suite_version=1, suite_hash="ab" * 32, server_fingerprint={"data": [{"id": "m"}]},
                            server_info={"version": "x"}, response_headers={"server": "scripted"})


def test_every_record_field_is_stored():
    names = {f.name for f in dataclasses.fields(RequestRecord)}
    assert names == STORED_RECORD_FIELDS, names ^ STORED_RECORD_FIELDS


def test_request_round_trip_of_every_field(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run_id = new_run(store)
        (point_id,) = store.add_points(run_id, [{"mode": "closed", "concurrency": 1}])
        original = full_record()
        store.add_request(point_id, original)
        minimal = RequestRecord(request_index=4, prompt_index=0)  # every optional field at its default
        store.add_request(point_id, minimal)
    with Store.open(tmp_path / "r.db", create=False) as store:
        back = store.get_requests(point_id)
    assert [dataclasses.asdict(r) for r in back] == [dataclasses.asdict(original), dataclasses.asdict(minimal)]


def test_run_and_point_round_trip(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run_id = new_run(store)
        ids = store.add_points(run_id, [{"mode": "closed", "concurrency": c} for c in (1, 8)])
        store.start_point(ids[0])
        store.finish_point(ids[0], windows=[[10, 20]], aggregates={"num_ok": 3},
                           server_spec_before={"accepted": 1}, server_spec_after={"accepted": 9})
        store.set_run_status(run_id, "done")
        run = store.get_run(run_id)
        points = store.get_points(run_id)
    assert run.status == "done" and run.finished_at and run.config == {"concurrency": [1, 8], "seed": 0}
    assert (run.suite_name, run.suite_version, run.server_info) == ("smoke", 1, {"version": "x"})
    assert run.server_fingerprint == {"data": [{"id": "m"}]} and run.response_headers == {"server": "scripted"}
    assert [p.status for p in points] == ["done", "pending"]
    assert points[0].windows == [[10, 20]] and points[0].aggregates == {"num_ok": 3}
    assert points[0].server_spec_after == {"accepted": 9} and points[1].spec == {"mode": "closed", "concurrency": 8}


def test_rows_are_committed_as_they_are_written(tmp_path):
    # A second connection (another process, in effect) sees each row without any close/flush.
    with Store.open(tmp_path / "r.db") as store:
        run_id = new_run(store)
        (point_id,) = store.add_points(run_id, [{}])
        store.add_request(point_id, full_record(0))
        other = sqlite3.connect(tmp_path / "r.db")
        assert other.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1
        store.add_request(point_id, full_record(1))
        assert other.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 2
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        other.close()


def test_resume_bookkeeping(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        (point_id,) = store.add_points(new_run(store), [{}])
        for i in (0, 2, 5):
            store.add_request(point_id, full_record(i))
        assert store.measured_indices(point_id) == frozenset({0, 2, 5})
        assert store.next_segment(point_id) == 1
        store.add_request(point_id, full_record(1), segment=1)
        assert sorted(store.request_segments(point_id)) == [0, 1]
        with pytest.raises(UserError, match="stored already"):
            store.add_request(point_id, full_record(2), segment=1)
        store.delete_requests(point_id)
        assert store.measured_indices(point_id) == frozenset()


def test_unknown_run_id_is_a_user_error(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        with pytest.raises(UserError, match="no run 42"):
            store.get_run(42)


@pytest.mark.parametrize("content", [b"this is not a database, just text\n" * 20, b"\x00\x01garbage" * 100])
def test_non_sqlite_file_is_refused(tmp_path, content):
    path = tmp_path / "bad.db"
    path.write_bytes(content)
    with pytest.raises(UserError, match="not a specgauge results file"):
        Store.open(path)


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(UserError, match="not a specgauge results store"):
        Store.open(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(UserError, match="newer specgauge"):
        Store.open(path)


def test_missing_file_without_create_and_directory(tmp_path):
    with pytest.raises(UserError, match="no results store"):
        Store.open(tmp_path / "absent.db", create=False)
    with pytest.raises(UserError, match="is a directory"):
        Store.open(tmp_path)


def test_codec_round_trips_and_is_compact():
    base = 5_000_000_000_000
    times = [base + 1_000_000 * i + (i % 7) for i in range(1, 2001)]  # 2000 chunks ~1 ms apart
    blob = codec.encode_times(times, base)
    assert codec.decode_times(blob, base) == times
    assert len(blob) == 1 + 4 * len(times)      # gaps < 2.1 s: 4 bytes each, half of raw int64
    assert codec.decode_times(codec.encode_times([], None), None) == []
    slow = [base + 10_000_000_000, base + 10_000_000_001]   # a 10 s first gap needs 8 bytes
    assert codec.decode_times(codec.encode_times(slow, base), base) == slow
    assert codec.decode_times(codec.encode_times(slow, None), None) == slow


@pytest.mark.parametrize(("values", "width"), [([1, 4, 0, 127], 1), ([-128, 5], 1), ([300, -2], 2),
                                               ([70_000], 4), ([-(2**31)], 4), ([2**31], 8), ([-(2**63)], 8)])
def test_packed_ints_use_the_narrowest_width(values, width):
    blob = codec.pack_ints(values)
    assert blob[0] == width and len(blob) == 1 + width * len(values)
    assert codec.unpack_ints(blob) == values


def test_packed_ints_reject_bad_input():
    with pytest.raises(OverflowError):
        codec.pack_ints([2**63])
    with pytest.raises(ValueError, match="width byte 3"):
        codec.unpack_ints(b"\x03abc")


def test_close_folds_the_write_ahead_log_into_the_file(tmp_path):
    path = tmp_path / "r.db"
    with Store.open(path) as store:
        (point_id,) = store.add_points(new_run(store), [{}])
        for i in range(50):
            store.add_request(point_id, full_record(i))
        wal = tmp_path / "r.db-wal"
        assert wal.exists() and wal.stat().st_size > 0       # no automatic checkpoint mid-point
    assert not wal.exists() or wal.stat().st_size == 0
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 50


def test_a_failing_write_is_one_user_error(tmp_path):
    path = tmp_path / "r.db"
    with Store.open(path) as store:
        (point_id,) = store.add_points(new_run(store), [{}])
        store._db.execute("PRAGMA query_only = ON")   # every write now fails inside SQLite
        with pytest.raises(UserError, match="cannot write to the results store"):
            store.add_request(point_id, full_record(0))
        store._db.execute("PRAGMA query_only = OFF")


def test_a_full_file_fails_the_commit_keeps_what_was_committed_and_closes_cleanly(tmp_path):
    from specgauge.store import StoreWriteError

    path = tmp_path / "r.db"
    store = Store.open(path)
    (point_id,) = store.add_points(new_run(store), [{}])
    store.add_request(point_id, full_record(0))                      # committed
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")           # the file cannot grow: a full disk
    with pytest.raises(StoreWriteError, match="database or disk is full") as failure:
        for index in range(1, 500):
            store.add_request(point_id, full_record(index), commit=False)
            store.commit()
    assert failure.value.exit_code == 4 and not store._db.in_transaction
    store.close()                                                    # no second error on the way out
    with Store.open(path, create=False) as reopened:
        assert 0 in reopened.measured_indices(point_id)
