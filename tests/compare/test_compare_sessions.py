"""compare on a suite of multi-turn sessions (two scripted servers on loopback): requests pair by
(session, turn) and the result gives a speedup per turn, printed by the CLI."""

from __future__ import annotations

from specgauge.compare.orchestrate import run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.store import Store
from specgauge.testing.scripted_server import Script, ScriptedServer
from cli_testkit import run_cli

# The speculative arm streams three tokens a chunk at the baseline's chunk pace: about 3x the tok/s.
BASELINE = Script(ttft_s=0.005, chunk_delay_s=0.01, num_chunks=9, tokens_per_chunk=1, unique_answers=True,
                  prefix_cache=True)
SPECULATIVE = Script(ttft_s=0.005, chunk_delay_s=0.01, num_chunks=3, tokens_per_chunk=3, unique_answers=True,
                     prefix_cache=True)


async def test_compare_pairs_by_session_and_turn_and_gives_per_turn_speedups(tmp_path):
    with ScriptedServer(BASELINE) as baseline, ScriptedServer(SPECULATIVE) as speculative, \
            Store.open(tmp_path / "c.db") as store:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           suite="sessions", domains=(), concurrency=(2,), num_requests_single=4,
                           num_requests_sweep=4, warmup=0, bootstrap_resamples=200, think_time_ms=1.0)
        result = await run_comparison(plan, store)
    points = sorted({row.point for row in result.per_turn})
    assert points == ["concurrency 2", "single-stream agentic", "single-stream coding"]
    sweep_turns = [row for row in result.per_turn if row.point == "concurrency 2"]
    assert [row.turn for row in sweep_turns] == [0, 1, 2]
    assert all(row.pairs == 4 for row in sweep_turns)   # every session's every turn paired, both arms
    assert all(row.throughput.ratio > 1.5 for row in sweep_turns)
    assert all(row.ttft_ratio.ratio is not None for row in sweep_turns)
    from specgauge.report.html import render_html

    page = render_html(result, tmp_path / "report.html").read_text()
    assert "Per turn (multi-turn sessions" in page and page.count('<td class="text">concurrency 2</td>') == 3


def test_compare_cli_prints_the_per_turn_speedups(tmp_path):
    with ScriptedServer(BASELINE) as baseline, ScriptedServer(SPECULATIVE) as speculative:
        result = run_cli("compare", "--baseline", baseline.url, "--speculative", speculative.url, "--suite",
                         "sessions", "--concurrency", "1", "--num-requests", "2", "--warmup", "0",
                         "--resamples", "200", "--db", tmp_path / "c.db")
    assert result.returncode == 0, result.stderr
    assert "per turn (multi-turn sessions, paired by session and turn" in result.stdout
    assert "concurrency 1 turn 2: throughput" in result.stdout
