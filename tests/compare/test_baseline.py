"""Named baselines and ``compare --against-baseline``: exit 1 on a significant regression."""

import subprocess
import sys

from specgauge.load.bench import run_benchmark
from specgauge.load.bench_config import BenchConfig
from specgauge.store import Store
from specgauge.suites.model import Suite, write_suite_jsonl
from specgauge.testing.scripted_server import Script, ScriptedServer

FAST = Script(ttft_s=0.003, chunk_delay_s=0.003, num_chunks=10, num_chunks_jitter=3)
SLOW = Script(ttft_s=0.003, chunk_delay_s=0.006, num_chunks=10, num_chunks_jitter=3)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "specgauge", *args], capture_output=True, text=True, timeout=120)


async def stored_run(db, url, suite="coding"):
    config = BenchConfig(url=url, api="sglang", suite=suite, concurrency=(1, 4), num_requests=12, raw_chat_format=True)
    with Store.open(db) as store:
        return (await run_benchmark(config, store)).run_id


async def test_regression_exits_1_and_the_same_server_exits_0(tmp_path):
    db = str(tmp_path / "b.db")
    with ScriptedServer(FAST) as fast, ScriptedServer(SLOW) as slow:
        run_id = await stored_run(db, fast.url)
        done = run_cli("baseline", "set", str(run_id), "--name", "nightly", "--db", db)
        assert done.returncode == 0 and "baseline 'nightly' = run" in done.stdout
        listed = run_cli("baseline", "list", "--db", db)
        assert "nightly" in listed.stdout

        # The slow server takes twice as long per chunk; --min-effect 0.2 keeps a busy test machine's
        # run-to-run drift on the same server from reading as a regression.
        same = run_cli("compare", "--against-baseline", "nightly", "--speculative", fast.url, "--db", db,
                       "--resamples", "300", "--min-effect", "0.2")
        worse = run_cli("compare", "--against-baseline", "nightly", "--baseline", slow.url, "--db", db,
                        "--resamples", "300", "--min-effect", "0.2", "--output-json", str(tmp_path / "r.json"))
    assert same.returncode == 0, same.stderr
    assert "no significant regression" in same.stdout
    assert worse.returncode == 1, worse.stderr
    assert "REGRESSION" in worse.stdout and "significant regression at c=1, c=4" in worse.stdout
    assert '"regressed": true' in (tmp_path / "r.json").read_text()


async def test_changed_suite_is_refused_unless_allowed(tmp_path):
    db = str(tmp_path / "b.db")
    suite_file = tmp_path / "mine.jsonl"

    def suite(last: str) -> Suite:
        questions = ["question 0", "question 1", "question 2", last]
        return Suite.model_validate({"name": "mine", "version": 1, "requests": [
            {"domain": "coding", "messages": [{"role": "user", "content": q}], "max_tokens": 16} for q in questions]})

    write_suite_jsonl(suite("question 3"), suite_file)
    with ScriptedServer(FAST) as fast:
        run_id = await stored_run(db, fast.url, suite=str(suite_file))
        assert run_cli("baseline", "set", str(run_id), "--name", "v1", "--db", db).returncode == 0
        write_suite_jsonl(suite("question three"), suite_file)
        refused = run_cli("compare", "--against-baseline", "v1", "--speculative", fast.url, "--db", db)
        allowed = run_cli("compare", "--against-baseline", "v1", "--speculative", fast.url, "--db", db,
                          "--allow-suite-change", "--resamples", "300")
    assert refused.returncode == 2 and "suite changed" in refused.stderr and "--allow-suite-change" in refused.stderr
    assert allowed.returncode in (0, 1), allowed.stderr
    assert "suite changed:" in allowed.stdout


def test_baseline_misuse_is_one_line(tmp_path):
    db = str(tmp_path / "b.db")
    Store.open(db).close()
    unknown_run = run_cli("baseline", "set", "99", "--name", "x", "--db", db)
    unknown_name = run_cli("compare", "--against-baseline", "nope", "--speculative", "http://127.0.0.1:9", "--db", db)
    two_arms = run_cli("compare", "--against-baseline", "nope", "--speculative", "http://127.0.0.1:9",
                       "--baseline", "http://127.0.0.1:9", "--db", db)
    for done, message in ((unknown_run, "no run 99"), (unknown_name, "no baseline named 'nope'"),
                          (two_arms, "exactly one of")):
        assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1
