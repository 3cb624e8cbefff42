"""Multi-turn sessions against the scripted server (real HTTP on loopback, a real SQLite store): every
later turn carries the server's actual answers to the turns before, per-turn figures and prefix-cache
hits are stored, think time and the context limit end or pace sessions as stated (load/sessions.py)."""

from __future__ import annotations

import pytest

from specgauge.client.endpoint import Endpoint
from specgauge.compare.demo import TARGET_DIR
from specgauge.load.bench import run_benchmark
from specgauge.load.bench_config import BenchConfig
from specgauge.load.plan import PointSpec
from specgauge.load.runner import run_point
from specgauge.load.sessions import TURN_STRIDE, think_time_s
from specgauge.store import Store
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest
from specgauge.suites.registry import load_suite
from specgauge.testing.scripted_server import Script, ScriptedServer

CONVERSATION = Script(num_chunks=3, tokens_per_chunk=2, token_text="ans ", unique_answers=True, prefix_cache=True)


def _session(*turns: str, max_tokens: int = 8) -> SuiteRequest:
    return SuiteRequest(messages=(ChatMessage(role="user", content=turns[0]),),
                        next_turns=tuple(ChatMessage(role="user", content=t) for t in turns[1:]), max_tokens=max_tokens)


@pytest.mark.parametrize("api", ["openai-chat", "sglang"])
async def test_bench_on_the_builtin_sessions_sends_each_turn_after_the_actual_answers(tmp_path, api):
    suite = load_suite("sessions")
    with ScriptedServer(CONVERSATION) as server:
        config = BenchConfig(url=server.url, api=api, suite="sessions", concurrency=(2,), num_requests=4,
                             raw_chat_format=True)
        with Store.open(tmp_path / "r.db") as store:
            summary = await run_benchmark(config, store)
            (point,) = store.get_points(summary.run_id)
            records = store.get_requests(point.id)
        bodies = list(server.requests_seen)
    assert summary.status == "done"
    sessions: dict[int, dict[int, object]] = {}
    for record in records:
        assert record.ok and record.request_index == record.session_index * TURN_STRIDE + record.turn_index
        sessions.setdefault(record.session_index, {})[record.turn_index] = record
    assert len(sessions) == 4   # --num-requests counts sessions
    answers = [r.output_text for r in records]
    assert len(set(answers)) == len(answers) and all(a.startswith("<req-") for a in answers)   # unique per request
    for turns in sessions.values():
        first = turns[0]
        request = suite.requests[first.prompt_index]
        assert sorted(turns) == list(range(request.num_turns))     # every turn sent
        for turn in range(1, request.num_turns):
            record, before = turns[turn], turns[turn - 1]
            # the body of this turn holds every earlier answer, verbatim, then this turn's message
            (body,) = [b for b in bodies if before.output_text in _sent_text(b)
                       and _sent_text(b).count("<req-") == turn]
            text = _sent_text(body)
            assert text.rindex(request.next_turns[turn - 1].content) > text.rindex(before.output_text)
            for earlier in range(turn):
                assert turns[earlier].output_text in _sent_text(body)
            assert record.t_send_ns > before.t_end_ns            # sent after the answer arrived
            assert record.cached_tokens >= before.prompt_tokens   # the history was served from the cache
    figures = summary.points[0].aggregate.turns
    assert [row["turn"] for row in figures] == [0, 1, 2]
    assert all(row["ok"] == 4 and row["ttft_ms_p50"] is not None for row in figures)
    assert figures[2]["cache_hit_share"] > figures[0]["cache_hit_share"]


def _sent_text(body: dict) -> str:
    if "messages" in body:
        return "\n".join(m["content"] for m in body["messages"])
    return body["text"]


async def test_a_session_whose_next_turn_cannot_fit_ends_with_a_note(tmp_path):
    tokenizer = str(TARGET_DIR / "tokenizer.json")
    long_turn = "word " * 200
    suite = Suite(name="s", requests=(_session("hello there", long_turn, "and again"),))
    with ScriptedServer(CONVERSATION) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="scripted-model", tokenizer_path=tokenizer,
                            context_length=160)
        outcome = await run_point(endpoint, suite, PointSpec(mode="closed", concurrency=1, num_requests=1),
                                  on_record=lambda record: None)
    assert [r.turn_index for r in outcome.records] == [0]
    assert outcome.session_ends.context == 1 and outcome.session_ends.turns_not_sent == 2
    assert "never truncated" in outcome.session_ends.notes()[0]


