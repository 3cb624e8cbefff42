"""OpenAI ``POST /v1/completions``, streaming, with ``stream_options.include_usage``."""

from __future__ import annotations

from specgauge.client.adapters.base import Adapter, StreamState, add_chunk
from specgauge.client.adapters.openai_common import parse_openai_event
from specgauge.client.prompts import prompt_text
from specgauge.client.records import RequestRecord
from specgauge.suites.model import SuiteRequest


class OpenAICompletionsAdapter(Adapter):
    """A raw-prompt API: chat requests are rendered to text (see :func:`prompt_text`)."""

    name = "openai-completions"
    path = "/v1/completions"

    def build_body(self, request: SuiteRequest, *, model: str | None, max_tokens: int,
                   temperature: float, tokenizer_path: str | None = None) -> dict:
        body = {"prompt": prompt_text(request, tokenizer_path), "max_tokens": max_tokens,
                "temperature": temperature, "stream": True, "stream_options": {"include_usage": True}}
        if model is not None:
            body["model"] = model
        return body

    def on_data(self, data: str, t_ns: int, record: RequestRecord, state: StreamState) -> None:
        choice, cumulative = parse_openai_event(data, record)
        if choice is not None:
            text = choice.get("text")
            if text:
                add_chunk(record, state, t_ns, text, cumulative)


ADAPTER = OpenAICompletionsAdapter()
