"""What every endpoint adapter does: build the request body, read one event into the record.

An adapter is stateless; per-request parse state lives in a :class:`StreamState`. ``on_data`` is on
the hot path (called for every SSE event): it parses only the fields it needs.
"""

from __future__ import annotations

from specgauge.client.records import ErrorClass, RequestRecord
from specgauge.client.sampling import Sampling
from specgauge.suites.model import SuiteRequest


class EventError(Exception):
    """A bad event: ``send_request`` turns it into ``record.fail(error_class, message)``."""

    def __init__(self, error_class: ErrorClass, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class StreamState:
    """Per-request parse state: the text of each content chunk and the server's cumulative
    output-token count after it (None where the server gave none)."""

    __slots__ = ("chunk_texts", "cumulative_tokens", "done", "events", "raw_texts", "text_mode")

    def __init__(self) -> None:
        self.chunk_texts: list[str] = []
        self.cumulative_tokens: list[int | None] = []
        self.done = False             # saw [DONE]
        self.events = 0               # data events seen (any kind)
        self.raw_texts: list[str] = []  # SGLang: the first events' `text` as sent (see text_delta)
        self.text_mode: str | None = None  # SGLang: "cumulative" | "incremental" | "rebuilt"


def server_error_message(obj: dict) -> str | None:
    """The message of an in-stream error event (``{"error": ...}`` or ``{"object": "error"}``)."""
    error = obj.get("error")
    if error is None and obj.get("object") != "error":
        return None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if error is not None:
        return str(error)
    return str(obj.get("message") or obj)


def add_chunk(record: RequestRecord, state: StreamState, t_ns: int, text: str,
              cumulative_tokens: int | None) -> None:
    """Append one content-bearing chunk (its arrival time, its text, the server's running count)."""
    record.chunk_times_ns.append(t_ns)
    state.chunk_texts.append(text)
    state.cumulative_tokens.append(cumulative_tokens)


def finished_without_text(record: RequestRecord, state: StreamState, t_ns: int,
                          cumulative_tokens: int | None) -> None:
    """A finishing event before any text (an immediate ``stop``: the one token was EOS, which has no
    text) is the response's first token: count it as a chunk with empty text, as vLLM's and
    SGLang's clients do, so the request is a valid short completion with a TTFT, not an error."""
    if not record.chunk_times_ns:
        add_chunk(record, state, t_ns, "", cumulative_tokens)


SPEC_FIELDS = (("spec_verify_ct", int), ("spec_accept_length", float), ("spec_accept_rate", float))


def copy_spec_fields(src: dict, record: RequestRecord) -> None:
    """Per-request speculation figures a server reports under these names (SGLang ``meta_info``,
    OpenAI-compatible extras): ``spec_verify_ct``, ``spec_accept_length``, ``spec_accept_rate``."""
    for name, kind in SPEC_FIELDS:
        value = src.get(name)
        if value is not None:
            setattr(record, name, kind(value))


def copy_token_counts(src: dict, record: RequestRecord) -> int | None:
    """``prompt_tokens``, prefix-cache hits and (cumulative) ``completion_tokens`` from OpenAI
    ``usage`` or SGLang ``meta_info``; returns the completion count (None when absent).

    Prefix-cache hits: SGLang's ``/generate`` puts ``cached_tokens`` in every ``meta_info``
    (``python/sglang/srt/managers/tokenizer_manager.py``, 2f14d6c); the OpenAI routes carry
    ``usage.prompt_tokens_details.cached_tokens`` — vLLM only when started with
    ``--enable-prompt-tokens-details`` (``_make_prompt_tokens_details`` in
    ``vllm/entrypoints/openai/chat_completion/serving.py``), SGLang only with ``--enable-cache-report``
    and then only when non-zero (``python/sglang/srt/entrypoints/openai/usage_processor.py``)."""
    prompt = src.get("prompt_tokens")
    if prompt is not None:
        record.prompt_tokens = prompt
    cached = src.get("cached_tokens")
    details = src.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        cached = details["cached_tokens"]
    if isinstance(cached, int) and not isinstance(cached, bool):
        record.cached_tokens = cached
    completion = src.get("completion_tokens")
    if completion is not None:
        record.output_tokens = completion
    return completion


def bad_event(data: str) -> EventError:
    return EventError(ErrorClass.BAD_JSON, f"event is not the JSON object the API promises: {data[:200]!r}")


class Adapter:
    """Base class: subclasses set ``name``, ``path`` and implement the two methods."""

    name = ""
    path = ""

    def build_body(self, request: SuiteRequest, *, model: str | None, max_tokens: int,
                   sampling: Sampling = Sampling(), tokenizer_path: str | None = None,
                   ignore_eos: bool = False) -> dict:
        """The JSON body for ``request`` (streaming on) with ``sampling``'s fields
        (:mod:`specgauge.client.sampling`); ``ignore_eos`` asks the server to generate exactly
        ``max_tokens`` (sent only when true)."""
        raise NotImplementedError

    def on_data(self, data: str, t_ns: int, record: RequestRecord, state: StreamState) -> None:
        """Read one SSE event's data (``[DONE]`` already handled) into ``record``/``state``."""
        raise NotImplementedError
