"""``specgauge tune`` on a suite of multi-turn sessions: every depth's points send the sessions turn by turn,
each later turn carrying that server's own earlier answers (load/sessions.py), and a depth is chosen."""

import json

from specgauge.store import Store
from specgauge.testing.scripted_server import Script, ScriptedServer
from cli_testkit import run_cli


def test_tune_sends_each_sessions_turns_after_the_actual_answers(tmp_path):
    plain_script = Script(chunk_delay_s=0.02, num_chunks=6, unique_answers=True)
    fast_script = Script(chunk_delay_s=0.02, num_chunks=2, tokens_per_chunk=3, unique_answers=True)
    with ScriptedServer(plain_script) as plain, ScriptedServer(fast_script) as fast:
        done = run_cli("tune", "--url", f"0={plain.url}", "--url", f"2={fast.url}", "--concurrency", "1",
                       "--suite", "sessions", "--min-requests", "2", "--max-rounds", "2", "--warmup", "0",
                       "--think-time-ms", "2", "--think-time-distribution", "uniform",
                       "--db", tmp_path / "t.db", "--output-json", tmp_path / "tune.json")
        bodies = [*plain.requests_seen, *fast.requests_seen]
    assert done.returncode == 0, done.stderr
    later = [body for body in bodies if any(m["role"] == "assistant" for m in body["messages"])]
    assert later and len(later) * 3 == len(bodies) * 2   # every session of sessions@1 has 3 turns: 2 later ones
    for body in later:
        answers = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
        assert all(answer.startswith("<req-") for answer in answers)   # the server's own answers, not canned text
    assert [c["chosen"] for c in json.loads((tmp_path / "tune.json").read_text())["choices"]] == [2]
    with Store.open(tmp_path / "t.db", create=False) as store:   # every point ran with the think time asked
        specs = [point.spec for run in store.list_runs() for point in store.get_points(run.id)]
    assert specs and all(s["think_time_ms"] == 2.0 and s["think_time_distribution"] == "uniform" for s in specs)
