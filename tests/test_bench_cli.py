"""``specgauge bench`` end to end against the scripted streaming server (real HTTP on loopback):
the JSON contract, error flagging, a SIGKILLed sweep resumed to the same totals, and every
CLI misuse ending in one line with exit code 2."""

from __future__ import annotations

import json
import statistics
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import pytest

from specgauge.load.bench import resumable_by_index, resume_benchmark, run_benchmark
from specgauge.load.plan import PointSpec
from specgauge.load.bench_config import BenchConfig
from specgauge.store import Store
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest, write_suite_jsonl
from specgauge.testing.scripted_server import Script, ScriptedServer, VllmCounters, refused_url
from cli_testkit import run_cli as cli

CONTRACT_STATS = ("ttft_ms", "tpot_ms", "icl_ms", "itl_ms", "e2e_ms")


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def suite_file(tmp_path, prompts: list[str], name: str = "mixed"):
    suite = Suite(name=name, requests=tuple(
        SuiteRequest(messages=(ChatMessage(role="user", content=p),), max_tokens=16) for p in prompts))
    path = tmp_path / f"{name}.jsonl"
    write_suite_jsonl(suite, path)
    return path


@pytest.fixture
def server():
    # 8 chunks of 2 tokens: first after 20 ms, then every 5 ms.
    with ScriptedServer(Script(ttft_s=0.02, chunk_delay_s=0.005, num_chunks=8, tokens_per_chunk=2)) as srv:
        yield srv


# -- the JSON contract -----------------------------------------------------------------------

def test_bench_json_contract_end_to_end(server, tmp_path):
    out, db = tmp_path / "run.json", tmp_path / "r.db"
    result = cli("bench", server.url, "--api", "openai-chat", "--concurrency", "1,4", "--num-requests", "8",
                 "--max-tokens", "16", "--output-json", str(out), "--db", str(db))
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert isinstance(doc["run_id"], int) and doc["status"] == "done" and doc["model"] == "scripted-model"
    assert [p["concurrency"] for p in doc["points"]] == [1, 4]
    streamed = [t for t in server.truth if len(t.chunk_send_ns) == 8]
    slowest_truth_ttft_ms = max(t.ttft_ns for t in streamed) / 1e6
    truth_icl_ms = statistics.mean((t.chunk_send_ns[-1] - t.chunk_send_ns[0]) / 7 for t in streamed) / 1e6
    for point in doc["points"]:
        assert (point["num_ok"], point["num_errors"], point["flagged"]) == (8, 0, False)
        assert point["output_tokens"] == 8 * 16
        assert point["output_tokens_per_s"] > 0 and isinstance(point["output_tokens_per_s"], float)
        for name in CONTRACT_STATS:
            assert set(point[name]) >= {"mean", "p50", "p90", "p99"}
            assert all(isinstance(point[name][k], float) for k in ("mean", "p50", "p90", "p99"))
        assert point["accept_length"] is None            # the server reports no speculation
        # Scripted: first chunk 20 ms after arrival, then 5 ms apart. On a busy machine the server itself
        # falls behind that, so the figures are held against what it did (its own truth, the same clock):
        # a client TTFT is never shorter than the server's (>= 20 ms), and a request's mean chunk gap
        # differs from the server's only by (last chunk's delivery delay - first chunk's) / 7.
        assert 19 <= point["ttft_ms"]["p50"] < slowest_truth_ttft_ms + 100
        assert abs(point["icl_ms"]["mean"] - truth_icl_ms) < 10
        assert point["itl_ms"]["p50"] == pytest.approx(point["icl_ms"]["p50"] / 2, rel=0.35)
    assert doc["points"][1]["achieved_concurrency"] > doc["points"][0]["achieved_concurrency"]
    # Progress went to stderr, the summary table to stdout.
    assert "c=4" in result.stdout and "TTFT p50" in result.stdout