async def test_a_failed_turn_ends_its_session():
    suite = Suite(name="s", requests=(_session("first", "second [[fault:http_error]]", "third"),))
    with ScriptedServer(CONVERSATION) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="scripted-model")
        outcome = await run_point(endpoint, suite, PointSpec(mode="closed", concurrency=1, num_requests=1),
                                  on_record=lambda record: None)
        assert len(server.requests_seen) == 2
    assert [(r.turn_index, r.ok) for r in outcome.records] == [(0, True), (1, False)]
    assert outcome.session_ends.failed_turn == 1 and outcome.session_ends.turns_not_sent == 1


async def test_think_time_passes_between_an_answer_and_the_next_turn():
    suite = Suite(name="s", requests=(_session("one", "two", "three"),))
    with ScriptedServer(CONVERSATION) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="scripted-model")
        spec = PointSpec(mode="closed", concurrency=1, num_requests=1, think_time_ms=30.0)
        outcome = await run_point(endpoint, suite, spec, on_record=lambda record: None)
    records = sorted(outcome.records, key=lambda r: r.turn_index)
    for before, after in zip(records, records[1:]):
        assert after.scheduled_ns - before.t_end_ns >= 25_000_000   # the pause came before the next turn


def test_think_times_are_seeded_and_have_the_asked_mean():
    draws = [think_time_s(7, session, 1, 100.0, "exponential") for session in range(2000)]
    assert draws == [think_time_s(7, session, 1, 100.0, "exponential") for session in range(2000)]
    assert draws != [think_time_s(8, session, 1, 100.0, "exponential") for session in range(2000)]
    assert 0.09 < sum(draws) / len(draws) < 0.11
    uniform = [think_time_s(1, s, 2, 50.0, "uniform") for s in range(500)]
    assert all(0 <= d <= 0.1 for d in uniform)
    assert think_time_s(0, 0, 1, 40.0, "fixed") == 0.04 and think_time_s(0, 0, 1, 0.0, "exponential") == 0.0


async def test_a_resumed_session_point_sends_only_the_sessions_not_started(tmp_path):
    import sqlite3
    from contextlib import closing

    from specgauge.load.bench import resume_benchmark

    with ScriptedServer(CONVERSATION) as server:
        config = BenchConfig(url=server.url, api="openai-chat", suite="sessions", concurrency=(1,), num_requests=3)
        with Store.open(tmp_path / "r.db") as store:
            run_id = (await run_benchmark(config, store)).run_id
        with closing(sqlite3.connect(tmp_path / "r.db")) as conn:   # as if killed during session 2
            conn.execute(f"DELETE FROM requests WHERE request_index > {2 * TURN_STRIDE}")
            conn.execute("UPDATE points SET status = 'running'")
            conn.execute("UPDATE runs SET status = 'running'")
            conn.commit()
        sent_before = len(server.requests_seen)
        with Store.open(tmp_path / "r.db") as store:
            summary = await resume_benchmark(run_id, store)
            (point,) = store.get_points(run_id)
            stored = store.get_requests(point.id)
        assert len(server.requests_seen) == sent_before   # session 2's first turn is stored: nothing resent
    assert summary.status == "done" and {r.session_index for r in stored} == {0, 1, 2}


def test_bench_cli_prints_the_per_turn_table(tmp_path):
    from cli_testkit import run_cli

    with ScriptedServer(CONVERSATION) as server:
        result = run_cli("bench", server.url, "--suite", "sessions", "--concurrency", "2", "--num-requests", "3",
                         "--think-time-ms", "5", "--think-time-distribution", "exponential", "--warmup", "0",
                         "--db", tmp_path / "r.db")
    assert result.returncode == 0, result.stderr
    assert "per turn" in result.stdout and "cache hit" in result.stdout
    turn_rows = [line for line in result.stdout.splitlines() if line.startswith("│ c=2")]
    assert len(turn_rows) >= 4   # the point's row and one row per turn index (0, 1, 2)
    report = run_cli("report", "1", "--html", tmp_path / "run.html", "--db", tmp_path / "r.db")
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "run.html").read_text()
    assert "Per turn (multi-turn sessions" in page and page.count('<table class="per-turn">') == 1


def test_sessions_refuse_worker_processes_in_one_line(tmp_path):
    from cli_testkit import one_line_error, run_cli

    with ScriptedServer(CONVERSATION) as server:
        result = run_cli("bench", server.url, "--suite", "sessions", "--concurrency", "2", "--num-requests", "2",
                         "--workers", "2", "--db", tmp_path / "r.db")
        assert not server.requests_seen   # refused before anything was sent
    one_line_error(result, "multi-turn sessions", "--workers")
