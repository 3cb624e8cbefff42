"""What limited a point besides its setting: send lag, achieved concurrency, sent and completed rate."""

import json
import subprocess
import sys

from specgauge.analysis.saturation import load_warnings
from specgauge.client.records import RequestRecord
from specgauge.testing.scripted_server import Script, ScriptedServer

MS = 1_000_000


def records(count: int, *, gap_ms: float, lag_ms: float = 0.0, latency_ms: float = 10.0):
    out = []
    for i in range(count):
        scheduled = int(i * gap_ms * MS)
        send = scheduled + int(lag_ms * MS)
        out.append(RequestRecord(i, i, scheduled_ns=scheduled, t_send_ns=send, t_end_ns=send + int(latency_ms * MS),
                                 chunk_times_ns=[send + MS]))
    return out


def test_a_point_that_kept_its_setting_gets_no_warning():
    assert load_warnings({"mode": "closed", "concurrency": 4}, records(16, gap_ms=0), send_lag_p50_ms=0.2,
                         send_lag_p99_ms=1.0, achieved_concurrency=3.8, window_s=1.0, e2e_p50_ms=10) == []
    assert load_warnings({"mode": "open", "rate": 10.0}, records(20, gap_ms=100), send_lag_p50_ms=0.3,
                         send_lag_p99_ms=2.0, achieved_concurrency=0.1, window_s=1.91, e2e_p50_ms=10) == []


def test_send_lag_and_idle_users_mean_the_client_limited_a_closed_point():
    (lag, idle) = load_warnings({"mode": "closed", "concurrency": 256}, records(512, gap_ms=0), send_lag_p50_ms=178,
                                send_lag_p99_ms=900, achieved_concurrency=60.0, window_s=30, e2e_p50_ms=17000)
    assert lag.startswith("client-limited: send lag p50 178.0 ms")
    assert "achieved concurrency 60.0 of 256 set" in idle
    (few,) = load_warnings({"mode": "closed", "concurrency": 64}, records(16, gap_ms=0), send_lag_p50_ms=0.1,
                           send_lag_p99_ms=0.2, achieved_concurrency=16.0, window_s=1, e2e_p50_ms=10)
    assert "only 16 requests for 64 users" in few


def test_an_open_point_sent_slower_or_completed_slower_than_its_rate_is_flagged():
    # Scheduled 50 ms apart (20/s) but each went out 50 ms later than the one before it: 10/s.
    slow = [RequestRecord(i, i, scheduled_ns=i * 50 * MS, t_send_ns=i * 100 * MS, t_end_ns=i * 100 * MS + 10 * MS)
            for i in range(20)]
    warnings = load_warnings({"mode": "open", "rate": 20.0, "max_concurrency": 2}, slow, send_lag_p50_ms=5,
                             send_lag_p99_ms=9, achieved_concurrency=0.1, window_s=1.91, e2e_p50_ms=10)
    assert any(w.startswith("sent 10.00 req/s where the schedule asked 20.00 req/s: the --max-concurrency 2 cap")
               for w in warnings)
    assert any(w.startswith("server-limited: completed") for w in warnings)


def test_bench_warns_in_the_terminal_and_json_when_the_rate_was_not_reached(tmp_path):
    # Each request takes >= 40 ms and at most one is in flight: 200 req/s cannot be offered.
    with ScriptedServer(Script(ttft_s=0.02, chunk_delay_s=0.01, num_chunks=3)) as server:
        done = subprocess.run([sys.executable, "-m", "specgauge", "bench", server.url, "--api", "openai-completions",
                               "--suite", str(_prompts(tmp_path)), "--rate", "200", "--max-concurrency", "1",
                               "--num-requests", "10", "--output-json", "-", "--db", str(tmp_path / "r.db")],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (point,) = json.loads(done.stdout)["points"]
    assert any("--max-concurrency 1 cap" in w for w in point["load_warnings"])
    assert "could not keep the schedule" in done.stderr         # the summary table says it too


def _prompts(tmp_path):
    from specgauge.suites.model import Suite, SuiteRequest, write_suite_jsonl

    path = tmp_path / "p.jsonl"
    write_suite_jsonl(Suite(name="p", requests=(SuiteRequest(prompt="count to three", max_tokens=8),)), path)
    return path
