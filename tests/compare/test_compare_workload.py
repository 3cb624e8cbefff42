"""``compare`` with the peer flag names, prompts left out for the servers' context (said in the
terminal), and the error classes of points with errors."""

import json
import subprocess
import sys
from pathlib import Path

from specgauge.suites.model import Suite, SuiteRequest, write_suite_jsonl
from specgauge.testing.scripted_server import Script, ScriptedServer

TARGET = Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets" / "target"
FAST = Script(ttft_s=0.003, chunk_delay_s=0.002, num_chunks=4, tokens_per_chunk=2)


def test_compare_with_peer_flags_leaves_out_what_cannot_fit_and_says_so(tmp_path):
    long = " ".join(["word"] * 300)
    prompts = ["Name a prime.", long, "Name a colour.", "[[fault:http_error]] Name a fruit."]
    suite = Suite(name="fit", requests=tuple(SuiteRequest(prompt=p, max_tokens=8, domain="coding") for p in prompts))
    path = tmp_path / "fit.jsonl"
    write_suite_jsonl(suite, path)
    info = {"model_path": str(TARGET), "context_length": 64}
    with ScriptedServer(FAST, server_info=info) as baseline, ScriptedServer(FAST, server_info=info) as speculative:
        done = subprocess.run([sys.executable, "-m", "specgauge", "compare", "--baseline", baseline.url,
                               "--speculative", speculative.url, "--backend", "vllm", "--suite", str(path),
                               "--concurrency", "1,8", "--max-concurrency", "2", "--num-prompts", "6",
                               "--single-stream-requests", "3", "--ignore-eos", "--warmup", "0", "--resamples", "200",
                               "--output-json", str(tmp_path / "v.json"), "--db", str(tmp_path / "c.db")],
                              capture_output=True, text=True, timeout=180)
        bodies = baseline.requests_seen + speculative.requests_seen
    assert done.returncode == 0, done.stderr
    assert "left out 1 of 4 prompts" in done.stdout and "64-token context" in done.stdout
    assert "errors: baseline" in done.stdout and "http_5xx" in done.stdout
    assert all("prompt" in b and b["ignore_eos"] is True for b in bodies)   # vllm backend: /v1/completions
    assert not any(b["prompt"].startswith("word") for b in bodies)
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["settings"]["api"] == "openai-completions" and verdict["settings"]["concurrency"] == [1, 2]
