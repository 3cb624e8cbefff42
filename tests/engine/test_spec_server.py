"""Speculation over HTTP: SGLang meta_info fields, OpenAI extra fields, counters under vLLM's and
SGLang's names consistent with the tokens streamed, server info, and the serve flags."""

import json
import re

import httpx
import pytest
from spec_testkit import make_spec_engine, write_random_head

from specgauge.engine.serving.launch import EngineProcess
from specgauge.engine.serving.app import BackgroundServer
from specgauge.engine.speculative.config import DEFAULT_DRAFT_DIR, SpeculativeConfig

from engine_testkit import wait_idle
from cli_testkit import run_cli

META_FIELDS = ("spec_verify_ct", "spec_accept_length", "spec_accept_rate", "spec_num_correct_drafts",
               "spec_num_proposed_drafts", "spec_correct_drafts_histogram")


@pytest.fixture(scope="module")
def ngram_server(tiny_model_dir):
    engine = make_spec_engine(tiny_model_dir, max_running=8, max_tokens_per_step=128,
                              speculative=SpeculativeConfig(algorithm="NGRAM", num_steps=4))
    engine.start()
    try:
        with BackgroundServer(engine) as server:
            yield server
        wait_idle(engine)  # the KV pool is whole once every request has ended
    finally:
        engine.stop()


def sse(response):
    lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(x) for x in lines[:-1]]


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def test_meta_info_openai_fields_and_counters_agree_with_the_stream(ngram_server):
    url = ngram_server.url
    prompts = ["abc abc abc abc", "def add(a, b):\n    return a + b\ndef add(", "1, 2, 1, 2, 1, 2,", "x"]
    metas = []
    for i, prompt in enumerate(prompts):
        body = {"text": prompt, "sampling_params": {"max_new_tokens": 12 + i, "temperature": 0, "ignore_eos": True}}
        if i % 2:  # streamed: the last event's meta_info carries the request's figures
            with httpx.stream("POST", url + "/generate", json=dict(body, stream=True), timeout=30) as response:
                events = sse(response)
            tokens = sum(len(e["output_ids"]) for e in events[-1:])
            meta = events[-1]["meta_info"]
        else:
            out = httpx.post(url + "/generate", json=body, timeout=30).json()
            tokens, meta = len(out["output_ids"]), out["meta_info"]
        assert set(META_FIELDS) <= set(meta)
        assert tokens == meta["completion_tokens"] == 12 + i
        # the first token comes from prefill; each verify emits its accepted drafts + 1
        assert meta["completion_tokens"] == 1 + meta["spec_verify_ct"] + meta["spec_num_correct_drafts"]
        assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / meta["spec_verify_ct"])
        assert sum(meta["spec_correct_drafts_histogram"]) == meta["spec_verify_ct"]
        assert sum(i * n for i, n in enumerate(meta["spec_correct_drafts_histogram"])) == meta["spec_num_correct_drafts"]
        metas.append(meta)
    assert sum(m["spec_num_correct_drafts"] for m in metas) > 0, "the n-gram drafter should hit on repetitive text"

    text = httpx.get(url + "/metrics").text
    assert metric(text, "vllm:spec_decode_num_accepted_tokens_total") == sum(m["spec_num_correct_drafts"] for m in metas)
    assert metric(text, "vllm:spec_decode_num_draft_tokens_total") == sum(m["spec_num_proposed_drafts"] for m in metas)
    per_pos = [metric(text, f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}}') for p in range(4)]
    assert sum(per_pos) == metric(text, "vllm:spec_decode_num_accepted_tokens_total")
    assert per_pos == sorted(per_pos, reverse=True)
    assert metric(text, "vllm:spec_decode_num_drafts_total") >= 1
    by_length = [metric(text, f'vllm:spec_decode_num_drafts_by_draft_length_total{{draft_length="{k}"}}')
                 for k in range(1, 5) if f'draft_length="{k}"' in text]
    assert by_length and sum(by_length) == metric(text, "vllm:spec_decode_num_drafts_total")   # the depth that ran
    assert metric(text, "sglang:spec_accept_length") > 1
    assert metric(text, "sglang:spec_accept_rate") == pytest.approx(
        sum(m["spec_num_correct_drafts"] for m in metas) / sum(m["spec_num_proposed_drafts"] for m in metas))
    for name in ("specgauge:spec_enabled", "specgauge:spec_num_draft_tokens",
                 "specgauge:spec_draft_time_seconds_count", "specgauge:spec_verify_time_seconds_count"):
        metric(text, name)

    info = httpx.get(url + "/server_info").json()
    state = info["internal_states"][0]
    assert info["speculative_algorithm"] == "NGRAM" and state["speculative_algorithm"] == "NGRAM"
    assert state["avg_spec_accept_length"] == pytest.approx(metric(text, "sglang:spec_accept_length"))
    assert state["speculative_mode"] in ("speculative", "plain") and state["speculative_num_draft_tokens"] == 4
    assert state["draft_time_total_s"] > 0 and state["verify_time_total_s"] > 0


