"""``bench --trace`` against scripted servers: each request sent at its scaled trace time (open
loop), the recorded output length with ignore_eos, lengths fitted to the context, the client's
lag stored and summarized; BurstGPT and a timed JSONL with real messages replay too."""

import json
from pathlib import Path

from cli_testkit import run_cli
from specgauge.client.tokens import load_tokenizer
from specgauge.store import Store
from specgauge.testing.scripted_server import Script, ScriptedServer

TARGET = Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets" / "target"
FAST = Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=4)
SPEED = 2.0
LAG_BOUND_MS = 2000.0   # generous: a busy 2-core machine; the order and the schedule are what is checked
TIMES_MS = [0, 150, 150, 400, 700, 720, 1000, 1300]


def _replayed(db: Path) -> tuple[list, dict]:
    """The replay's records in request order, and its point."""
    with Store.open(db, create=False) as store:
        run = store.list_runs()[-1]
        (point,) = store.get_points(run.id)
        return sorted(store.get_requests(point.id), key=lambda r: r.request_index), point


def _trace_bodies(server: ScriptedServer) -> list[dict]:
    return [b for b in server.requests_seen if b.get("ignore_eos") or b.get("messages")]


def test_mooncake_replay_keeps_the_scaled_schedule_lengths_and_shared_blocks(tmp_path):
    trace = tmp_path / "mooncake.jsonl"
    lines = [{"timestamp": t, "input_length": 560 if i % 2 else 600, "output_length": 3 + i,   # 512-token blocks
              "hash_ids": [7, 8, 100 + i] if i % 2 else [7, 9]} for i, t in enumerate(TIMES_MS)]
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    info = {"model_path": str(TARGET), "context_length": 2048}
    with ScriptedServer(FAST, server_info=info) as server:
        done = run_cli("bench", server.url, "--api", "openai-completions", "--trace", trace, "--trace-speed", SPEED,
                       "--trace-text-from", "coding", "--warmup", "0", "--db", tmp_path / "r.db")
        bodies = _trace_bodies(server)
    assert done.returncode == 0, done.stderr
    records, point = _replayed(tmp_path / "r.db")
    assert [r.request_index for r in records] == list(range(len(TIMES_MS)))
    assert [r.prompt_index for r in records] == list(range(len(TIMES_MS)))   # trace order, no shuffle
    first = records[0].scheduled_ns
    for record, t_ms in zip(records, TIMES_MS):   # the schedule: trace time / speed from the first request
        assert abs((record.scheduled_ns - first) - t_ms / SPEED * 1e6) < 1e3
        assert record.ok and 0 <= record.send_lag_ns / 1e6 < LAG_BOUND_MS   # never early
    sends = [r.t_send_ns for r in records]
    assert all(a <= b for a, b, t1, t2 in zip(sends, sends[1:], TIMES_MS, TIMES_MS[1:]) if t1 < t2)
    assert point.spec["trace_speed"] == SPEED and point.spec["mode"] == "open"
    assert point.aggregates["send_lag_ms"]["count"] == len(TIMES_MS)   # stored, summarized
    assert "client lag (send - trace time) p50" in done.stdout
    # recorded output lengths with ignore_eos; prompt lengths token-exact; shared hash blocks, shared text
    by_tokens = sorted(bodies, key=lambda b: b["max_tokens"])
    assert [b["max_tokens"] for b in by_tokens] == [3 + i for i in range(len(TIMES_MS))]
    assert all(b["ignore_eos"] is True for b in by_tokens)
    tokenizer = load_tokenizer(str(TARGET / "tokenizer.json"))
    ids = [tokenizer.encode(b["prompt"], add_special_tokens=False).ids for b in by_tokens]
    assert [len(i) for i in ids] == [560 if i % 2 else 600 for i in range(len(TIMES_MS))]
    assert ids[0] == ids[2] and ids[1] == ids[3]          # the same blocks: the same prompt
    assert ids[0][:500] == ids[1][:500]                   # block 7 shared (a boundary token or so aside)
    assert ids[0][520:560] != ids[1][520:560]             # then block 9 against block 8
    exported = run_cli("export", "1", "--requests", "--db", tmp_path / "r.db")
    assert exported.returncode == 0 and len(json.loads(exported.stdout)["requests"]) == len(TIMES_MS)


