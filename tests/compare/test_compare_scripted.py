"""compare end to end against real loopback servers: ABBA order, crossover, store, CLI contract."""

import json
import os
import subprocess
import sys

import pytest

from loaded_server import crossing_pair
from specgauge.compare.orchestrate import result_of_comparison, run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.report.progress import NullProgress
from specgauge.store import Store
from cli_testkit import run_cli, stored_request_count, wait_until

CONTRACT_SINGLE = {"domain", "baseline_tok_s", "speculative_tok_s", "speedup", "ci_low", "ci_high", "accept_length"}
CONTRACT_SWEEP = {"concurrency", "baseline_tok_s", "speculative_tok_s", "ratio", "ci_low", "ci_high"}


class RecordingProgress(NullProgress):
    def __init__(self):
        self.labels = []

    def point_started(self, point_index, label, total, already_done):
        self.labels.append(label)


def url_plan(baseline_url, speculative_url, **overrides):
    settings = dict(baseline=ArmConfig(name="baseline", kind="url", value=baseline_url),
                    speculative=ArmConfig(name="speculative", kind="url", value=speculative_url),
                    api="sglang", raw_chat_format=True, domains=("coding", "encyclopedic"),
                    concurrency=(1, 2, 4, 8, 16),
                    num_requests_single=6, num_requests_sweep=16, warmup=1, bootstrap_resamples=400,
                    label="scripted speculation")
    settings.update(overrides)
    return ComparePlan(**settings)


async def test_abba_comparison_finds_the_crossover_and_stores_everything(tmp_path):
    baseline, speculative = crossing_pair()
    progress = RecordingProgress()
    with baseline, speculative, Store.open(tmp_path / "c.db") as store:
        # 10 single-stream requests a domain: at a load of 5 on two cores, 6 left the interval's low end at 0.86
        plan = url_plan(baseline.url, speculative.url, num_requests_single=10)
        result = await run_comparison(plan, store, progress)
        stored = result_of_comparison(store, result.comparison_id)
        links = store.comparison_runs(result.comparison_id)

    # ABBA by point: the first arm alternates from one point to the next, over all stages.
    firsts = [label.split()[0] for label in progress.labels[::2]]
    seconds = [label.split()[0] for label in progress.labels[1::2]]
    assert firsts == ["base", "spec"] * 3 + ["base"] and all(a != b for a, b in zip(firsts, seconds))

    assert [d.domain for d in result.single_stream] == ["coding", "encyclopedic"]
    for domain in result.single_stream:
        # ~1.6x alone; a clear win (interval above 1) is what a busy machine (load 5) still shows
        assert domain.ci_low > 1.0 and domain.speedup > 1.2
        assert domain.accept_length == pytest.approx(2.67)
        assert domain.request_tok_s_ratio.method == "paired_requests"
    assert [p.concurrency for p in result.sweep] == [1, 2, 4, 8, 16]
    assert result.sweep[-1].ci_high < 1.0                             # loses clearly at 16
    assert result.crossover.kind == "crosses" and 2 < result.crossover_concurrency < 16
    assert result.recommended_disable_above == int(result.crossover_concurrency)
    assert result.settings.schedule == "abba_by_point"
    assert result.losslessness.checked and result.losslessness.compared > 0
    assert {b.tokens for b in result.tokens_per_chunk["speculative"]} == {2, 3}
    assert {b.tokens for b in result.tokens_per_chunk["baseline"]} == {1}
    assert any(line.startswith("scripted speculation speeds up single-stream coding") for line in result.verdict_lines)
    assert stored == result
    assert sorted((link.stage, link.arm) for link in links) == sorted(
        (stage, arm) for stage in ("single:coding", "single:encyclopedic", *(f"sweep:c={c}" for c in (1, 2, 4, 8, 16)))
        for arm in ("baseline", "speculative"))


def launch_command(script: dict) -> str:
    return f"{sys.executable} -m specgauge.testing.scripted_server --port {{port}} --script '{json.dumps(script)}'"