def test_sampled_requests_carry_top_p_top_k_and_repeatable_seeds(tmp_path):
    def bodies(seed: int) -> list[dict]:
        with ScriptedServer(Script(num_chunks=2)) as srv:
            result = cli("bench", srv.url, "--num-requests", "4", "--warmup", "0", "--temperature", "0.7",
                         "--top-p", "0.9", "--top-k", "40", "--seed", str(seed), "--db", str(tmp_path / f"{seed}.db"))
            assert result.returncode == 0, result.stderr
            return srv.requests_seen

    first, again, other = bodies(3), bodies(3), bodies(4)
    assert all((b["temperature"], b["top_p"], b["top_k"]) == (0.7, 0.9, 40) for b in first)
    seeds = sorted(b["seed"] for b in first)
    assert len(set(seeds)) == 4                                  # one seed per request
    assert seeds == sorted(b["seed"] for b in again)             # the same --seed: the same seeds
    assert not set(seeds) & {b["seed"] for b in other}


def test_output_json_to_stdout_keeps_stdout_clean(server, tmp_path):
    result = cli("bench", server.url, "--api", "sglang", "--concurrency", "2", "--num-requests", "4",
                 "--raw-chat-format", "--output-json", "-", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)                      # nothing but the JSON on stdout
    assert doc["points"][0]["num_ok"] == 4 and "TTFT p50" in result.stderr


