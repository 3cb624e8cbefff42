"""No ``--header`` value and no ``--api-key`` reaches any file a run writes: bench (store, JSON,
CSV, HTML report), compare and tune, each run on scripted loopback servers with marker secrets;
a resumed run asks for the header values again."""

import sqlite3
from contextlib import closing
from pathlib import Path

from cli_testkit import one_line_error, run_cli
from specgauge.testing.scripted_server import Script, ScriptedServer

HEADER_SECRET = "hdr-marker-7f3a9c"
KEY_SECRET = "sk-marker-51e0d2"
SECRET_ARGS = ("--api-key", KEY_SECRET, "--header", f"X-Token: {HEADER_SECRET}",
               "--header", f"X-Tenant: {HEADER_SECRET}-tenant")
FAST = Script(ttft_s=0.005, chunk_delay_s=0.002, num_chunks=4, tokens_per_chunk=2)


def files_holding_a_secret(folder: Path) -> list[str]:
    """Every file under ``folder`` (the SQLite file and its journals included) whose bytes hold a marker."""
    written = [path for path in folder.rglob("*") if path.is_file()]
    assert written, f"the run wrote nothing under {folder}"
    return [str(path) for path in written
            if HEADER_SECRET.encode() in path.read_bytes() or KEY_SECRET.encode() in path.read_bytes()]


def assert_sent(server: ScriptedServer) -> None:
    """The secrets did reach the server (so their absence from the files is not an accident)."""
    assert server.headers_seen
    assert all(h.get("X-Token") == HEADER_SECRET and h.get("Authorization") == f"Bearer {KEY_SECRET}"
               for h in server.headers_seen)


def test_bench_writes_no_secret_and_resume_asks_for_the_headers(tmp_path):
    db, out = tmp_path / "r.db", tmp_path / "out"
    with ScriptedServer(FAST) as server:
        done = run_cli("bench", server.url, "--api", "openai-chat", "--concurrency", "1,2", "--num-requests", "4",
                       *SECRET_ARGS, "--db", db, "--output-json", tmp_path / "run.json")
        assert done.returncode == 0, done.stderr
        assert_sent(server)
        report = run_cli("report", "1", "--db", db, "--output-dir", out, timeout=300)
        exported = run_cli("export", "1", "--db", db, "--format", "csv", "--requests",
                           "--output", tmp_path / "requests.csv")
        assert report.returncode == 0, report.stderr
        assert exported.returncode == 0, exported.stderr
        with closing(sqlite3.connect(db)) as conn:   # as if killed: resume has work to do
            conn.execute("UPDATE points SET status = 'running'")
            conn.commit()
        missing = run_cli("bench", "--resume", "1", "--db", db, "--api-key", KEY_SECRET,
                          "--header", f"X-Token: {HEADER_SECRET}")
        one_line_error(missing, "X-Tenant", "--header")
        assert HEADER_SECRET not in missing.stderr
        again = run_cli("bench", "--resume", "1", "--db", db, *SECRET_ARGS)
        assert again.returncode == 0, again.stderr
    assert (out / "report.html").exists() and (tmp_path / "requests.csv").exists()
    assert files_holding_a_secret(tmp_path) == []
    assert "X-Token" in (tmp_path / "run.json").read_text()   # the names are kept
    for stream in (done.stdout, done.stderr, again.stdout, again.stderr):
        assert HEADER_SECRET not in stream and KEY_SECRET not in stream


def test_compare_writes_no_secret(tmp_path):
    with ScriptedServer(FAST) as baseline, ScriptedServer(FAST) as speculative:
        done = run_cli("compare", "--baseline", baseline.url, "--speculative", speculative.url, "--api", "sglang",
                       "--raw-chat-format", "--domains", "coding", "--concurrency", "1,2", "--num-requests", "4",
                       "--warmup", "0", "--resamples", "200", *SECRET_ARGS, "--db", tmp_path / "c.db",
                       "--output-dir", tmp_path / "out")
        assert done.returncode in (0, 1), done.stderr
        assert_sent(baseline)
        assert_sent(speculative)
    assert (tmp_path / "out" / "report.html").exists()
    assert files_holding_a_secret(tmp_path) == []
    assert HEADER_SECRET not in done.stdout + done.stderr and KEY_SECRET not in done.stdout + done.stderr


def test_tune_writes_no_secret(tmp_path):
    with ScriptedServer(FAST) as plain, ScriptedServer(Script(ttft_s=0.005, chunk_delay_s=0.002, num_chunks=2,
                                                              tokens_per_chunk=4)) as fast:
        done = run_cli("tune", "--url", f"0={plain.url}", "--url", f"2={fast.url}", "--concurrency", "1",
                       "--suite", "smoke", "--min-requests", "4", "--max-rounds", "2", *SECRET_ARGS,
                       "--db", tmp_path / "t.db", "--output-json", tmp_path / "tune.json")
        assert done.returncode == 0, done.stderr
        assert_sent(plain)
        shown = run_cli("report", "t1", "--db", tmp_path / "t.db", "--html", tmp_path / "tune.html", timeout=300)
        assert shown.returncode == 0, shown.stderr
    assert files_holding_a_secret(tmp_path) == []
    assert HEADER_SECRET not in done.stdout + done.stderr and KEY_SECRET not in done.stdout + done.stderr


def test_a_malformed_header_is_refused_without_echoing_it(tmp_path):
    refused = run_cli("bench", "http://127.0.0.1:9", "--header", HEADER_SECRET, "--db", tmp_path / "r.db")
    one_line_error(refused, "--header", "NAME:VALUE")
    assert HEADER_SECRET not in refused.stderr
