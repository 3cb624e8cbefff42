"""Run claims: one process runs a run; a live holder refuses a second one, a dead one is taken over."""

import os
import subprocess
import sys

import pytest

from specgauge.store import Store
from specgauge.store.claims import ProcessId, RunBusy, process_alive, process_start_time


def new_run(store: Store) -> int:
    return store.create_run(tool_version="0", host="h", url="http://127.0.0.1:1", api="sglang", model="m",
                            config={}, suite_name="smoke", suite_version=1, suite_hash="ab" * 32)


def finished_process() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_live_holder_refuses_and_a_gone_one_is_taken_over(tmp_path):
    with Store.open(tmp_path / "r.db") as store:
        run_id = new_run(store)
        parent = ProcessId(os.getppid(), ProcessId.current().host, process_start_time(os.getppid()))
        store.claim_run(run_id, parent)                         # a live process holds it
        with pytest.raises(RunBusy, match=f"run {run_id} is being run by another specgauge .pid {parent.pid}"):
            store.claim_run(run_id)
        store.release_run(run_id, parent)
        gone = ProcessId(finished_process(), parent.host, "1")
        store.claim_run(run_id, gone)                           # a holder that was killed since
        store.claim_run(run_id)                                 # taken over
        store.claim_run(run_id)                                 # claiming again is a no-op
        store.release_run(run_id)
        store.claim_run(run_id, parent)                         # released: free for anyone


def test_a_reused_pid_is_not_the_holder():
    me = ProcessId.current()
    assert process_alive(me)
    if me.started is not None:                                  # Linux: the start time tells them apart
        assert not process_alive(ProcessId(me.pid, me.host, str(int(me.started) - 1)))
    assert process_alive(ProcessId(1, "another-host", None))    # cannot look: taken as live
