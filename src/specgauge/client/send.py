"""``send_request``: one streamed request, timed, parsed, and classified — never raising.

The request goes over specgauge's own HTTP/1.1 transport (:mod:`specgauge.client.http_exchange`,
an ``asyncio.Protocol`` parsed by ``httptools``). Timestamps are ``time.perf_counter_ns()``:
``t_send_ns`` right before the request's bytes are handed to the socket, ``t_headers_ns`` when
the response headers were parsed, and for each read that completed a content-bearing event its
arrival, stamped in the connection's ``data_received`` before any parsing (``chunk_times_ns``;
events that arrive in the same read share its time). The SSE decoder and the adapter run inside
that same callback: no task wakes up per read.

Every fault ends up as ``record.error_class`` / ``record.error_message``; only cancellation
propagates (the record is marked ``cancelled`` first).
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from time import perf_counter_ns

import orjson

from specgauge.client.adapters import EventError, StreamState, get_adapter
from specgauge.client.connection_pool import Origin, origin_of
from specgauge.client.endpoint import Endpoint, Timeouts, request_headers
from specgauge.client.http_connection import TransportError
from specgauge.client.http_exchange import exchange
from specgauge.client.records import ErrorClass, RequestRecord
from specgauge.client.sampling import Sampling
from specgauge.client.session import StreamSession
from specgauge.client.sse import DONE, SSEDecoder, SSEEvent
from specgauge.client.tokens import assign_chunk_tokens
from specgauge.suites.model import SuiteRequest

# SGLang's OpenAI routes return per-request speculation details when asked:
# ``ChatCompletionRequest.return_spec_tokens_details`` / ``CompletionRequest.return_spec_tokens_details``
# (python/sglang/srt/entrypoints/openai/protocol.py) put ``sglext.spec_tokens_details`` on the
# response, built by ``spec_tokens_details_from_meta_info`` (python/sglang/srt/entrypoints/openai/utils.py).
SPEC_DETAILS_APIS = ("openai-chat", "openai-completions")

ERROR_BODY_BYTES = 2000


@lru_cache(maxsize=64)
def request_target(endpoint: Endpoint, path: str) -> tuple[Origin, str, tuple[tuple[str, str], ...]]:
    """Where ``endpoint``'s ``path`` requests go and their headers (computed once per endpoint)."""
    origin, target = origin_of(endpoint.url(path), endpoint.insecure)
    return origin, target, tuple(request_headers(endpoint).items())


