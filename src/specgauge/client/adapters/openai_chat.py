"""OpenAI ``POST /v1/chat/completions``, streaming, with ``stream_options.include_usage``."""

from __future__ import annotations

from specgauge.client.adapters.base import Adapter, StreamState, add_chunk, finished_without_text
from specgauge.client.adapters.openai_common import parse_openai_event
from specgauge.client.records import RequestRecord
from specgauge.client.sampling import Sampling
from specgauge.suites.model import SuiteRequest


class OpenAIChatAdapter(Adapter):
    """Chat messages as they are; a raw ``prompt`` request becomes one user message.
    Content is ``delta.content``, with ``delta.reasoning_content``/``reasoning`` counted too, and
    streamed ``tool_calls`` arguments when a chunk carries nothing else."""

    name = "openai-chat"
    path = "/v1/chat/completions"

    def build_body(self, request: SuiteRequest, *, model: str | None, max_tokens: int,
                   sampling: Sampling = Sampling(), tokenizer_path: str | None = None,
                   ignore_eos: bool = False) -> dict:
        if request.messages is not None:
            messages = [{"role": m.role, "content": m.content} for m in request.messages]
        else:
            messages = [{"role": "user", "content": request.prompt}]
        body = {"messages": messages, "max_tokens": max_tokens, **sampling.fields(),
                "stream": True, "stream_options": {"include_usage": True}}
        if model is not None:
            body["model"] = model
        if ignore_eos:  # a top-level extra: vLLM (vllm/benchmarks/lib/endpoint_request_func.py sends it so)
            # and SGLang (CompletionRequest.ignore_eos, python/sglang/srt/entrypoints/openai/protocol.py)
            body["ignore_eos"] = True
        return body

    def on_data(self, data: str, t_ns: int, record: RequestRecord, state: StreamState) -> None:
        choice, cumulative = parse_openai_event(data, record)
        if choice is None:
            return
        delta = choice.get("delta")
        if delta:
            text = delta.get("content") or ""
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                text = reasoning + text
            if not text and delta.get("tool_calls"):  # streamed tool-call arguments are output too
                text = "".join(str((call.get("function") or {}).get("arguments") or "")
                               for call in delta["tool_calls"] if isinstance(call, dict))
            if text:
                add_chunk(record, state, t_ns, text, cumulative)
        if choice.get("finish_reason"):
            finished_without_text(record, state, t_ns, cumulative)


ADAPTER = OpenAIChatAdapter()
