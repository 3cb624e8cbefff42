"""Pure payload builders: a request's fields → engine parameters, engine events → response JSON.

No I/O and no server state: every figure a payload carries comes in as an argument, so each
builder is tested on its own (tests/engine/test_server_payloads.py). Field names follow OpenAI's
API and SGLang's ``/generate`` (``meta_info``) and ``/server_info``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.serving.errors import APIError
from specgauge.speculation_schedule import compact_form

if TYPE_CHECKING:
    from specgauge.engine.core.engine import EngineConfig, StreamEvent
    from specgauge.engine.speculative.config import SpeculativeConfig

DEFAULT_COMPLETION_TOKENS = 16   # OpenAI's /v1/completions default for max_tokens


def sse(payload: dict | str) -> bytes:
    """One server-sent event (orjson: the per-chunk cost matters at 64 streams on a small CPU)."""
    data = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
    return b"data: " + data + b"\n\n"


# -- request → engine parameters -------------------------------------------------------------

def check_prompt(prompt_ids: list[int], param: str, vocab_size: int, max_model_len: int) -> None:
    """Raise a 400 naming ``param`` when the prompt is empty, holds an id outside the vocabulary,
    or leaves no room for a new token in the context."""
    if not prompt_ids:
        raise APIError(400, f"{param}: the prompt is empty", param=param, code="invalid_value")
    if any(not 0 <= t < vocab_size for t in prompt_ids):
        raise APIError(400, f"{param}: token ids must lie in [0, {vocab_size})", param=param, code="invalid_value")
    if len(prompt_ids) >= max_model_len:
        raise APIError(400, f"{param}: the prompt has {len(prompt_ids)} tokens; this model's context is "
                       f"{max_model_len} tokens", param=param, code="context_length_exceeded")


def resolve_max_tokens(prompt_length: int, asked: int | None, default: int | None, param: str,
                       max_model_len: int) -> int:
    """How many tokens to generate: ``asked`` if it fits the context (else a 400 naming ``param``),
    or ``default`` capped at the room left, or all the room left."""
    room = max_model_len - prompt_length
    if asked is None:
        return min(default, room) if default else room
    if asked > room:
        raise APIError(400, f"{param}: {asked} new tokens after a {prompt_length}-token prompt exceed the "
                       f"context of {max_model_len} tokens", param=param, code="context_length_exceeded")
    return asked


def openai_token_request(body, chat: bool) -> tuple[int | None, int | None, str]:
    """(tokens asked, default, the field that asked) of an OpenAI completion or chat body."""
    if chat:
        param = "max_completion_tokens" if body.max_completion_tokens else "max_tokens"
        return body.max_completion_tokens or body.max_tokens, None, param
    return body.max_tokens, DEFAULT_COMPLETION_TOKENS, "max_tokens"


def sampling_params(body, max_tokens: int) -> SamplingParams:
    """The engine's sampling parameters from an OpenAI body or SGLang's ``sampling_params``."""
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    return SamplingParams(max_tokens=max_tokens, temperature=body.temperature, top_p=body.top_p,
                          top_k=body.top_k, seed=body.seed, stop=tuple(s for s in stop if s),
                          stop_token_ids=frozenset(body.stop_token_ids or ()), ignore_eos=body.ignore_eos)


# -- engine events → OpenAI JSON --------------------------------------------------------------

def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    """OpenAI's ``usage`` object."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def spec_fields(event: StreamEvent) -> dict:
    """Per-request speculation figures (SGLang's ``meta_info`` names: ``spec_verify_ct``,
    ``spec_accept_length`` ...); empty while speculation is off."""
    return dict(event.spec) if event.spec is not None else {}


def openai_spec_fields(event: StreamEvent) -> dict:
    """What OpenAI responses carry: ``spec_accept_length`` and ``spec_verify_ct`` (extensions)."""
    if event.spec is None:
        return {}
    return {"spec_accept_length": event.spec["spec_accept_length"], "spec_verify_ct": event.spec["spec_verify_ct"]}


def error_body(event: StreamEvent) -> dict:
    """The error a stream sends when the engine failed its request."""
    return APIError(500, event.error or "request failed", code="engine_error", error_type="server_error").body()


def openai_head(response_id: str, chat: bool, created: int, model: str) -> dict:
    """The fields every OpenAI chunk (and the streaming object type) share."""
    return {"id": response_id, "object": "chat.completion.chunk" if chat else "text_completion",
            "created": created, "model": model}


def openai_response(head: dict, chat: bool, text: str, last: StreamEvent, prompt_tokens: int) -> dict:
    """A whole (non-streaming) completion or chat completion."""
    choice = {"index": 0, "finish_reason": last.finish_reason, "logprobs": None}
    choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
    out = dict(head, object="chat.completion" if chat else "text_completion", choices=[choice],
               usage=usage(prompt_tokens, last.completion_tokens))
    out.update(openai_spec_fields(last))
    out["usage"].update(openai_spec_fields(last))
    return out


