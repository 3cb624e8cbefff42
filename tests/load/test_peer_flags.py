"""vLLM/SGLang flag names on ``bench``, the workload fixed for the server before the first request
(context, tokenizer, chat template), and vLLM-style goodput — end to end on the scripted server."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from specgauge.client.records import ErrorClass, RequestRecord
from specgauge.report.peer_result import goodput_req_s, meets_slos
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest, write_suite_jsonl
from specgauge.suites.random_prompts import random_suite
from specgauge.testing.scripted_server import Script, ScriptedServer
from cli_testkit import run_cli as cli

TARGET = Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets" / "target"
FAST = Script(ttft_s=0.005, chunk_delay_s=0.001, num_chunks=4, tokens_per_chunk=2)


def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(TARGET / "tokenizer.json"))


def stored_config(db: Path) -> dict:
    with closing(sqlite3.connect(db)) as conn:
        return json.loads(conn.execute("SELECT config_json FROM runs").fetchone()[0])


def test_a_vllm_bench_serve_command_line_runs_and_reports_goodput(tmp_path):
    # The server reports its model path (as SGLang's server info and the embedded engine do), so
    # its own tokenizer builds the random prompts and counts tokens per chunk.
    info = {"model_path": str(TARGET)}
    result_file = tmp_path / "result.json"
    with ScriptedServer(FAST, server_info=info) as server:
        done = cli("bench", server.url, "--backend", "vllm", "--dataset-name", "random", "--random-input-len", "128",
                   "--random-output-len", "64", "--num-prompts", "50", "--request-rate", "inf",
                   "--max-concurrency", "8", "--ignore-eos", "--goodput", "ttft:500", "tpot:50",
                   "--save-result", "--result-filename", str(result_file), "--db", str(tmp_path / "r.db"))
        bodies = list(server.requests_seen)
    assert done.returncode == 0, done.stderr
    assert "Request goodput (req/s) [ttft:500 tpot:50]:" in done.stdout
    # 50 measured and one warm-up request (--warmup's default, 1)
    assert len(bodies) == 50 + 1 and all(b["ignore_eos"] is True and b["max_tokens"] == 64 for b in bodies)
    assert "messages" not in bodies[0]                          # vllm backend: /v1/completions
    lengths = {len(tokenizer().encode(b["prompt"], add_special_tokens=False).ids) for b in bodies}
    assert lengths == {128}                                     # exact token lengths
    assert len({b["prompt"] for b in bodies}) == 50             # 50 distinct prompts
    result = json.loads(result_file.read_text())
    assert (result["completed"], result["failed"]) == (50, 0)
    assert (result["max_concurrency"], result["request_rate"]) == (8, "inf")
    assert result["request_goodput"] == pytest.approx(result["request_throughput"])   # every request met both SLOs
    assert {"mean_ttft_ms", "median_tpot_ms", "p99_itl_ms"} <= set(result)
    config = stored_config(tmp_path / "r.db")
    assert config["api"] == "openai-completions" and config["ignore_eos"]
    assert config["goodput"] == {"ttft": 500, "tpot": 50}
    assert "the server's own" in config["prepared"]["tokenizer_source"]
    assert "token counts: tokenizer" in done.stdout            # counted with the server's tokenizer, said so


def test_goodput_counts_requests_meeting_every_slo():
    def record(ttft_ms: float, gap_ms: float, tokens: int) -> RequestRecord:
        times = [int(ttft_ms * 1e6) + int(i * gap_ms * 1e6) for i in range(tokens)]
        return RequestRecord(0, 0, t_send_ns=0, t_end_ns=times[-1], chunk_times_ns=times, chunk_tokens=[1] * tokens,
                             output_tokens=tokens)

    fast, slow_first, slow_decode, one_token = record(10, 5, 8), record(300, 5, 8), record(10, 80, 8), record(10, 0, 1)
    slos = {"ttft": 200, "tpot": 50}
    assert [meets_slos(r, slos) for r in (fast, slow_first, slow_decode, one_token)] == [True, False, False, True]
    failed = record(10, 5, 8).fail(ErrorClass.HTTP_5XX, "boom", 1)
    assert goodput_req_s([fast, slow_first, one_token, failed], slos, window_s=2.0) == pytest.approx(1.0)
    assert goodput_req_s([fast], {}, window_s=2.0) is None


def test_random_prompts_follow_vllms_length_rules_exactly():
    tok = tokenizer()
    suite = random_suite(tok, num_prompts=40, input_len=100, output_len=20, range_ratio=0.5, seed=3, name="r")
    inputs = [len(tok.encode(r.prompt, add_special_tokens=False).ids) for r in suite.requests]
    outputs = [r.max_tokens for r in suite.requests]
    assert all(50 <= n <= 150 for n in inputs) and len(set(inputs)) > 5
    assert all(10 <= n <= 30 for n in outputs)
    assert all(r.notes is None for r in suite.requests)        # every prompt hit its drawn length
    again = random_suite(tok, num_prompts=40, input_len=100, output_len=20, range_ratio=0.5, seed=3, name="r")
    assert again.content_hash == suite.content_hash            # the seed fixes the prompts


def _mixed_suite(tmp_path) -> Path:
    short, long = "Name a prime.", " ".join(["word"] * 300)
    suite = Suite(name="lengths", requests=tuple(SuiteRequest(prompt=p, max_tokens=16) for p in (short, long, short)))
    path = tmp_path / "lengths.jsonl"
    write_suite_jsonl(suite, path)
    return path


def test_prompts_that_cannot_fit_the_servers_context_are_left_out_and_said(tmp_path):
    info = {"model_path": str(TARGET), "context_length": 64}
    with ScriptedServer(FAST, server_info=info) as server:
        done = cli("bench", server.url, "--api", "openai-completions", "--suite", str(_mixed_suite(tmp_path)),
                   "--num-requests", "4", "--output-json", "-", "--db", str(tmp_path / "r.db"))
        prompts = {b["prompt"] for b in server.requests_seen}
    assert done.returncode == 0, done.stderr
    (point,) = json.loads(done.stdout)["points"]
    assert (point["num_ok"], point["num_errors"]) == (4, 0)
    assert prompts == {"Name a prime."}
    assert "left out 1 of 3 prompts" in done.stderr and "64-token context" in done.stderr
    prepared = stored_config(tmp_path / "r.db")["prepared"]
    assert prepared["left_out"] == 1 and prepared["context_length"] == 64


def test_a_chat_suite_on_sglang_without_a_template_is_refused(tmp_path):
    with ScriptedServer(FAST) as server:   # no model path: no tokenizer, no chat template
        done = cli("bench", server.url, "--api", "sglang", "--num-requests", "2", "--db", str(tmp_path / "r.db"))
        seen = len(server.requests_seen)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "chat template" in done.stderr and "--raw-chat-format" in done.stderr
    assert seen == 0 and not (tmp_path / "r.db").exists()


def test_a_chat_suite_on_sglang_uses_the_servers_own_template(tmp_path):
    with ScriptedServer(FAST, server_info={"model_path": str(TARGET)}) as server:
        done = cli("bench", server.url, "--api", "sglang", "--num-requests", "2", "--db", str(tmp_path / "r.db"))
        texts = [b["text"] for b in server.requests_seen]
    assert done.returncode == 0, done.stderr
    assert all(t.startswith("<|begin_of_text|><|user|>\n") and t.endswith("<|assistant|>\n") for t in texts)
    assert "User:" not in texts[0]
    assert "tokenizer_config.json" in stored_config(tmp_path / "r.db")["prepared"]["chat_template"]


def test_raw_chat_format_is_an_explicit_choice_and_recorded(tmp_path):
    with ScriptedServer(FAST) as server:
        done = cli("bench", server.url, "--api", "sglang", "--num-requests", "2", "--raw-chat-format",
                   "--db", str(tmp_path / "r.db"))
        texts = [b["text"] for b in server.requests_seen]
    assert done.returncode == 0, done.stderr
    assert texts[0].startswith("User: ") and texts[0].endswith("Assistant:")
    assert "--raw-chat-format" in stored_config(tmp_path / "r.db")["prepared"]["chat_template"]


def test_space_separated_goodput_and_defaults(cli_here, tmp_path):
    # vLLM's nargs='+' form parses (the run then stops at the unreachable URL, not at the flags).
    done = cli_here("bench", "http://127.0.0.1:9", "--goodput", "ttft:200", "tpot:50", "--db", str(tmp_path / "r.db"))
    assert done.returncode == 2 and "cannot reach" in done.stderr


def test_chat_messages_count_for_the_context_with_the_template(tmp_path):
    # A chat request whose rendered prompt (template tokens included) plus max_tokens overflows.
    messages = (ChatMessage(role="user", content="hi " * 20),)
    suite = Suite(name="chatlen", requests=(SuiteRequest(messages=messages, max_tokens=8),
                                            SuiteRequest(messages=(ChatMessage(role="user", content="hi"),),
                                                         max_tokens=8)))
    path = tmp_path / "chat.jsonl"
    write_suite_jsonl(suite, path)
    rendered = len(tokenizer().encode("<|begin_of_text|><|user|>\n" + "hi " * 20 + "<|end|>\n<|assistant|>\n",
                                      add_special_tokens=False).ids)
    info = {"model_path": str(TARGET), "context_length": rendered + 4}
    with ScriptedServer(FAST, server_info=info) as server:
        done = cli("bench", server.url, "--suite", str(path), "--num-requests", "2", "--db", str(tmp_path / "r.db"))
    assert done.returncode == 0, done.stderr
    assert "left out 1 of 2 prompts" in done.stdout + done.stderr


def test_custom_and_sharegpt_datasets_become_the_runs_prompts(tmp_path):
    custom = tmp_path / "custom.jsonl"
    custom.write_text('{"prompt": "hello there"}\n{"prompt": "count to ten"}\n')
    sharegpt = tmp_path / "sg.json"
    sharegpt.write_text('[{"conversations": [{"from": "human", "value": "who are you?"}, '
                        '{"from": "gpt", "value": "x"}]}]')
    with ScriptedServer(FAST) as server:
        first = cli("bench", server.url, "--backend", "openai", "--dataset-name", "custom",
                    "--dataset-path", str(custom), "--num-prompts", "4", "--db", str(tmp_path / "r.db"))
        prompts = {b["prompt"] for b in server.requests_seen}
        second = cli("bench", server.url, "--dataset-name", "sharegpt", "--dataset-path", str(sharegpt),
                     "--num-prompts", "2", "--db", str(tmp_path / "r.db"))
        messages = [b["messages"] for b in server.requests_seen[4 + 1:]]   # after the first run and its warm-up
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert prompts == {"hello there", "count to ten"}
    assert messages == [[{"role": "user", "content": "who are you?"}]] * (1 + 2)   # its warm-up and 2 measured


def test_vllms_server_and_warmup_flags(cli_here, tmp_path):
    with ScriptedServer(FAST) as server:
        host, port = server.url.removeprefix("http://").split(":")
        by_host = cli_here("bench", "--host", host, "--port", port, "--num-prompts", "2", "--num-warmups", "1",
                           "--db", str(tmp_path / "r.db"))
        by_base = cli_here("bench", "--base-url", server.url, "--num-prompts", "2", "--db", str(tmp_path / "r.db"))
        seen = len(server.requests_seen)
    assert by_host.returncode == 0 and by_base.returncode == 0, by_host.stderr + by_base.stderr
    assert seen == 2 + 1 + 2 + 1                                 # each run's warm-up request too (default 1)
    both = cli_here("bench", "http://127.0.0.1:9", "--base-url", "http://127.0.0.1:9", "--db", str(tmp_path / "x.db"))
    assert both.returncode == 2 and "give the server once" in both.stderr