def test_lengths_past_the_context_are_scaled_or_skipped_and_counted(tmp_path):
    trace = tmp_path / "long.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": i * 10, "input_length": n, "output_length": 20,
                                         "hash_ids": [1, 2]}) + "\n" for i, n in enumerate((30, 300, 40, 900))))
    info = {"model_path": str(TARGET), "context_length": 128}
    for fit, sent, said in (("scale", 4, "2 scaled"), ("skip", 2, "2 left out")):
        with ScriptedServer(FAST, server_info=info) as server:
            done = run_cli("bench", server.url, "--api", "openai-completions", "--trace", trace, "--trace-fit", fit,
                           "--trace-text-from", "coding", "--warmup", "0", "--db", tmp_path / f"{fit}.db")
            bodies = _trace_bodies(server)
        assert done.returncode == 0, done.stderr
        assert len(bodies) == sent and f"{said} (--trace-fit {fit})" in done.stdout
        tokenizer = load_tokenizer(str(TARGET / "tokenizer.json"))
        assert all(len(tokenizer.encode(b["prompt"], add_special_tokens=False).ids) + b["max_tokens"] <= 128
                   for b in bodies)


def test_burstgpt_and_a_timed_jsonl_with_real_messages_replay(tmp_path):
    burst = tmp_path / "burst.csv"
    burst.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                     "10,ChatGPT,30,4,34,Conversation log\n10.2,GPT-4,20,0,20,API log\n"
                     "10.3,GPT-4,25,6,31,API log\n10.5,ChatGPT,35,5,40,Conversation log\n")
    info = {"model_path": str(TARGET), "context_length": 2048}
    with ScriptedServer(FAST, server_info=info) as server:
        done = run_cli("bench", server.url, "--api", "openai-completions", "--trace", burst,
                       "--trace-text-from", "encyclopedic", "--warmup", "0", "--db", tmp_path / "b.db")
        bodies = _trace_bodies(server)
    assert done.returncode == 0, done.stderr
    assert sorted(b["max_tokens"] for b in bodies) == [4, 5, 6]
    assert "1 trace requests with 0 output tokens (failed in the log) left out" in done.stdout
    records, _ = _replayed(tmp_path / "b.db")
    assert abs((records[2].scheduled_ns - records[0].scheduled_ns) / 1e9 - 0.5) < 1e-6   # 10 → 10.5 s, speed 1

    timed = tmp_path / "timed.jsonl"
    timed.write_text("".join(json.dumps(line) + "\n" for line in [
        {"timestamp": 3.0, "messages": [{"role": "user", "content": "Name a prime."}], "max_tokens": 7,
         "session_id": "a"},
        {"timestamp": 3.1, "messages": [{"role": "user", "content": "Name a prime."},
                                        {"role": "assistant", "content": "7"},
                                        {"role": "user", "content": "Another?"}], "max_tokens": 5, "session_id": "a"},
        {"timestamp": 3.25, "prompt": "Say hello.", "output_length": 3}]))
    with ScriptedServer(FAST) as server:
        done = run_cli("bench", server.url, "--trace", timed, "--trace-speed", "5", "--warmup", "0",
                       "--db", tmp_path / "t.db")
        bodies = [b for b in server.requests_seen if b.get("max_tokens") in (7, 5, 3)]
    assert done.returncode == 0, done.stderr
    chats = sorted(bodies, key=lambda b: -b["max_tokens"])
    assert [len(b["messages"]) for b in chats] == [1, 3, 1]
    assert chats[1]["messages"][-1]["content"] == "Another?" and chats[2]["messages"][0]["content"] == "Say hello."
    records, point = _replayed(tmp_path / "t.db")
    assert point.spec["ignore_eos"] is False   # a log's max_tokens is a cap, not a recorded length
    assert abs((records[2].scheduled_ns - records[0].scheduled_ns) / 1e9 - 0.25 / 5) < 1e-6


def test_a_replay_split_over_worker_processes_keeps_each_request_at_its_trace_time(tmp_path):
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": t, "input_length": 30, "output_length": 4, "hash_ids": [1]})
                             + "\n" for t in TIMES_MS))
    with ScriptedServer(FAST, server_info={"model_path": str(TARGET), "context_length": 2048}) as server:
        done = run_cli("bench", server.url, "--api", "openai-completions", "--trace", trace, "--trace-speed", SPEED,
                       "--trace-text-from", "coding", "--warmup", "0", "--workers", "2", "--db", tmp_path / "w.db")
    assert done.returncode == 0, done.stderr
    records, _ = _replayed(tmp_path / "w.db")
    assert [r.request_index for r in records] == list(range(len(TIMES_MS)))
    first = records[0].scheduled_ns
    for record, t_ms in zip(records, TIMES_MS):   # each worker's own clock: a generous bound on their offset
        assert abs((record.scheduled_ns - first) / 1e6 - t_ms / SPEED) < 250
        assert record.ok and abs(record.send_lag_ns) / 1e6 < LAG_BOUND_MS