def test_sglang_accept_length_and_open_loop_point(tmp_path):
    # 24 tokens over 8 verify steps: SGLang's own 24 / 8 = 3.0 counts the prefill-made first token;
    # specgauge's one definition (1 + accepted / verify steps) is (24 - 1) / 8.
    script = Script(num_chunks=8, tokens_per_chunk=3, chunk_delay_s=0.002, sglang_meta={"spec_verify_ct": 8})
    with ScriptedServer(script) as srv:
        result = cli("bench", srv.url, "--api", "sglang", "--rate", "40", "--max-concurrency", "4",
                     "--num-requests", "10", "--raw-chat-format", "--output-json", "-", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 0, result.stderr
    (point,) = json.loads(result.stdout)["points"]
    assert (point["mode"], point["rate"], point["concurrency"], point["max_concurrency"]) == ("open", 40.0, None, 4)
    assert point["num_ok"] == 10
    assert point["accept_length"] == pytest.approx(23 / 8) and point["accept_length_source"] == "per_request"
    assert point["send_lag_ms"]["count"] == 10


def test_failing_requests_are_counted_and_the_point_flagged(server, tmp_path):
    suite = suite_file(tmp_path, ["hello", "explain tcp", "[[fault:http_error]] boom", "write a haiku"])
    result = cli("bench", server.url, "--api", "openai-chat", "--concurrency", "2", "--num-requests", "8",
                 "--suite", str(suite), "--output-json", "-", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 0, result.stderr
    (point,) = json.loads(result.stdout)["points"]
    assert (point["num_ok"], point["num_errors"]) == (6, 2)   # 2 passes over the 4 prompts
    assert point["errors_by_class"] == {"http_5xx": 2}
    assert point["flagged"] and point["flag_reason"] == "error rate 25% > 5%"
    assert point["ttft_ms"]["count"] == 6                     # failures not averaged in
    assert "error rate 25% > 5%" in result.stderr             # the summary table marks it
    assert "errors: http_5xx 2" in result.stderr              # with the error classes and counts


# -- kill and resume ---------------------------------------------------------------------------

def test_vllm_counters_give_the_points_server_side_acceptance(tmp_path):
    # Each request adds 4 drafts, 12 draft tokens, 6 accepted: length 1 + 6/4 = 2.5, rate 6/12.
    counters = VllmCounters(drafts_per_request=4, draft_tokens_per_request=12, accepted_per_request=6)
    with ScriptedServer(Script(num_chunks=4), vllm=counters) as srv:
        result = cli("bench", srv.url, "--api", "openai-completions", "--concurrency", "2", "--num-requests", "6",
                     "--warmup", "2", "--raw-chat-format", "--output-json", "-", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 0, result.stderr
    (point,) = json.loads(result.stdout)["points"]
    assert point["num_ok"] == 6                                    # warm-ups are not measured
    spec = point["server_spec"]
    assert (spec["scope"], spec["source"], spec["num_drafts"]) == ("point", "vllm_metrics", 24.0)  # 6 x 4
    assert spec["accept_length"] == pytest.approx(2.5) and spec["accept_rate"] == pytest.approx(0.5)
    assert point["accept_length"] == pytest.approx(2.5) and point["accept_length_source"] == "server_point"


def test_secrets_are_not_stored_and_resume_asks_for_them(cli_here, server, tmp_path):
    db = tmp_path / "r.db"
    result = cli_here("bench", server.url, "--api", "openai-chat", "--num-requests", "2", "--api-key", "sk-very-secret",
                 "--header", "Authorization: Bearer hdr-secret", "--header", "X-Team: infra", "--db", str(db))
    assert result.returncode == 0, result.stderr
    raw = db.read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("r.db-*"))
    assert b"sk-very-secret" not in raw and b"hdr-secret" not in raw and b"infra" not in raw and b"X-Team" in raw
    with closing(sqlite3.connect(db)) as conn:   # pretend it was killed, so resume has work to do
        conn.execute("UPDATE points SET status = 'running'")
        conn.commit()
    assert_one_line_error(cli_here("bench", "--resume", "1", "--db", str(db)), "Authorization", "--header")
    assert_one_line_error(cli_here("bench", "--resume", "1", "--db", str(db), "--header", "Authorization: Bearer x"),
                          "X-Team", "--header")
    again = cli_here("bench", "--resume", "1", "--db", str(db), "--header", "Authorization: Bearer hdr-secret",
                     "--header", "X-Team: infra")
    assert again.returncode == 0, again.stderr


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(("signum", "exit_code", "inherited_sigint"), [
    (signal.SIGINT, 130, "default"),
    (signal.SIGTERM, 143, "default"),
    # A shell without job control (a script, CI, `cmd &`) starts background commands with SIGINT
    # ignored; Ctrl-C / kill -INT must still stop the run (it used to finish with exit 0).
    (signal.SIGINT, 130, "ignored"),
])
def test_sigint_and_sigterm_mark_the_run_interrupted(tmp_path, signum, exit_code, inherited_sigint):
    db = tmp_path / "r.db"
    with ScriptedServer(Script(ttft_s=0.05, num_chunks=2)) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "specgauge", "bench", srv.url, "--api", "openai-chat",
                                 "--num-requests", "200", "--db", str(db)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_ignore_sigint if inherited_sigint == "ignored" else None)
        try:
            deadline = time.monotonic() + 120        # a safety net only: the condition is the stored rows
            while len(_stored_requests(db)) < 2 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(_stored_requests(db)) >= 2 and proc.poll() is None, "the run never got going"
            proc.send_signal(signum)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert proc.returncode == exit_code and "Traceback" not in stderr, stderr
    assert "finish it with: specgauge bench --resume 1" in stderr
    assert stderr.strip().splitlines()[-1].startswith("specgauge: ")  # one closing line
    assert len(_stored_requests(db)) < 200
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT status FROM runs").fetchone() == ("interrupted",)


# -- the programmatic entry -------------------------------------------------------------------------

class RecordingProgress:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def run_started(self, run_id, num_points, *, resumed):
        self.events.append(("run", run_id, num_points, resumed))

    def point_started(self, point_index, label, total, already_done):
        self.events.append(("point", point_index, label, total, already_done))

    def request_finished(self, record):
        self.events.append(("request", record.request_index))

    def point_finished(self, point_index, aggregate):
        self.events.append(("done", point_index, aggregate.num_ok))

    def run_finished(self, run_id, status):
        self.events.append(("end", run_id, status))


async def test_run_benchmark_programmatic_entry(tmp_path):
    progress = RecordingProgress()
    with ScriptedServer(Script(num_chunks=4, tokens_per_chunk=2)) as srv:
        config = BenchConfig(url=srv.url, api="openai-chat", concurrency=(1, 3), num_requests=5, max_tokens=8)
        with Store.open(tmp_path / "r.db") as store:
            summary = await run_benchmark(config, store, progress)
            stored = [len(store.get_requests(p.id)) for p in store.get_points(summary.run_id)]
    assert summary.status == "done" and not summary.flagged and stored == [5, 5]
    assert [(p.spec["concurrency"], p.aggregate.num_ok, p.aggregate.output_tokens) for p in summary.points] == \
        [(1, 5, 40), (3, 5, 40)]
    kinds = [e[0] for e in progress.events]
    assert kinds == ["run", "point", *["request"] * 5, "done", "point", *["request"] * 5, "done", "end"]
    assert progress.events[1] == ("point", 0, "c=1", 5, 0) and progress.events[-1] == ("end", summary.run_id, "done")


async def test_duration_bounded_point(tmp_path):
    with ScriptedServer(Script(ttft_s=0.01, num_chunks=2)) as srv:
        config = BenchConfig(url=srv.url, api="sglang", concurrency=(2,), duration_s=0.3, raw_chat_format=True)
        with Store.open(tmp_path / "r.db") as store:
            summary = await run_benchmark(config, store)
    (point,) = summary.points
    assert point.spec["num_requests"] is None and point.aggregate.num_ok >= 4
    assert 0.25 <= point.aggregate.window_s < 1.5


async def test_resume_finishes_closed_points_by_index_and_reruns_open_ones(tmp_path):
    with ScriptedServer(Script(num_chunks=3)) as srv:
        config = BenchConfig(url=srv.url, api="openai-chat", concurrency=(2,), rates=(50.0,), num_requests=6)
        with Store.open(tmp_path / "r.db") as store:
            run_id = (await run_benchmark(config, store)).run_id
            points = store.get_points(run_id)
            with closing(sqlite3.connect(tmp_path / "r.db")) as conn:  # as if killed after 3 of each
                conn.execute("DELETE FROM requests WHERE request_index >= 3")
                conn.execute("UPDATE points SET status = 'running'")
                conn.execute("UPDATE runs SET status = 'running'")
                conn.commit()
            summary = await resume_benchmark(run_id, store)
            closed, opened = (store.request_segments(p.id) for p in points)
    assert summary.status == "done" and [p.aggregate.num_ok for p in summary.points] == [6, 6]
    assert {seg: [r.request_index for r in rows] for seg, rows in closed.items()} == {0: [0, 1, 2], 1: [3, 4, 5]}
    assert {seg: len(rows) for seg, rows in opened.items()} == {0: 6}   # rerun whole, one segment
    assert summary.points[0].aggregate.segments == 2 and summary.points[1].aggregate.segments == 1


def _error_rows(db) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT error_class, error_message FROM requests WHERE error_class IS NOT NULL").fetchall()


def _stored_requests(db) -> list[tuple[int, int, int]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT p.point_index, r.request_index, r.prompt_index FROM requests r"
                            " JOIN points p ON p.id = r.point_id ORDER BY 1, 2").fetchall()
    except sqlite3.OperationalError:  # the store is not created yet
        return []
    finally:
        conn.close()


def test_killed_sweep_resumes_to_the_same_totals(tmp_path):
    script = Script(ttft_s=0.02, chunk_delay_s=0.008, num_chunks=6, tokens_per_chunk=2)  # ~60 ms a request
    args = ["--api", "openai-chat", "--concurrency", "1,2", "--num-requests", "12", "--seed", "7"]
    with ScriptedServer(script) as srv:
        # Reference: the same sweep, never interrupted.
        reference = cli("bench", srv.url, *args, "--output-json", "-", "--db", str(tmp_path / "ref.db"))
        assert reference.returncode == 0, reference.stderr
        expected = json.loads(reference.stdout)

        db = tmp_path / "killed.db"
        proc = subprocess.Popen([sys.executable, "-m", "specgauge", "bench", srv.url, *args, "--db", str(db)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while len(_stored_requests(db)) < 15 and time.monotonic() < deadline:  # into point 2
                time.sleep(0.01)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(10)
        stored = _stored_requests(db)
        assert 15 <= len(stored) < 24, "the kill should land inside the second point"
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT status FROM runs").fetchall() == [("running",)]
            statuses = conn.execute("SELECT status FROM points ORDER BY point_index").fetchall()
            assert statuses == [("done",), ("running",)]

        resumed = cli("bench", "--resume", "1", "--db", str(db), "--output-json", "-")
        assert resumed.returncode == 0, resumed.stderr

    doc = json.loads(resumed.stdout)
    after = _stored_requests(db)
    assert len(after) == 24 and len(set((p, r) for p, r, _ in after)) == 24       # no duplicates
    assert set(stored) <= set(after)                                                # nothing lost
    assert after == _stored_requests(tmp_path / "ref.db")     # same indices, same prompt order
    assert doc["status"] == "done"
    for got, want in zip(doc["points"], expected["points"]):
        assert (got["num_ok"], got["num_errors"], got["output_tokens"]) == (want["num_ok"], 0, want["output_tokens"])
    assert doc["points"][0]["segments"] == 1 and doc["points"][1]["segments"] == 2


def test_a_server_killed_mid_run_fails_the_run_and_resume_finishes_it(tmp_path):
    db = tmp_path / "r.db"
    script = Script(ttft_s=0.01, chunk_delay_s=0.002, num_chunks=4, tokens_per_chunk=2)
    server = ScriptedServer(script).__enter__()
    port, stopped = server.port, False
    proc = subprocess.Popen([sys.executable, "-m", "specgauge", "bench", server.url, "--api", "openai-chat",
                             "--concurrency", "4", "--num-requests", "300", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120        # a safety net only: the condition is the requests served
        while len(_stored_requests(db)) < 20 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before the server was stopped"
        server.__exit__(None, None, None)        # the server dies with requests in flight
        stopped = True
        _, stderr = proc.communicate(timeout=120)
    finally:
        if not stopped:
            server.__exit__(None, None, None)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 3 and "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("specgauge: error: run 1 stopped: the server at http://127.0.0.1:") and \
        "stopped answering (connection refused" in last and "at point c=4:" in last, last
    assert last.endswith(f"when the server answers again, finish it with: specgauge bench --resume 1 --db {db}")
    stored = _stored_requests(db)
    with closing(sqlite3.connect(db)) as conn:
        status, error = conn.execute("SELECT status, error FROM runs").fetchone()
        errors = conn.execute("SELECT COUNT(*) FROM requests WHERE error_class IS NOT NULL").fetchone()[0]
    assert status == "failed" and "stopped answering" in error and "\n" not in error
    assert errors == 0, _error_rows(db)             # nothing of the outage was written as an error
    assert 20 <= len(stored) < 300 and f"{len(stored)} of 300 requests stored" in last

    with ScriptedServer(script, port=port):        # the server is back on the same address
        resumed = cli("bench", "--resume", "1", "--db", str(db), "--output-json", "-")
    assert resumed.returncode == 0, resumed.stderr
    (point,) = json.loads(resumed.stdout)["points"]
    after = _stored_requests(db)
    assert len(after) == 300 and len({r for _, r, _ in after}) == 300 and set(stored) <= set(after)
    assert (point["num_ok"], point["num_errors"], point["segments"]) == (300, 0, 2)


def test_a_full_disk_stops_the_run_with_one_line_and_resume_finishes_it(cli_here, server, tmp_path, monkeypatch):
    # A real SQLite file whose size is capped (max_page_count) once 10 requests are stored: the
    # next INSERT that needs a page fails with SQLITE_FULL, as on a full disk.
    db = tmp_path / "r.db"
    add_request = Store.add_request

    def filling_up(store, point_id, record, **kwargs):
        if store._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 10:
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(f"PRAGMA max_page_count = {pages}")
        return add_request(store, point_id, record, **kwargs)

    monkeypatch.setattr(Store, "add_request", filling_up)
    full = cli_here("bench", server.url, "--api", "openai-chat", "--concurrency", "2", "--num-requests", "300",
                    "--db", str(db))
    monkeypatch.undo()
    assert full.returncode == 4 and "Traceback" not in full.stderr, full.stderr
    last = full.stderr.strip().splitlines()[-1]
    assert last.startswith("specgauge: error: run 1 stopped: cannot write to the results store") and \
        "database or disk is full" in last and last.endswith(f"specgauge bench --resume 1 --db {db}"), last
    kept = _stored_requests(db)
    assert 10 <= len(kept) < 300                      # what was committed before stays

    resumed = cli_here("bench", "--resume", "1", "--db", str(db), "--output-json", "-")
    assert resumed.returncode == 0, resumed.stderr
    (point,) = json.loads(resumed.stdout)["points"]
    after = _stored_requests(db)
    assert len(after) == 300 and set(kept) <= set(after) and point["num_ok"] == 300


def test_a_second_resume_of_the_same_run_refuses_before_sending(tmp_path):
    db = tmp_path / "r.db"
    script = Script(ttft_s=0.01, num_chunks=2)
    with ScriptedServer(script) as srv:
        made = cli("bench", srv.url, "--api", "openai-chat", "--num-requests", "120", "--db", str(db))
        assert made.returncode == 0, made.stderr
        with closing(sqlite3.connect(db)) as conn:   # as if killed after 5 requests
            conn.execute("DELETE FROM requests WHERE request_index >= 5")
            conn.execute("UPDATE points SET status = 'running'")
            conn.execute("UPDATE runs SET status = 'running'")
            conn.commit()
        first = subprocess.Popen([sys.executable, "-m", "specgauge", "bench", "--resume", "1", "--db", str(db)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120   # a safety net only: the condition is the first one's new rows
            while len(_stored_requests(db)) < 7 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            srv.script = Script(fault="hang")     # the first resume now waits on its next request
            assert first.poll() is None, "the first resume ended too soon"
            second = cli("bench", "--resume", "1", "--db", str(db), "--header", "X-Who: second")
            first.send_signal(signal.SIGTERM)
            _, first_err = first.communicate(timeout=60)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait(10)
        sent_by_second = [h for h in srv.headers_seen if h.get("X-Who") == "second"]
        srv.script = script
        third = cli("bench", "--resume", "1", "--db", str(db), "--output-json", "-")   # the first is gone
    assert_one_line_error(second, "run 1 is being run by another specgauge", f"pid {first.pid}")
    assert sent_by_second == []
    assert first.returncode == 143, first_err
    assert third.returncode == 0, third.stderr
    after = _stored_requests(db)
    assert len(after) == 120 and len({r for _, r, _ in after}) == 120


def test_bench_config_points_and_what_is_stored():
    config = BenchConfig(url="http://127.0.0.1:1/", api="sglang", concurrency=(1, 8), rates=(2.5,),
                         api_key="sk-x", headers=(("Authorization", "Bearer y"), ("X-Team", "infra")))
    specs = config.point_specs()
    assert [(s.mode, s.concurrency, s.rate, s.num_requests) for s in specs] == \
        [("closed", 1, None, 16), ("closed", 8, None, 32), ("open", None, 2.5, 64)]
    stored = config.stored()
    assert stored["url"] == "http://127.0.0.1:1" and "api_key" not in stored
    assert stored["headers"] == [["Authorization", "<redacted>"], ["X-Team", "<redacted>"]]
    timed = BenchConfig(url="http://127.0.0.1:1", api="sglang", duration_s=5)
    assert [(s.concurrency, s.num_requests, s.duration_s) for s in timed.point_specs()] == [(1, None, 5)]


def test_which_partial_points_resume_by_index():
    assert resumable_by_index(PointSpec(mode="closed", concurrency=4, num_requests=10))
    assert not resumable_by_index(PointSpec(mode="closed", concurrency=4, duration_s=5))
    assert not resumable_by_index(PointSpec(mode="open", rate=2, num_requests=10))


def test_resume_of_a_finished_run_changes_nothing(cli_here, server, tmp_path):
    db = tmp_path / "r.db"
    assert cli_here("bench", server.url, "--api", "openai-chat", "--num-requests", "3", "--db", str(db)).returncode == 0
    again = cli_here("bench", "--resume", "1", "--db", str(db), "--output-json", "-")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["points"][0]["num_ok"] == 3 and len(_stored_requests(db)) == 3


# -- CLI misuse: one line, exit 2 ----------------------------------------------------------------

@pytest.mark.parametrize(("args", "needles"), [
    (["--no-such-flag"], ["--no-such-flag"]),
    (["--concurrency", "1,x,8"], ["--concurrency", "'x' is not an integer"]),
    (["--concurrency", "0"], ["--concurrency", "> 0"]),
    (["--concurrency", "4,-2"], ["--concurrency", "> 0"]),
    (["--rate", "2,fast"], ["--rate", "'fast'"]),
    (["--num-requests", "0"], ["--num-requests"]),
    (["--rate", "2", "--request-rate", "3"], ["--rate", "--request-rate"]),
    (["--backend", "sglang", "--api", "openai-chat"], ["--backend sglang", "--api sglang"]),
    (["--num-prompts", "0"], ["--num-requests"]),   # one option under two names
    (["--request-rate", "2,fast"], ["--request-rate", "'fast'"]),
    (["--goodput", "ttft=200"], ["--goodput", "METRIC:MILLISECONDS"]),
    (["--goodput", "itl:5"], ["--goodput", "unknown metric 'itl'"]),
    (["--metric-percentiles", "0,99"], ["--metric-percentiles", "> 0"]),
    (["--metric-percentiles", "50,101"], ["--metric-percentiles", "<= 100"]),
    (["--percentile-metrics", "ttft,speed"], ["--percentile-metrics"]),
    (["--dataset-name", "sharegpt"], ["--dataset-path"]),
    (["--random-range-ratio", "1"], ["--random-range-ratio"]),
    (["--rate", "2", "--burstiness", "0.5"], ["--burstiness", "gamma"]),
    (["--header", "no-colon"], ["--header", "NAME:VALUE"]),
    (["--suite", "no-such-suite"], ["unknown suite 'no-such-suite'"]),
    (["--suite", "missing.jsonl"], ["suite file not found"]),
    (["--output-json", "/nonexistent/dir/x.json"], ["--output-json", "no such directory /nonexistent/dir"]),
    (["--concurrency", "1000000000"], ["--concurrency", "1,000,000,000 connections need about"]),
    (["--top-p", "0"], ["--top-p", "0<x<=1"]),
    (["--top-k", "-2"], ["--top-k", "-2"]),
])
def test_bad_options_exit_2_with_one_line(cli_here, args, needles, tmp_path):
    result = cli_here("bench", "http://127.0.0.1:9", "--api", "openai-chat", *args, "--db", str(tmp_path / "r.db"))
    assert_one_line_error(result, *needles)
    assert not (tmp_path / "r.db").exists()     # misuse creates no store file


def test_a_bad_tokenizer_fails_before_any_run_is_created(cli_here, server, tmp_path):
    not_a_tokenizer = tmp_path / "tokenizer.json"
    not_a_tokenizer.write_text('{"this is": "not a tokenizer"}')
    db = tmp_path / "r.db"
    assert_one_line_error(cli_here("bench", server.url, "--api", "openai-chat", "--tokenizer", str(not_a_tokenizer),
                                   "--db", str(db)), "cannot load tokenizer", str(not_a_tokenizer))
    assert not db.exists() and server.truth == []       # no run, nothing sent


def test_output_paths_are_checked_before_anything_runs(cli_here, server, tmp_path):
    db = tmp_path / "r.db"
    assert cli_here("bench", server.url, "--api", "openai-chat", "--num-requests", "2", "--db", str(db)).returncode == 0
    sent = len(server.truth)
    assert_one_line_error(cli_here("bench", "--resume", "1", "--db", str(db), "--output-json", str(tmp_path)),
                          "--output-json", "is a directory")
    assert_one_line_error(cli_here("export", "1", "--db", str(db), "--output", "/nonexistent/dir/out.jsonl"),
                          "--output", "no such directory")
    assert len(server.truth) == sent


def test_unknown_api_missing_url_and_bad_scheme(cli_here, tmp_path):
    assert_one_line_error(cli_here("bench", "http://127.0.0.1:9", "--api", "grpc"), "--api", "grpc")
    assert_one_line_error(cli_here("bench", "--api", "sglang"), "missing URL")
    assert_one_line_error(cli_here("bench", "ftp://127.0.0.1:9", "--api", "sglang"), "URL", "http://")


def test_unreachable_url_fails_before_start(tmp_path):
    db = tmp_path / "r.db"
    line = assert_one_line_error(cli("bench", refused_url(), "--api", "openai-chat", "--db", str(db)),
                                 "cannot reach")
    assert "refused" in line and not db.exists()


def test_resume_errors(cli_here, server, tmp_path):
    db = tmp_path / "r.db"
    assert_one_line_error(cli_here("bench", "--resume", "1", "--db", str(db)), "no results store")
    made = cli_here("bench", server.url, "--api", "openai-chat", "--num-requests", "2", "--db", str(db))
    assert made.returncode == 0, made.stderr
    assert_one_line_error(cli_here("bench", "--resume", "99", "--db", str(db)), "no run 99")
    assert_one_line_error(cli_here("bench", "--resume", "1", "--concurrency", "8", "--db", str(db)),
                          "--resume", "--concurrency")
    assert_one_line_error(cli_here("bench", server.url, "--resume", "1", "--db", str(db)), "drop URL")


def _on_read_only_mount(folder, *command: str) -> list[str]:
    """``command`` run where ``folder`` is a read-only bind mount of itself (a private mount
    namespace: nothing outside the child sees it)."""
    import shlex

    script = (f"mount --bind {shlex.quote(str(folder))} {shlex.quote(str(folder))} && "
              f"mount -o remount,bind,ro {shlex.quote(str(folder))} && exec {shlex.join(command)}")
    return ["unshare", "-m", "sh", "-c", script]


def test_a_store_on_a_read_only_filesystem_is_read_and_never_called_foreign(cli_here, server, tmp_path):
    import shutil

    folder = tmp_path / "ro"
    folder.mkdir()
    probe = shutil.which("unshare") and subprocess.run(_on_read_only_mount(folder, "touch", str(folder / "x")),
                                                       capture_output=True, text=True)
    if not probe or "Read-only file system" not in probe.stderr:
        pytest.skip("cannot make a read-only mount here (needs unshare -m and mount rights)")
    db = folder / "r.db"
    made = cli_here("bench", server.url, "--api", "openai-chat", "--num-requests", "2", "--db", str(db))
    assert made.returncode == 0, made.stderr

    def run(*args):
        return subprocess.run(_on_read_only_mount(folder, sys.executable, "-m", "specgauge", *args, "--db", str(db)),
                              capture_output=True, text=True, timeout=120)

    listed = run("runs")
    assert listed.returncode == 0 and "done" in listed.stdout, listed.stderr
    shown = run("show", "1")
    assert shown.returncode == 0 and "c=1" in shown.stdout, shown.stderr
    exported = run("export", "1", "--format", "csv")
    assert exported.returncode == 0 and exported.stdout.startswith("run_id"), exported.stderr
    line = assert_one_line_error(run("bench", server.url, "--api", "openai-chat"), "read-only filesystem")
    assert "not a specgauge results file" not in line


def test_bad_db_files(cli_here, tmp_path):
    text_file = tmp_path / "notes.db"
    text_file.write_text("not a database\n" * 100)
    for command in (["bench", "http://127.0.0.1:9", "--api", "sglang"], ["runs"], ["show", "1"],
                    ["export", "1"]):
        assert_one_line_error(cli_here(*command, "--db", str(text_file)), "not a specgauge results file")
    assert_one_line_error(cli_here("runs", "--db", str(tmp_path)), "is a directory")
    assert_one_line_error(cli_here("show", "1", "--db", str(tmp_path / "absent.db")), "no results store")
