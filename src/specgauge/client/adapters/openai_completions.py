"""OpenAI ``POST /v1/completions``, streaming, with ``stream_options.include_usage``."""

from __future__ import annotations

from specgauge.client.adapters.base import Adapter, StreamState, add_chunk, finished_without_text
from specgauge.client.adapters.openai_common import parse_openai_event
from specgauge.client.prompts import prompt_text
from specgauge.client.records import RequestRecord
from specgauge.client.sampling import Sampling
from specgauge.suites.model import SuiteRequest


class OpenAICompletionsAdapter(Adapter):
    """A raw-prompt API: chat requests are rendered to text (see :func:`prompt_text`)."""

    name = "openai-completions"
    path = "/v1/completions"

    def build_body(self, request: SuiteRequest, *, model: str | None, max_tokens: int,
                   sampling: Sampling = Sampling(), tokenizer_path: str | None = None,
                   ignore_eos: bool = False) -> dict:
        body = {"prompt": prompt_text(request, tokenizer_path), "max_tokens": max_tokens,
                **sampling.fields(), "stream": True, "stream_options": {"include_usage": True}}
        if model is not None:
            body["model"] = model
        if ignore_eos:  # a top-level extra: vLLM (vllm/benchmarks/lib/endpoint_request_func.py sends it so)
            # and SGLang (CompletionRequest.ignore_eos, python/sglang/srt/entrypoints/openai/protocol.py)
            body["ignore_eos"] = True
        return body

    def on_data(self, data: str, t_ns: int, record: RequestRecord, state: StreamState) -> None:
        choice, cumulative = parse_openai_event(data, record)
        if choice is not None:
            text = choice.get("text")
            if text:
                add_chunk(record, state, t_ns, text, cumulative)
            if choice.get("finish_reason"):
                finished_without_text(record, state, t_ns, cumulative)


ADAPTER = OpenAICompletionsAdapter()
