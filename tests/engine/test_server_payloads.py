"""The server's pure payload builders, without a server: request fields → engine parameters,
engine events → OpenAI and SGLang JSON (specgauge.engine.serving.payloads)."""

from __future__ import annotations

import json

import pytest

from specgauge.engine.core.engine import StreamEvent
from specgauge.engine.serving.protocol import ChatCompletionRequest, CompletionRequest, GenerateRequest
from specgauge.engine.serving import payloads
from specgauge.engine.serving.errors import APIError
from specgauge.engine.speculative.config import SpeculativeConfig

SPEC = {"spec_verify_ct": 3, "spec_accept_length": 2.5, "spec_accept_rate": 0.5}
HEAD = payloads.openai_head("cmpl-x", chat=False, created=7, model="m")
CHAT_HEAD = payloads.openai_head("chatcmpl-x", chat=True, created=7, model="m")


def event(text="", tokens=(), completion_tokens=1, finished=False, finish_reason=None, matched_stop=None,
          error=None, spec=None) -> StreamEvent:
    return StreamEvent("auto:x", text, tuple(tokens), 4, completion_tokens, finished, finish_reason, matched_stop,
                       error, spec)


def test_sse_frames_json_and_done():
    assert payloads.sse("[DONE]") == b"data: [DONE]\n\n"
    framed = payloads.sse({"a": [1, "é"]})
    assert framed.startswith(b"data: ") and framed.endswith(b"\n\n")
    assert json.loads(framed[len(b"data: "):-2]) == {"a": [1, "é"]}


def test_sampling_params_from_openai_and_sglang_bodies():
    body = CompletionRequest(prompt="x", stop="\n", stop_token_ids=[5, 5, 7], temperature=0.5, seed=3)
    params = payloads.sampling_params(body, max_tokens=9)
    assert (params.max_tokens, params.stop, params.stop_token_ids) == (9, ("\n",), frozenset({5, 7}))
    assert (params.temperature, params.seed) == (body.temperature, body.seed)
    sglang = GenerateRequest(text="x", sampling_params={"stop": ["", "end"], "max_new_tokens": 4}).sampling_params
    assert payloads.sampling_params(sglang, max_tokens=4).stop == ("end",)  # empty stop strings dropped


def test_token_budget_fits_the_context():
    assert payloads.resolve_max_tokens(10, None, 16, "max_tokens", max_model_len=100) == 16
    assert payloads.resolve_max_tokens(90, None, 16, "max_tokens", max_model_len=100) == 10   # default capped
    assert payloads.resolve_max_tokens(10, None, None, "max_tokens", max_model_len=100) == 90  # all the room
    assert payloads.resolve_max_tokens(10, 90, None, "max_tokens", max_model_len=100) == 90
    with pytest.raises(APIError) as caught:
        payloads.resolve_max_tokens(10, 91, None, "max_completion_tokens", max_model_len=100)
    assert (caught.value.status, caught.value.param, caught.value.code) == (
        400, "max_completion_tokens", "context_length_exceeded")


@pytest.mark.parametrize("prompt, code", [([], "invalid_value"), ([3, 50], "invalid_value"),
                                          ([1] * 20, "context_length_exceeded")])
def test_bad_prompts_are_refused_naming_the_field(prompt, code):
    with pytest.raises(APIError) as caught:
        payloads.check_prompt(prompt, "input_ids", vocab_size=50, max_model_len=20)
    assert (caught.value.status, caught.value.param, caught.value.code) == (400, "input_ids", code)
    assert caught.value.message.startswith("input_ids: ")


def test_chat_asks_max_completion_tokens_first():
    chat = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=5, max_completion_tokens=3)
    assert payloads.openai_token_request(chat, chat=True) == (3, None, "max_completion_tokens")
    plain = ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    assert payloads.openai_token_request(plain, chat=True) == (5, None, "max_tokens")
    asked, default, param = payloads.openai_token_request(CompletionRequest(prompt="x"), chat=False)
    assert (asked, default, param) == (None, payloads.DEFAULT_COMPLETION_TOKENS, "max_tokens")