def openai_role_chunk(head: dict) -> dict:
    """A chat stream's first chunk: the assistant's role, no content yet."""
    return dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "logprobs": None, "finish_reason": None}])


def openai_chunk(head: dict, chat: bool, event: StreamEvent, prompt_tokens: int,
                 continuous_usage: bool) -> dict | None:
    """The chunk for one event; None for an event with no text that does not finish."""
    if not event.text_delta and not event.finished:
        return None
    delta = {"content": event.text_delta} if event.text_delta else {}
    choice = {"index": 0, "logprobs": None, "finish_reason": event.finish_reason if event.finished else None}
    choice.update({"delta": delta} if chat else {"text": event.text_delta})
    chunk = dict(head, choices=[choice], completion_tokens=event.completion_tokens)
    if continuous_usage:
        chunk["usage"] = usage(prompt_tokens, event.completion_tokens)
    if event.finished:
        chunk.update(openai_spec_fields(event))
    return chunk


def openai_usage_chunk(head: dict, last: StreamEvent, prompt_tokens: int) -> dict:
    """The closing chunk of ``stream_options.include_usage``: no choices, the usage."""
    return dict(head, choices=[], usage={**usage(prompt_tokens, last.completion_tokens), **openai_spec_fields(last)})


def model_card(served_model_name: str, max_model_len: int) -> dict:
    """One entry of ``/v1/models``."""
    return {"id": served_model_name, "object": "model", "created": 0, "owned_by": "specgauge",
            "max_model_len": max_model_len}


# -- engine events → SGLang JSON ---------------------------------------------------------------

def finish_reason(event: StreamEvent, max_new_tokens: int) -> dict | None:
    """SGLang's ``meta_info.finish_reason`` (None until the request finishes)."""
    if not event.finished:
        return None
    if event.finish_reason == "length":
        return {"type": "length", "length": max_new_tokens}
    if event.finish_reason == "stop":
        return {"type": "stop", "matched": event.matched_stop}
    return {"type": "abort", "message": event.error or event.finish_reason}


def meta_info(public_id: str, prompt_tokens: int, event: StreamEvent, max_new_tokens: int,
              e2e_latency: float) -> dict:
    """SGLang's ``meta_info`` for ``event`` (per-request speculation figures included)."""
    info = {"id": public_id, "finish_reason": finish_reason(event, max_new_tokens), "prompt_tokens": prompt_tokens,
            "completion_tokens": event.completion_tokens, "cached_tokens": 0, "e2e_latency": e2e_latency}
    info.update(spec_fields(event))
    return info


def generate_payload(text: str, output_ids: list[int], meta: dict) -> dict:
    """A ``/generate`` response or stream chunk."""
    return {"text": text, "output_ids": output_ids, "meta_info": meta}


def speculative_settings(spec: SpeculativeConfig) -> dict:
    """The ``speculative_*`` server arguments SGLang reports (empty while speculation is off)."""
    if not spec.enabled:
        return {}
    return {"speculative_num_steps": spec.num_steps, "speculative_eagle_topk": spec.eagle_topk,
            "speculative_num_draft_tokens": spec.draft_tokens,
            "speculative_draft_model_path": str(spec.draft_dir) if spec.algorithm == "EAGLE3" else None,
            "speculative_disable_above": spec.disable_above, "speculative_adaptive": spec.adaptive,
            "speculative_schedule": compact_form(list(spec.schedule)) if spec.schedule else None}


def server_info(version: str, cfg: EngineConfig, served_model_name: str, incremental_streaming_output: bool,
                weight_packing: str, batch_invariant: bool, snapshot: dict, attention_path: str = "") -> dict:
    """``/server_info``: the settings, and the engine's ``internal_states`` (``snapshot``)."""
    return {"version": version, "model_path": cfg.model_dir, "served_model_name": served_model_name,
            "device": cfg.device, "dtype": str(cfg.torch_dtype).removeprefix("torch."),
            "weight_packing": weight_packing,
            # every token's logits are the same bits whatever shares its step (see docs/engine.md)
            "batch_invariant": batch_invariant,
            # how decode/verify attention reads the paged KV pool: "in-place paged", or "gather (why)"
            "paged_attention": attention_path,
            "max_running_requests": cfg.scheduler.max_running, "max_waiting_requests": cfg.scheduler.max_waiting,
            "incremental_streaming_output": incremental_streaming_output,
            "speculative_algorithm": cfg.speculative.algorithm if cfg.speculative.enabled else None,
            **speculative_settings(cfg.speculative), "internal_states": [snapshot]}