def test_cli_with_launch_commands_runs_rounds_one_arm_after_the_other(tmp_path):
    out = tmp_path / "verdict.json"
    done = run_cli(
        "compare", "--api", "sglang", "--raw-chat-format",
        "--baseline-cmd", launch_command({"ttft_s": 0.003, "chunk_delay_s": 0.003, "num_chunks": 12}),
        "--speculative-cmd", launch_command({"ttft_s": 0.003, "chunk_delay_s": 0.004, "num_chunks": 4,
                                             "tokens_per_chunk": 3, "sglang_meta": {"spec_accept_length": 3.0}}),
        "--domains", "coding", "--concurrency", "1,4", "--num-requests", "4", "--sweep-requests", "8",
        "--rounds", "2", "--warmup", "0", "--resamples", "200", "--output-json", str(out),
        "--output-dir", str(tmp_path / "report"), "--db", str(tmp_path / "c.db"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "report.html").stat().st_size > 0
    assert json.loads((tmp_path / "report" / "verdict.json").read_text()) == json.loads(out.read_text())
    document = json.loads(out.read_text())
    assert set(document) >= {"single_stream", "sweep", "crossover_concurrency", "recommended_disable_above"}
    assert CONTRACT_SINGLE <= set(document["single_stream"][0])
    assert CONTRACT_SWEEP <= set(document["sweep"][0])
    assert document["settings"]["schedule"] == "sequential_rounds"
    assert all(len(stage["baseline_run_ids"]) == 2 for stage in document["stages"])
    assert document["single_stream"][0]["speedup"] > 1.5             # 12 chunks of 3 ms vs 4 of 4 ms
    assert "speeds up single-stream coding" in done.stdout


def test_a_launch_command_that_crashes_at_start_is_one_line_with_its_log(tmp_path):
    script = 'import sys; print("loading weights"); print("error: no model at /nope"); sys.exit(3)'
    crash = f"{sys.executable} -c '{script}' {{port}}"
    from specgauge.testing.scripted_server import ScriptedServer

    with ScriptedServer() as running:   # the other arm answers; the launched one dies at start
        done = run_cli("compare", "--baseline-cmd", crash, "--speculative", running.url, "--db", str(tmp_path / "c.db"),
                       env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("specgauge: error:")]
    assert len(errors) == 1 and done.stderr.strip().endswith(errors[0])
    assert "baseline arm exited with code 3" in errors[0] and "error: no model at /nope" in errors[0]


def test_launched_arms_alternate_in_two_rounds_by_default(tmp_path):
    out = tmp_path / "verdict.json"
    done = run_cli(
        "compare", "--api", "sglang", "--raw-chat-format",
        "--baseline-cmd", launch_command({"ttft_s": 0.002, "chunk_delay_s": 0.002, "num_chunks": 6}),
        "--speculative-cmd", launch_command({"ttft_s": 0.002, "chunk_delay_s": 0.002, "num_chunks": 2,
                                             "tokens_per_chunk": 3}),
        "--domains", "coding", "--concurrency", "1", "--num-requests", "3", "--sweep-requests", "3",
        "--warmup", "0", "--resamples", "200", "--output-json", str(out), "--db", str(tmp_path / "c.db"))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["settings"]["rounds"] == 2
    assert all(len(stage["baseline_run_ids"]) == 2 and len(stage["speculative_run_ids"]) == 2
               for stage in document["stages"])
    # A B | B A: the baseline's round-1 runs come first, the speculative arm's round-2 runs before the baseline's
    single = document["stages"][0]
    assert single["baseline_run_ids"][0] < single["speculative_run_ids"][0]
    assert single["speculative_run_ids"][1] < single["baseline_run_ids"][1]


def test_a_second_arm_that_fails_to_start_keeps_the_first_arms_runs(tmp_path):
    script = 'import sys; print("error: no drafter at /nope"); sys.exit(3)'
    crash = f"{sys.executable} -c '{script}' {{port}}"
    db = tmp_path / "c.db"
    done = run_cli("compare", "--api", "sglang", "--raw-chat-format",
                   "--baseline-cmd", launch_command({"ttft_s": 0.002, "chunk_delay_s": 0.002, "num_chunks": 4}),
                   "--speculative-cmd", crash, "--domains", "coding", "--concurrency", "1", "--num-requests", "3",
                   "--sweep-requests", "3", "--warmup", "0", "--db", str(db), env={"TMPDIR": str(tmp_path)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("specgauge: error:")]
    assert len(errors) == 1
    assert "speculative arm exited with code 3" in errors[0] and "error: no drafter at /nope" in errors[0]
    assert "compare --resume c1" in errors[0] and "log " in errors[0]
    shown = (done.stdout + done.stderr).replace("\n", "")   # each arm's log is named as it starts
    assert "specgauge-baseline-" in shown and "specgauge-speculative-" in shown
    with Store.open(db, create=False) as store:
        links = store.comparison_runs(1)
        assert store.get_comparison(1).status == "failed"
        kept = [link for link in links if link.arm == "baseline"]
        assert kept and all(p.status == "done" for link in kept for p in store.get_points(link.run_id))


@pytest.mark.parametrize("args, message", [
    (["--speculative", "http://127.0.0.1:9"], "missing the baseline arm"),
    (["--baseline", "http://127.0.0.1:9", "--baseline-cmd", "x {port}", "--speculative", "http://127.0.0.1:9"],
     "only one of --baseline"),
    (["--baseline-cmd", "serve --port 1", "--speculative", "http://127.0.0.1:9"], "must contain {port}"),
    (["--baseline-cmd", 'serve --port {port} --speculative-config {"method": "ngram"}', "--speculative",
      "http://127.0.0.1:9"], "put the JSON in single quotes"),
    (["--baseline", "127.0.0.1:9", "--speculative", "http://127.0.0.1:9"], "must be a URL"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9", "--verify"], "--verify"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9", "--domains", "nosuch"], "nosuch"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9", "--concurrency", "1,x"], "1,x"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9", "--allow-suite-change"],
     "--against-baseline"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9",
      "--output-json", "/nonexistent/v.json"],
     "no such directory"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9"], "cannot reach http://127.0.0.1:9"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9", "--speculative-arm-config", "{x"],
     "--speculative-arm-config"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9", "--speculative-arm-config", "[3]"],
     "must be a JSON object"),
    (["--baseline", "http://127.0.0.1:9", "--speculative-cmd", "x --port {port}", "--speculative-arm-config",
      '{"method": "ngram"}'], "declares what a URL arm runs"),
    (["--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9", "--temperatures", "0,-1"],
     "--temperatures"),
])
def test_cli_misuse_is_one_line_and_exit_2(tmp_path, args, message):
    done = run_cli("compare", *args, "--db", str(tmp_path / "c.db"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert not (tmp_path / "c.db").exists()


def test_sigterm_stops_the_launched_arm_and_exits_143(tmp_path):
    import signal
    import uuid

    marker = uuid.uuid4().hex
    arm_pattern = f"--port [0-9]+ --script .*{marker}"     # the launched arm (compare's own argv has {{port}})
    slow = launch_command({"ttft_s": 0.01, "chunk_delay_s": 0.05, "num_chunks": 40, "token_text": marker})
    process = subprocess.Popen([sys.executable, "-m", "specgauge", "compare", "--api", "sglang", "--raw-chat-format",
                                "--baseline-cmd", slow,
                                "--speculative-cmd", slow, "--domains", "coding", "--concurrency", "1",
                                "--db", str(tmp_path / "c.db")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "TMPDIR": str(tmp_path)})   # its arms' logs
    try:
        wait_until(lambda: subprocess.run(["pgrep", "-f", "--", arm_pattern], capture_output=True,
                                          text=True).stdout.split(), timeout_s=120, what="the launched arm")
        # a request stored: the arm is serving, and the next ones are in flight
        wait_until(lambda: stored_request_count(tmp_path / "c.db") >= 1 or process.poll() is not None,
                   timeout_s=120, what="a stored request")
        assert process.poll() is None, "compare ended before it was stopped"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        leftover = subprocess.run(["pgrep", "-f", "--", arm_pattern], capture_output=True, text=True).stdout.split()
        for pid in leftover:   # only if the test failed half-way: never leave this test's arm running
            os.kill(int(pid), signal.SIGKILL)
    assert not leftover, "the launched arm outlived compare"
    assert process.returncode == 143, stderr
    assert "terminated" in stderr


async def test_a_suite_file_is_split_by_its_domain_tags(tmp_path):
    from specgauge.suites.model import Suite, write_suite_jsonl

    suite = Suite.model_validate({"name": "traffic", "version": 1, "requests": [
        {"domain": domain, "messages": [{"role": "user", "content": f"{domain} question {i}"}], "max_tokens": 16}
        for i in range(3) for domain in ("support", "sql")]})
    path = tmp_path / "traffic.jsonl"
    write_suite_jsonl(suite, path)
    baseline, speculative = crossing_pair()
    with baseline, speculative, Store.open(tmp_path / "c.db") as store:
        result = await run_comparison(url_plan(baseline.url, speculative.url, suite=str(path), concurrency=(1, 4),
                                               num_requests_single=12, num_requests_sweep=8), store)
    assert [d.domain for d in result.single_stream] == ["sql", "support"]
    assert all(d.baseline.num_ok + d.speculative.num_ok == 12 for d in result.single_stream)
    assert all(d.speedup > 1.2 for d in result.single_stream)
    assert [s.stage for s in result.stages] == ["single", "sweep:c=1", "sweep:c=4"]
    assert {s.suite.name for s in result.stages} == {"traffic"}


async def test_acceptance_from_vllm_counters_when_requests_carry_none(tmp_path):
    from specgauge.testing.scripted_server import Script, ScriptedServer, VllmCounters

    # Each request: 4 drafts of 3 tokens, 8 accepted -> acceptance length 1 + 8/4 = 3.0 (point-scoped).
    counters = VllmCounters(drafts_per_request=4, draft_tokens_per_request=12, accepted_per_request=8)
    with ScriptedServer(Script(ttft_s=0.002, chunk_delay_s=0.003, num_chunks=12)) as baseline, \
            ScriptedServer(Script(ttft_s=0.002, chunk_delay_s=0.004, num_chunks=4, tokens_per_chunk=3),
                           vllm=counters) as speculative, Store.open(tmp_path / "c.db") as store:
        result = await run_comparison(url_plan(baseline.url, speculative.url, api="openai-chat", domains=("coding",),
                                               concurrency=(1, 2), num_requests_single=4, num_requests_sweep=6),
                                      store)
    assert result.single_stream[0].accept_length == pytest.approx(3.0)
    assert all(p.speculative.accept_length == pytest.approx(3.0) for p in result.sweep)
    assert all(p.baseline.accept_length is None for p in result.sweep)


def test_a_launched_arm_that_dies_mid_comparison_is_named_with_its_log(tmp_path):
    """A killed launched arm was reported as 'cannot reach URL' without its name or log."""
    dies = launch_command({"ttft_s": 0.01, "chunk_delay_s": 0.001, "num_chunks": 4}) + " --exit-after-requests 3"
    lives = launch_command({"ttft_s": 0.01, "chunk_delay_s": 0.001, "num_chunks": 4})
    done = run_cli("compare", "--api", "sglang", "--raw-chat-format", "--baseline-cmd", dies,
                   "--speculative-cmd", lives,
                   "--domains", "coding", "--concurrency", "1", "--num-requests", "12", "--warmup", "0",
                   "--db", str(tmp_path / "c.db"), env={"TMPDIR": str(tmp_path)}, timeout=180)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert "the baseline arm (" in error and "--exit-after-requests 3" in error, done.stderr
    assert "during the comparison" in error, done.stderr
    assert f"log {tmp_path}" in error and "cannot reach" not in error
    assert "starting the baseline arm" in done.stdout + done.stderr          # launches are announced


class KillAfter(NullProgress):
    """Stops ``server`` once it has served ``requests`` streams (a condition, not a sleep)."""

    def __init__(self, server, requests):
        self.server, self.requests, self.killed = server, requests, False

    def request_finished(self, record):
        if not self.killed and len(self.server.truth) >= self.requests:
            self.killed = True
            self.server.__exit__(None, None, None)


async def test_a_comparison_whose_arm_dies_fails_reports_what_it_measured_and_resumes(tmp_path):
    from specgauge.compare.orchestrate import ComparisonStopped
    from specgauge.testing.scripted_server import Script, ScriptedServer

    script = Script(ttft_s=0.005, chunk_delay_s=0.001, num_chunks=4)
    baseline = ScriptedServer(script).__enter__()
    speculative = ScriptedServer(script).__enter__()
    killer = KillAfter(speculative, 10)
    try:
        with Store.open(tmp_path / "c.db") as store:
            plan = url_plan(baseline.url, speculative.url, api="openai-chat", domains=("coding",),
                            concurrency=(1, 2), num_requests_single=6, num_requests_sweep=8, warmup=0,
                            goodput={"e2el": 60000.0})
            with pytest.raises(ComparisonStopped, match="stopped answering") as stopped:
                await run_comparison(plan, store, killer)
            comparison_id = stopped.value.comparison_id
            assert stopped.value.exit_code == 3 and killer.killed
            row = store.get_comparison(comparison_id)
            assert row.status == "failed" and "stopped answering" in row.error
            partial = row.result                      # what it measured: the single stream, both arms
            assert [d["domain"] for d in partial["single_stream"]] == ["coding"] and partial["sweep"] == []
            (incomplete,) = [w["message"] for w in partial["health"] if w["code"] == "incomplete"]
            assert f"'specgauge compare --resume c{comparison_id} --db {store.path}' finishes it" in incomplete
            runs_before = store.comparison_runs(comparison_id)
            assert [row["stage"] for row in partial["goodput"]["stages"]] == ["single:coding"]
            assert ComparePlan.model_validate(row.plan).goodput == {"e2el": 60000.0}   # what --resume reads

            with ScriptedServer(script, port=speculative.port):   # the arm is back on the same address
                result = await run_comparison(plan, store, resume_id=comparison_id)
            runs_after = store.comparison_runs(comparison_id)
            assert store.get_comparison(comparison_id).status == "done"
            assert {(r.stage, r.arm, r.round): r.run_id for r in runs_before}.items() <= \
                {(r.stage, r.arm, r.round): r.run_id for r in runs_after}.items()   # finished runs kept
            assert len(runs_after) == 6
            for link in runs_after:
                points = store.get_points(link.run_id)
                assert [p.status for p in points] == ["done"] and points[0].aggregates["num_errors"] == 0
                assert points[0].aggregates["num_ok"] == (6 if link.stage.startswith("single") else 8)
    finally:
        baseline.__exit__(None, None, None)
        if not killer.killed:
            speculative.__exit__(None, None, None)
    assert [p.concurrency for p in result.sweep] == [1, 2] and len(result.single_stream) == 1
    assert not any(w.code == "incomplete" for w in result.health)
    assert result.goodput.slo_ms == {"e2el": 60000.0}   # the resumed result has every stage's goodput
    assert [row.stage for row in result.goodput.stages] == ["single:coding", "sweep:c=1", "sweep:c=2"]
    assert all(row.baseline.request_goodput == row.baseline.request_throughput for row in result.goodput.stages)
    line = str(stopped.value.with_resume(f"specgauge compare --resume c{comparison_id} --db x.db"))
    assert line.startswith(f"comparison c{comparison_id} stopped: run ") and \
        line.endswith(f"finish it with: specgauge compare --resume c{comparison_id} --db x.db")


def test_compare_resume_misuse_is_one_line(cli_here, tmp_path):
    def one_line(result, *needles):
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert all(needle in line for needle in needles), line

    db = tmp_path / "c.db"
    one_line(cli_here("compare", "--resume", "c1", "--db", str(db)), "no results store")
    with Store.open(db) as store:
        plan = url_plan("http://127.0.0.1:9", "http://127.0.0.1:9")
        comparison_id = store.create_comparison(plan.model_dump(mode="json"))
        store.finish_comparison(comparison_id, status="done", result=None)
        stopped = store.create_comparison(plan.model_dump(mode="json"))   # c2: never finished
    one_line(cli_here("compare", "--resume", f"c{stopped}", "--verify", "--db", str(db)),
             "--verify re-runs the embedded engine")   # --verify is taken, and checked against the stored arms
    one_line(cli_here("compare", "--resume", "c9", "--db", str(db)), "no comparison 9")
    one_line(cli_here("compare", "--resume", "x1", "--db", str(db)), "--resume", "comparison id")
    one_line(cli_here("compare", "--resume", "c1", "--concurrency", "4", "--db", str(db)), "drop --concurrency")
    one_line(cli_here("compare", "--resume", "c1", "--db", str(db)), "comparison c1 is done; nothing to resume")
    one_line(cli_here("compare", "--baseline", "http://127.0.0.1:9", "--speculative", "http://127.0.0.1:9",
                      "--concurrency", "1,1000000000", "--db", str(tmp_path / "new.db")),
             "--concurrency: 1,000,000,000 connections need about")
    assert not (tmp_path / "new.db").exists()


def test_a_plan_with_a_launched_arm_defaults_to_two_rounds():
    command = ArmConfig(name="baseline", kind="command", value="serve --port {port}")
    url = ArmConfig(name="speculative", kind="url", value="http://127.0.0.1:9")
    assert ComparePlan(baseline=command, speculative=url).rounds == 2
    assert ComparePlan(baseline=command, speculative=url, rounds=3).rounds == 3
    assert ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value="http://127.0.0.1:8"),
                       speculative=url).rounds == 1
    stored = ComparePlan(baseline=command, speculative=url, rounds=1).model_dump(mode="json")
    assert ComparePlan.model_validate(stored).rounds == 1   # a stored plan keeps its rounds (compare --resume)