class StreamSink:
    """Receives one response inside the connection's ``data_received``: an error body (4xx/5xx,
    first :data:`ERROR_BODY_BYTES` kept) or the event stream, decoded and handed to the adapter."""

    __slots__ = ("record", "state", "on_data_event", "decoder", "content_type", "error_body")

    def __init__(self, record: RequestRecord, state: StreamState, on_data_event) -> None:
        self.record, self.state, self.on_data_event = record, state, on_data_event
        self.decoder = SSEDecoder()
        self.content_type = ""
        self.error_body: bytearray | None = None

    def on_headers(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        self.record.t_headers_ns = t_ns
        self.record.status_code = status
        self.content_type = headers.get("content-type", "")
        if status >= 400:
            self.error_body = bytearray()

    def on_data(self, data: bytes, t_ns: int) -> bool:
        if self.error_body is not None:
            self.error_body += data
            return len(self.error_body) >= ERROR_BODY_BYTES
        payloads = self.decoder.simple_payloads(data)
        if payloads is None:
            for event in self.decoder.feed(data):
                _on_event(event, t_ns, self.record, self.state, self.on_data_event)
            return False
        state = self.state
        for payload in payloads:   # whole ``data:`` events (the common read): what _on_event does for them
            if payload == DONE:
                state.done = True
            else:
                state.events += 1
                self.on_data_event(payload, t_ns, self.record, state)
        return False

    def close(self) -> None:
        """The stream ended: flush a final event that had no blank line after it."""
        t_ns = perf_counter_ns()
        for event in self.decoder.close():
            _on_event(event, t_ns, self.record, self.state, self.on_data_event)


def _on_event(event: SSEEvent, t_ns: int, record: RequestRecord, state: StreamState, on_data) -> None:
    data = event.data
    if data == DONE:
        state.done = True
        return
    if event.event == "error":  # ``event: error`` carries the server's message in its data
        raise EventError(ErrorClass.SERVER_ERROR_EVENT, f"server error event: {data[:500]}")
    state.events += 1
    on_data(data, t_ns, record, state)


async def send_request(session: StreamSession, endpoint: Endpoint, request: SuiteRequest, *,
                       request_index: int, prompt_index: int, max_tokens: int | None,
                       sampling: Sampling = Sampling(), scheduled_ns: int | None = None,
                       timeouts: Timeouts, ignore_eos: bool = False) -> RequestRecord:
    """Send one streaming request on ``session`` (:func:`specgauge.client.session.open_session`)
    and return its :class:`RequestRecord` (errors on the record).

    ``max_tokens`` None uses the suite request's own ``max_tokens``; ``ignore_eos`` asks the server
    to generate all of them; ``sampling``: temperature, top-p, top-k and this request's seed.
    """
    adapter = get_adapter(endpoint.api)
    record = RequestRecord(request_index=request_index, prompt_index=prompt_index, domain=request.domain,
                           api=endpoint.api, scheduled_ns=scheduled_ns)
    state = StreamState()
    try:
        fields = adapter.build_body(
            request, model=endpoint.model, max_tokens=max_tokens or request.max_tokens,
            sampling=sampling, tokenizer_path=endpoint.tokenizer_path, ignore_eos=ignore_eos)
        if endpoint.server == "sglang" and endpoint.api in SPEC_DETAILS_APIS:
            fields["return_spec_tokens_details"] = True   # SGLang only: a strict server refuses unknown fields
        body = orjson.dumps(fields)
        origin, target, headers = request_target(endpoint, adapter.path)
    except Exception as exc:  # a bad chat template, say: still a record, never an exception
        return record.fail(ErrorClass.OTHER, f"cannot build the request: {exc}", perf_counter_ns())
    sink = StreamSink(record, state, adapter.on_data)

    def stamp_write() -> None:
        record.t_send_ns = perf_counter_ns()

    record.t_send_ns = perf_counter_ns()   # replaced right before the write, once a connection is there
    try:
        await exchange(session.pool, origin, target, headers, body, sink, timeouts, on_write=stamp_write)
        record.t_end_ns = perf_counter_ns()
        if sink.error_body is not None:
            error_class = ErrorClass.HTTP_4XX if record.status_code < 500 else ErrorClass.HTTP_5XX
            detail = " ".join(bytes(sink.error_body[:ERROR_BODY_BYTES]).decode("utf-8", "replace").split())
            record.fail(error_class, f"HTTP {record.status_code}: {detail}", record.t_end_ns)
        else:
            sink.close()
            _check_end(record, state, sink.decoder, sink.content_type)
    except EventError as exc:
        record.fail(exc.error_class, str(exc), perf_counter_ns())
    except TransportError as exc:
        record.fail(exc.error_class, exc.message, perf_counter_ns())
    except asyncio.CancelledError:
        record.fail(ErrorClass.CANCELLED, "cancelled", perf_counter_ns())
        raise
    except Exception as exc:
        record.fail(ErrorClass.OTHER, " ".join(f"{type(exc).__name__}: {exc}".split()), perf_counter_ns())
    finally:
        _finish(record, state, endpoint)
    return record


def _check_end(record: RequestRecord, state: StreamState, decoder: SSEDecoder, content_type: str) -> None:
    """Classify a stream that ended without a transport error but did not deliver."""
    now = record.t_end_ns or perf_counter_ns()
    if state.events == 0 and not state.done:
        if decoder.junk_lines or "event-stream" not in content_type:
            sample = decoder.junk_sample or "(empty body)"
            kind = content_type or "no content type"
            record.fail(ErrorClass.NOT_SSE, f"response is not an event stream ({kind}): {sample[:300]}", now)
        else:
            record.fail(ErrorClass.EMPTY_RESPONSE, "the stream carried no events", now)
    elif not record.chunk_times_ns and record.finish_reason is None:
        # Zero content and no finish: an error. A finish with no text (an immediate stop) is a valid
        # short completion (the adapters count its finishing event as the first chunk).
        record.fail(ErrorClass.EMPTY_RESPONSE, "the stream ended with no content and no finish reason", now)
    elif not state.done and record.finish_reason is None:
        record.fail(ErrorClass.STREAM_CUT, "the stream ended without [DONE] or a finish reason", now)


def _finish(record: RequestRecord, state: StreamState, endpoint: Endpoint) -> None:
    """Output text and tokens per chunk, for failed requests too (partial streams keep their data)."""
    if not record.output_text:
        record.output_text = "".join(state.chunk_texts)
    if record.t_end_ns is None:
        record.t_end_ns = perf_counter_ns()
    try:
        assign_chunk_tokens(record, state.chunk_texts, state.cumulative_tokens, endpoint.tokenizer_path)
    except Exception as exc:
        record.fail(ErrorClass.OTHER, f"cannot count tokens: {exc}", record.t_end_ns)
