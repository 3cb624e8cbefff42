"""``--workers N`` on this machine (multiprocessing) against the scripted server on loopback."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading

import pytest

from specgauge.load.bench import RunStopped, resume_benchmark, run_benchmark
from specgauge.load.bench_config import BenchConfig
from specgauge.load.runner import run_async
from specgauge.load.workers.local import PipeReader
from specgauge.load.workers.protocol import WorkerLost
from specgauge.load.workers.split import Placement
from specgauge.report.progress import NullProgress
from specgauge.store import Store
from specgauge.testing.scripted_server import Script, ScriptedServer


async def test_split_points_store_the_one_process_plan_with_true_latencies(tmp_path, plan_and_truth):
    script = Script(ttft_s=0.03, chunk_delay_s=0.005, num_chunks=4, tokens_per_chunk=2)
    with ScriptedServer(script) as srv:
        config = BenchConfig(url=srv.url, api="openai-chat", concurrency=(4,), rates=(80.0,), num_requests=24,
                             warmup=3, seed=9)
        with Store.open(tmp_path / "r.db") as store:
            summary = await run_benchmark(config, store, placement=Placement(workers=2))
            assert summary.status == "done"
            assert plan_and_truth(store, summary.run_id, config, srv.truth) == 48
            assert len(srv.truth) == 48 + 2 * 3          # each point's warm-up went out once, not per worker
    for point in summary.points:
        workers = point.aggregate.workers
        assert [w["worker"] for w in workers] == [0, 1] and sum(w["requests"] for w in workers) == 24
        assert all(w["clock_offset_ms"] == 0 and w["start_offset_ms"] >= 0 for w in workers)
        assert all(w["loop_lag_p99_ms"] is not None and w["send_lag_p50_ms"] is not None for w in workers)
        assert point.aggregate.num_ok == 24 and point.aggregate.window_s >= max(w["window_s"] for w in workers)


class KillAWorker(NullProgress):
    """Kills one worker process with SIGKILL once ``after`` records of the point were stored."""

    def __init__(self, after: int) -> None:
        self.after, self.seen, self.killed = after, 0, None

    def request_finished(self, record) -> None:
        self.seen += 1
        if self.seen == self.after and self.killed is None:
            victim = max(multiprocessing.active_children(), key=lambda p: p.pid)
            os.kill(victim.pid, signal.SIGKILL)
            self.killed = victim.pid


async def test_a_killed_worker_leaves_its_records_and_resume_sends_the_rest(tmp_path, plan_and_truth):
    script = Script(ttft_s=0.01, chunk_delay_s=0.02, num_chunks=5)
    with ScriptedServer(script) as srv:
        config = BenchConfig(url=srv.url, api="openai-chat", concurrency=(4,), num_requests=40, seed=1)
        progress = KillAWorker(after=6)
        with Store.open(tmp_path / "r.db") as store:
            with pytest.raises(RunStopped) as stopped:
                await run_benchmark(config, store, progress, placement=Placement(workers=2))
            assert isinstance(stopped.value.cause, WorkerLost) and stopped.value.exit_code == 5
            message = str(stopped.value.with_resume("specgauge bench --resume 1"))
            assert f"pid {progress.killed}" in message and "killed by signal 9" in message
            assert "at point c=4:" in message and "--resume 1" in message
            run_id = stopped.value.run_id
            (point,) = store.get_points(run_id)
            stored = store.measured_indices(point.id)
            assert 6 <= len(stored) < 40 and store.get_run(run_id).status == "failed"
            summary = await resume_benchmark(run_id, store, placement=Placement(workers=2))
            assert summary.status == "done"
            assert plan_and_truth(store, run_id, config, srv.truth) == 40     # each index once, none lost
    assert not multiprocessing.active_children()


class StopTheServer(NullProgress):
    """Stops the scripted server (from a thread: it joins its own) once ``after`` records were stored."""

    def __init__(self, server: ScriptedServer, after: int) -> None:
        self.server, self.after, self.seen, self.stopper = server, after, 0, None

    def request_finished(self, record) -> None:
        self.seen += 1
        if self.seen == self.after:
            self.stopper = threading.Thread(target=self.server.__exit__, args=(None, None, None))
            self.stopper.start()


async def test_the_server_going_away_stops_a_split_point_like_one_process(tmp_path):
    server = ScriptedServer(Script(ttft_s=0.01, chunk_delay_s=0.02, num_chunks=4)).__enter__()
    config = BenchConfig(url=server.url, api="openai-chat", concurrency=(4,), num_requests=200)
    progress = StopTheServer(server, after=4)
    with Store.open(tmp_path / "r.db") as store:
        with pytest.raises(RunStopped) as stopped:
            await run_benchmark(config, store, progress, placement=Placement(workers=2))
        progress.stopper.join()
        (point,) = store.get_points(stopped.value.run_id)
        stored = store.get_requests(point.id)
    assert stopped.value.exit_code == 3 and "stopped answering" in str(stopped.value)
    assert "(on worker " in str(stopped.value)                       # which worker saw it
    assert 4 <= len(stored) < 200 and all(r.ok for r in stored)      # the outage's failures are not stored
    assert not multiprocessing.active_children()



def test_a_message_larger_than_the_pipe_buffer_arrives_whole_and_the_pipe_stays_blocking():
    # Reading a pipe through the event loop (add_reader) let uvloop make it non-blocking: a batch
    # larger than the pipe's 64 KiB then failed half-read or half-written, and the worker was lost.
    ours, theirs = multiprocessing.Pipe()
    big = [f"record {i} " * 40 for i in range(5000)]   # ~2 MB pickled

    async def receive_one():
        reader = PipeReader(ours)
        threading.Thread(target=theirs.send, args=(big,), daemon=True).start()
        got = await reader.receive()
        theirs.close()
        with pytest.raises(EOFError):
            await reader.receive()
        return got

    assert run_async(receive_one()) == big            # uvloop, as in the CLI and in every worker
    assert os.get_blocking(ours.fileno())
    ours.close()
