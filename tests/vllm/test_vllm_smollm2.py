"""SmolLM2-135M-Instruct and its own EAGLE-3 drafter in a real vLLM (``make vllm`` lays the pair
out): the drafter loads and drafts, specgauge's acceptance is vLLM's own counters, and vLLM accepts
as the embedded engine does on the same prompts at temperature 0 — within 10% (the drafter's
``eagle_aux_hidden_state_layer_ids`` mean the same target layers in both; vLLM computes in float32,
the engine in its default dtype, so the two chains may part at a near-tie)."""
from __future__ import annotations

import json
import sys

import pytest
from vllm_testkit import counter, launched, metrics, specgauge, vllm_setup

from specgauge.shipped_models import get_shipped
from specgauge.vllm_setup.serve import EAGLE3_DEPTH

MODEL = get_shipped("smollm2-135m")
pytestmark = pytest.mark.vllm
BENCH = ("--api", "openai-chat", "--suite", "coding", "--max-tokens", "64", "--num-requests", "8",
         "--concurrency", "1", "--warmup", "0")


def bench_point(url: str, tmp_path, name: str) -> dict:
    out = tmp_path / f"{name}.json"
    result = specgauge("bench", url, *BENCH, "--output-json", str(out), "--db", str(tmp_path / f"{name}.db"))
    assert result.returncode == 0, result.stderr[-4000:]
    point = json.loads(out.read_text())["points"][0]
    assert point["num_errors"] == 0 and point["num_ok"] == 8
    return point


def test_vllm_accepts_the_smollm2_drafter_as_the_engine_does(tmp_path):
    setup = vllm_setup(MODEL)
    with launched(setup.argv("eagle3", "{port}"), tmp_path / "vllm-logs") as server:
        before = metrics(server.url)
        vllm = bench_point(server.url, tmp_path, "vllm")
        after = metrics(server.url)
    drafts = counter(after, "vllm:spec_decode_num_drafts_total") - counter(before, "vllm:spec_decode_num_drafts_total")
    accepted = (counter(after, "vllm:spec_decode_num_accepted_tokens_total")
                - counter(before, "vllm:spec_decode_num_accepted_tokens_total"))
    assert drafts > 0 and accepted > 0
    assert vllm["server_spec"]["accept_length"] == pytest.approx(1 + accepted / drafts)
    # The same chain in the engine: EAGLE3_DEPTH drafted tokens a step, one path (SGLang's flags).
    engine_argv = [sys.executable, "-m", "specgauge", "serve", "--model", MODEL.name, "--speculative-algorithm",
                   "EAGLE3", "--speculative-num-steps", str(EAGLE3_DEPTH), "--speculative-eagle-topk", "1",
                   "--speculative-num-draft-tokens", str(EAGLE3_DEPTH + 1), "--port", "{port}"]
    with launched(engine_argv, tmp_path / "engine-logs") as server:
        engine = bench_point(server.url, tmp_path, "engine")
    ours, theirs = engine["server_spec"]["accept_length"], vllm["server_spec"]["accept_length"]
    print(f"acceptance length at depth {EAGLE3_DEPTH}: engine {ours:.3f}, vLLM {theirs:.3f}")
    assert theirs == pytest.approx(ours, rel=0.10)