def test_openai_responses_carry_spec_accept_length(ngram_server):
    url = ngram_server.url
    body = {"model": "specgauge-target", "prompt": "abc abc abc abc", "max_tokens": 10, "temperature": 0,
            "ignore_eos": True}
    out = httpx.post(url + "/v1/completions", json=body, timeout=30).json()
    assert out["spec_accept_length"] == pytest.approx(10 / out["spec_verify_ct"])
    assert out["usage"]["spec_accept_length"] == out["spec_accept_length"]
    stream = dict(body, stream=True, stream_options={"include_usage": True})
    with httpx.stream("POST", url + "/v1/completions", json=stream, timeout=30) as response:
        chunks = sse(response)
    assert chunks[-1]["usage"]["spec_accept_length"] == out["spec_accept_length"]  # same greedy request
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and "spec_accept_length" in chunks[-2]
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1]) == out["choices"][0]["text"]
    wait_idle(ngram_server.engine)


def test_serve_without_the_drafter_is_one_line_exit_2(tiny_model_dir, tmp_path):
    missing = run_cli("serve", "--model", str(tiny_model_dir), "--speculative-algorithm", "EAGLE3",
                      "--speculative-draft-model-path", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no EAGLE-3 drafter" in missing.stderr and "--speculative-draft-model-path" in missing.stderr


@pytest.mark.parametrize("spec, flag", [
    (dict(algorithm="NGRAM", eagle_topk=2), "--speculative-eagle-topk"),
    (dict(algorithm="EAGLE3", num_steps=3, num_draft_tokens=9), "--speculative-num-draft-tokens"),
    (dict(algorithm="EAGLE3", num_steps=2, eagle_topk=2, num_draft_tokens=12), "--speculative-num-draft-tokens"),
    (dict(algorithm="MEDUSA"), "--speculative-algorithm"),
])
def test_bad_speculative_settings_name_the_flag(spec, flag, tiny_model_dir):
    from specgauge.engine.core.engine import EngineConfig
    from specgauge.errors import UserError

    with pytest.raises(UserError, match=flag):
        EngineConfig(model_dir=str(tiny_model_dir), speculative=SpeculativeConfig(**spec)).validate()


def test_eagle3_serves_the_same_text_as_plain_decoding_at_temperature_0(tiny_model_dir, tmp_path, server):
    head = write_random_head(tmp_path / "head", tiny_model_dir)
    body = {"model": "specgauge-target", "prompt": "def add(a, b):", "max_tokens": 16, "temperature": 0}
    plain = httpx.post(server.url + "/v1/completions", json=body, timeout=30).json()
    assert "spec_accept_length" not in plain
    assert httpx.get(server.url + "/server_info").json()["speculative_algorithm"] is None
    flags = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(head),
             "--speculative-num-steps", "3"]
    with EngineProcess(["--model", str(tiny_model_dir), "--threads", "1", *flags]) as proc:
        out = httpx.post(proc.url + "/v1/completions", json=body, timeout=30).json()
        info = httpx.get(proc.url + "/server_info").json()
    assert out["choices"][0]["text"] == plain["choices"][0]["text"]
    assert info["speculative_algorithm"] == "EAGLE3" and info["speculative_num_draft_tokens"] == 4
    assert out["spec_accept_length"] >= 1


SHIPPED = (DEFAULT_DRAFT_DIR / "config.json").is_file() and (DEFAULT_DRAFT_DIR.parent / "target" / "config.json").is_file()


@pytest.mark.skipif(not SHIPPED, reason="the shipped target and drafter are not both built yet")
def test_eagle3_uses_the_shipped_drafter_with_no_other_flag():
    """The contract: no flag but --speculative-algorithm EAGLE3; same text as NONE at temperature 0."""
    body = {"model": "specgauge-target", "prompt": "def parse(line):", "max_tokens": 24, "temperature": 0}
    texts = []
    for algorithm in ("EAGLE3", "NONE"):
        with EngineProcess(["--model", "specgauge-8m", "--speculative-algorithm", algorithm, "--threads", "1"]) as proc:
            info = httpx.get(proc.url + "/server_info").json()
            texts.append(httpx.post(proc.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"])
        if algorithm == "EAGLE3":
            assert info["speculative_draft_model_path"] == str(DEFAULT_DRAFT_DIR)
    assert texts[0] == texts[1]


def test_a_seeded_sampled_request_repeats_under_rejection_sampling(ngram_server):
    # compare's repeatable runs: the request's own seed drives the rejection sampler too
    def text(seed: int) -> str:
        body = {"prompt": "a b a b a b a b", "max_tokens": 24, "temperature": 0.9, "top_p": 0.95, "seed": seed,
                "ignore_eos": True}
        return httpx.post(ngram_server.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]

    first = text(11)
    assert text(11) == first and any(text(s) != first for s in (12, 13, 14))
