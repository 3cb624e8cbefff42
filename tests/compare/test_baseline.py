"""Named baselines and ``compare --against-baseline``: exit 1 on a significant regression."""


from specgauge.load.bench import run_benchmark
from specgauge.load.bench_config import BenchConfig
from specgauge.store import Store
from specgauge.suites.model import Suite, write_suite_jsonl
from specgauge.testing.scripted_server import Script, ScriptedServer
from cli_testkit import run_cli

# Chunk delays of several milliseconds, so a busy machine's scheduling delays (a millisecond or
# two per event) stay small beside them and SLOW stays clearly slower than FAST.
FAST = Script(ttft_s=0.01, chunk_delay_s=0.01, num_chunks=10, num_chunks_jitter=3)
SLOW = Script(ttft_s=0.01, chunk_delay_s=0.03, num_chunks=10, num_chunks_jitter=3)


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

        # The slow server takes three times as long per chunk; --min-effect 0.2 keeps a busy test machine's
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
    assert "4 → 4 requests" in allowed.stdout and "0 →" not in allowed.stdout    # it once said "0 → 4"


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


async def _against(db, name, url, **kwargs):
    from specgauge.compare.arms import ArmSpec
    from specgauge.compare.regression import run_against_baseline

    with Store.open(db) as store:
        return await run_against_baseline(store, name, ArmSpec("speculative", "url", url), resamples=300, **kwargs)


async def test_drift_within_the_run_is_not_called_a_regression(tmp_path):
    """The same server against its own baseline was a REGRESSION on a noisy machine. Here
    the machine is 30% slower half of the time while the new run is measured: the run measures that
    drift (the halves of its points disagree) and says the drift is larger than the change."""
    from loaded_server import DriftingServer, NoisyMachine

    db = str(tmp_path / "b.db")
    with ScriptedServer(FAST) as steady, DriftingServer(FAST, machine=NoisyMachine(0.3, 6)) as drifting:
        run_id = await stored_run(db, steady.url)
        with Store.open(db) as store:
            store.set_baseline("nightly", run_id)
        report = await _against(db, "nightly", drifting.url, allow_server_change=True)
    assert report.drift is not None and report.drift.per_measurement > 0.05
    assert not report.regressed, [(p.label, p.throughput) for p in report.points]
    assert any(p.within_drift and p.verdict == "within the measured drift" for p in report.points)


async def test_a_swapped_speculative_algorithm_is_a_server_change(tmp_path):
    db = str(tmp_path / "b.db")
    eagle = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5}
    ngram = {"speculative_algorithm": "NGRAM", "speculative_num_steps": 5}
    with ScriptedServer(FAST, server_info=eagle) as first, ScriptedServer(FAST, server_info=ngram) as second:
        run_id = await stored_run(db, first.url)
        with Store.open(db) as store:
            store.set_baseline("eagle", run_id)
        from specgauge.errors import UserError

        try:
            await _against(db, "eagle", second.url)
            refused = None
        except UserError as exc:
            refused = str(exc)
        allowed = await _against(db, "eagle", second.url, allow_server_change=True)
    assert refused is not None and "speculative_algorithm EAGLE3 → NGRAM" in refused
    assert allowed.server_changes == ("speculative_algorithm EAGLE3 → NGRAM",)
