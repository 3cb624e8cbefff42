"""TurnWriter: every record inserted at once, one commit per event-loop turn, failures surfaced."""

import asyncio
import sqlite3
from contextlib import closing

import pytest

from specgauge.client.records import RequestRecord
from specgauge.store import Store
from specgauge.store.turn_writer import TurnWriter


def _count(path) -> int:
    with closing(sqlite3.connect(path)) as other:   # another process's view, in effect
        return other.execute("SELECT COUNT(*) FROM requests").fetchone()[0]


@pytest.fixture
def store_and_point(tmp_path):
    store = Store.open(tmp_path / "r.db")
    run_id = store.create_run(tool_version="t", host="h", url="http://127.0.0.1:1", api="sglang", model=None,
                              config={}, suite_name="s", suite_version=1, suite_hash="0" * 64)
    (point_id,) = store.add_points(run_id, [{}])
    yield store, point_id
    store.close()


async def test_records_of_one_turn_are_committed_together_before_the_next_turn(store_and_point):
    store, point_id = store_and_point
    writer = TurnWriter(store, point_id, segment=0)
    commits = []
    original_commit = store.commit
    store.commit = lambda: (commits.append(store._db.in_transaction), original_commit())
    for i in range(3):                      # three requests end in the same turn
        writer(RequestRecord(request_index=i, prompt_index=0))
    assert _count(store.path) == 0          # inserted, not yet visible to anyone else
    await asyncio.sleep(0)                  # the loop turns once: the queued commit runs
    assert _count(store.path) == 3 and commits == [True]
    writer(RequestRecord(request_index=3, prompt_index=0))
    writer.flush()                          # the end of a point commits at once
    assert _count(store.path) == 4


async def test_a_failed_commit_is_raised_by_the_next_call(store_and_point):
    store, point_id = store_and_point
    writer = TurnWriter(store, point_id, segment=0)

    def broken_commit():
        raise OSError("disk full")

    store.commit = broken_commit
    writer(RequestRecord(request_index=0, prompt_index=0))
    await asyncio.sleep(0)
    with pytest.raises(OSError, match="disk full"):
        writer(RequestRecord(request_index=1, prompt_index=0))
    del store.commit                        # the real one again, for the fixture's close
