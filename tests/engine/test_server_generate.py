"""SGLang-native /generate, server info and metrics."""

import json

import httpx
import pytest

from specgauge.engine.models.linear import onednn_packing_supported
from specgauge.engine.serving.app import BackgroundServer, ServerSettings


def sse_events(response):
    events = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            events.append(line[len("data: "):])
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_generate_non_streaming_fields(server):
    body = {"text": "def add", "sampling_params": {"max_new_tokens": 9, "temperature": 0, "ignore_eos": True}}
    out = httpx.post(server.url + "/generate", json=body, timeout=30).json()
    meta = out["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 9}
    assert meta["completion_tokens"] == 9 and len(out["output_ids"]) == 9
    assert meta["prompt_tokens"] == len(server.engine.tokenizer.encode("def add"))
    assert meta["e2e_latency"] > 0 and meta["id"]
    assert out["text"] == server.engine.tokenizer.decode(out["output_ids"])


def test_generate_stream_text_is_cumulative_by_default(server):
    body = {"input_ids": [10, 20, 30], "stream": True, "rid": "my-rid",
            "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}
    with httpx.stream("POST", server.url + "/generate", json=body, timeout=30) as response:
        events = sse_events(response)
    texts = [e["text"] for e in events]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    counts = [e["meta_info"]["completion_tokens"] for e in events]
    assert counts == sorted(counts) and counts[-1] == 8
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1])
    assert events[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert {e["meta_info"]["id"] for e in events} == {"my-rid"}


@pytest.fixture
def incremental_server(engine):
    with BackgroundServer(engine, ServerSettings(incremental_streaming_output=True)) as srv:
        yield srv


def test_generate_incremental_streaming_flag(server, incremental_server):
    body = {"text": "The quick", "stream": True,
            "sampling_params": {"max_new_tokens": 10, "temperature": 0, "ignore_eos": True}}
    with httpx.stream("POST", incremental_server.url + "/generate", json=body, timeout=30) as response:
        pieces = sse_events(response)
    with httpx.stream("POST", server.url + "/generate", json=body, timeout=30) as response:
        cumulative = sse_events(response)
    assert "".join(p["text"] for p in pieces) == cumulative[-1]["text"]
    assert sum(len(p["output_ids"]) for p in pieces) == 10


def test_server_info_health_and_metrics(server):
    for route in ("/server_info", "/get_server_info"):
        info = httpx.get(server.url + route).json()
        state = info["internal_states"][0]
        assert state["kv_blocks_total"] == server.engine.blocks.num_blocks
        assert "avg_spec_accept_length" in state
        assert info["batch_invariant"] is server.engine.model.batch_invariant
        assert info["paged_attention"] == server.engine.model.attention_path  # "in-place paged" or "gather (why)"
        assert info["dtype"] in ("float32", "bfloat16")
        # fp32-trained weights stay dense in fp32; bf16 compute reorders them for oneDNN where it can
        expected = "onednn" if info["dtype"] == "bfloat16" and onednn_packing_supported() else "none"
        assert info["weight_packing"] == server.engine.model.weight_packing == expected
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    httpx.post(server.url + "/generate", json={"text": "a", "sampling_params": {"max_new_tokens": 3}}, timeout=30)
    text = httpx.get(server.url + "/metrics").text
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:prompt_tokens_total",
                 "vllm:generation_tokens_total", "vllm:request_success_total", "specgauge:step_time_seconds_bucket"):
        assert name in text, name
    generated = [line for line in text.splitlines() if line.startswith("vllm:generation_tokens_total")]
    assert float(generated[0].split()[-1]) >= 3