def test_whole_openai_response_carries_usage_and_spec_fields():
    last = event(completion_tokens=6, finished=True, finish_reason="stop", spec=SPEC)
    out = payloads.openai_response(CHAT_HEAD, True, "hello", last, prompt_tokens=4)
    assert out["object"] == "chat.completion"
    assert out["choices"] == [{"index": 0, "finish_reason": "stop", "logprobs": None,
                               "message": {"role": "assistant", "content": "hello"}}]
    assert out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"]
    for where in (out, out["usage"]):
        assert {k: where[k] for k in ("spec_accept_length", "spec_verify_ct")} == {
            "spec_accept_length": SPEC["spec_accept_length"], "spec_verify_ct": SPEC["spec_verify_ct"]}
    assert "spec_accept_rate" not in out   # OpenAI responses carry two of SGLang's figures
    plain = payloads.openai_response(HEAD, False, "hello", event(finished=True, finish_reason="length"), 4)
    assert plain["object"] == "text_completion" and plain["choices"][0]["text"] == "hello"
    assert "spec_verify_ct" not in plain   # speculation off: no spec fields


def test_openai_chunks():
    assert payloads.openai_chunk(HEAD, False, event(), 4, continuous_usage=False) is None   # nothing to say
    chunk = payloads.openai_chunk(CHAT_HEAD, True, event("ab", completion_tokens=2), 4, continuous_usage=True)
    assert chunk["choices"] == [{"index": 0, "logprobs": None, "finish_reason": None, "delta": {"content": "ab"}}]
    assert chunk["usage"] == payloads.usage(4, 2) and chunk["object"] == "chat.completion.chunk"
    final = payloads.openai_chunk(HEAD, False, event(finished=True, finish_reason="length", spec=SPEC), 4, False)
    assert final["choices"][0] == {"index": 0, "logprobs": None, "finish_reason": "length", "text": ""}
    assert final["spec_verify_ct"] == SPEC["spec_verify_ct"] and "usage" not in final
    role = payloads.openai_role_chunk(CHAT_HEAD)["choices"][0]
    assert role["delta"] == {"role": "assistant", "content": ""}
    closing = payloads.openai_usage_chunk(HEAD, event(completion_tokens=3, finished=True, spec=SPEC), 4)
    assert closing["choices"] == [] and closing["usage"]["completion_tokens"] == 3
    assert closing["usage"]["spec_accept_length"] == SPEC["spec_accept_length"]


@pytest.mark.parametrize("finished, reason, matched, error, expected", [
    (False, None, None, None, None),
    (True, "length", None, None, {"type": "length", "length": 12}),
    (True, "stop", "\n", None, {"type": "stop", "matched": "\n"}),
    (True, "stop", 2, None, {"type": "stop", "matched": 2}),
    (True, "error", None, "boom", {"type": "abort", "message": "boom"}),
    (True, "abort", None, None, {"type": "abort", "message": "abort"}),
])
def test_sglang_finish_reason(finished, reason, matched, error, expected):
    assert payloads.finish_reason(event(finished=finished, finish_reason=reason, matched_stop=matched,
                                        error=error), max_new_tokens=12) == expected


def test_sglang_meta_info_and_generate_payload():
    meta = payloads.meta_info("r1", 4, event(completion_tokens=5, spec=SPEC), 12, e2e_latency=0.25)
    assert {k: meta[k] for k in ("id", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency")} == {
        "id": "r1", "prompt_tokens": 4, "completion_tokens": 5, "cached_tokens": 0, "e2e_latency": 0.25}
    assert {k: meta[k] for k in SPEC} == SPEC   # every SGLang speculation figure
    assert payloads.generate_payload("t", [1], meta) == {"text": "t", "output_ids": [1], "meta_info": meta}


def test_error_body_is_openai_style():
    body = payloads.error_body(event(finished=True, finish_reason="error", error="engine failed"))
    assert body == {"error": {"message": "engine failed", "type": "server_error", "param": None,
                              "code": "engine_error"}}


def test_speculative_settings():
    assert payloads.speculative_settings(SpeculativeConfig()) == {}
    ngram = payloads.speculative_settings(SpeculativeConfig(algorithm="NGRAM", num_steps=3))
    assert ngram["speculative_num_steps"] == 3
    assert ngram["speculative_num_draft_tokens"] == 3 + 1   # chain: the steps and the root
    assert ngram["speculative_draft_model_path"] is None     # only EAGLE-3 has a draft model
