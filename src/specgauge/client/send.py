"""``send_request``: one streamed request, timed, parsed, and classified — never raising.

Timestamps are ``time.perf_counter_ns()``: just before the request is written (``t_send_ns``),
response headers (``t_headers_ns``), each read that completed a content-bearing event
(``chunk_times_ns``; events that arrive in the same read share its time), and the end.

With a session from :func:`specgauge.client.session.open_session` (the runner's), ``t_send_ns`` is
stamped by aiohttp's ``on_request_chunk_sent`` trace right before the bytes go to the socket (on
Python < 3.12 aiohttp writes the body in a task of its own, so a stamp taken before ``session.post``
would also count the client's work on other requests queued ahead of that task; the runner's send
lag shows that work instead), and a chunk's time is when its bytes were read off the socket
(:class:`~specgauge.client.session.StampingResponseHandler`), not when this coroutine resumed.
With any other session both fall back to the time seen here.
Every fault ends up as ``record.error_class`` / ``record.error_message``; only cancellation
propagates (the record is marked ``cancelled`` first).
"""

from __future__ import annotations

import asyncio
import errno
import ssl
from functools import lru_cache
from time import perf_counter_ns

import aiohttp
import orjson

from specgauge.client.adapters import EventError, StreamState, get_adapter
from specgauge.client.endpoint import Endpoint, Timeouts, parsed_url, request_headers
from specgauge.client.records import ErrorClass, RequestRecord
from specgauge.client.sampling import Sampling
from specgauge.client.sse import DONE, SSEDecoder, SSEEvent
from specgauge.client.tokens import assign_chunk_tokens
from specgauge.suites.model import SuiteRequest

# SGLang's OpenAI routes return per-request speculation details when asked:
# ``ChatCompletionRequest.return_spec_tokens_details`` / ``CompletionRequest.return_spec_tokens_details``
# (python/sglang/srt/entrypoints/openai/protocol.py) put ``sglext.spec_tokens_details`` on the
# response, built by ``spec_tokens_details_from_meta_info`` (python/sglang/srt/entrypoints/openai/utils.py).
SPEC_DETAILS_APIS = ("openai-chat", "openai-completions")

ERROR_BODY_BYTES = 2000


class SendStamp:
    """Filled by the session's ``on_request_chunk_sent`` trace (see :func:`specgauge.client.session.
    open_session`) with the moment the request body was handed to the socket."""

    __slots__ = ("t_write_ns",)

    def __init__(self) -> None:
        self.t_write_ns: int | None = None


@lru_cache(maxsize=16)
def client_timeout(timeouts: Timeouts) -> aiohttp.ClientTimeout:
    """aiohttp handles the connect limit; header and between-read limits are ours (see below)."""
    return aiohttp.ClientTimeout(total=None, connect=timeouts.connect_s, sock_connect=timeouts.connect_s,
                                 sock_read=None)


def classify_exception(exc: BaseException, headers_received: bool) -> tuple[ErrorClass, str]:
    """Map a transport exception to an :class:`ErrorClass` and a one-line message."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ErrorClass.DNS, text
    if isinstance(exc, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientConnectorSSLError,
                        aiohttp.ClientSSLError, ssl.SSLError)):
        return ErrorClass.TLS, text
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError) or exc.os_error.errno == errno.ECONNREFUSED:
            return ErrorClass.CONNECT_REFUSED, text
        if isinstance(exc.os_error, ssl.SSLError):
            return ErrorClass.TLS, text
        return ErrorClass.CONNECT_FAILED, text
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ErrorClass.CONNECT_TIMEOUT, text
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        if headers_received:
            return ErrorClass.READ_TIMEOUT, "stream stalled: no data within the read timeout"
        return ErrorClass.HEADER_TIMEOUT, "no response headers within the header timeout"
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
                        aiohttp.ClientOSError, ConnectionResetError)):
        if headers_received:
            return ErrorClass.STREAM_CUT, text
        return ErrorClass.CONNECTION_LOST, f"connection closed before response headers ({text})"
    return ErrorClass.OTHER, text


async def _read_stream(response: aiohttp.ClientResponse, record: RequestRecord, state: StreamState,
                       on_data, read_s: float) -> SSEDecoder:
    """Feed raw reads through the SSE decoder into the adapter until EOF (``[DONE]`` then EOF).

    The stall limit is a watchdog that looks at the time of the last read every ``read_s``
    rather than a timer re-armed on every read (re-arming cost more than parsing the chunk).
    """
    decoder = SSEDecoder()
    reader = response.content
    loop = asyncio.get_running_loop()
    connection = response.connection
    protocol = connection.protocol if connection is not None else None
    socket_stamps = isinstance(getattr(protocol, "last_data_ns", None), int)  # a StampingConnector
    last_read = loop.time()
    async with asyncio.timeout(None) as deadline:
        def watchdog() -> None:
            nonlocal handle
            if loop.time() - last_read >= read_s:
                deadline.reschedule(loop.time())  # expire now: TimeoutError at the await below
            else:
                handle = loop.call_at(last_read + read_s, watchdog)

        handle = loop.call_at(last_read + read_s, watchdog)
        try:
            while True:
                chunk = await reader.readany()
                if not chunk:
                    break
                t_ns = protocol.last_data_ns if socket_stamps else perf_counter_ns()
                last_read = loop.time()
                for event in decoder.feed(chunk):
                    _on_event(event, t_ns, record, state, on_data)
        finally:
            handle.cancel()
    t_ns = perf_counter_ns()
    for event in decoder.close():
        _on_event(event, t_ns, record, state, on_data)
    return decoder


def _on_event(event: SSEEvent, t_ns: int, record: RequestRecord, state: StreamState, on_data) -> None:
    data = event.data
    if data == DONE:
        state.done = True
        return
    if event.event == "error":  # ``event: error`` carries the server's message in its data
        raise EventError(ErrorClass.SERVER_ERROR_EVENT, f"server error event: {data[:500]}")
    state.events += 1
    on_data(data, t_ns, record, state)


async def send_request(session: aiohttp.ClientSession, endpoint: Endpoint, request: SuiteRequest, *,
                       request_index: int, prompt_index: int, max_tokens: int | None,
                       sampling: Sampling = Sampling(), scheduled_ns: int | None = None,
                       timeouts: Timeouts, ignore_eos: bool = False) -> RequestRecord:
    """Send one streaming request and return its :class:`RequestRecord` (errors on the record).

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
        url = parsed_url(endpoint, adapter.path)
        headers = request_headers(endpoint)
    except Exception as exc:  # a bad chat template, say: still a record, never an exception
        return record.fail(ErrorClass.OTHER, f"cannot build the request: {exc}", perf_counter_ns())
    response: aiohttp.ClientResponse | None = None
    stamp = SendStamp()
    try:
        record.t_send_ns = perf_counter_ns()  # replaced by the write time when the session traces it
        async with asyncio.timeout(timeouts.connect_s + timeouts.headers_s):
            response = await session.post(url, data=body, headers=headers, timeout=client_timeout(timeouts),
                                          trace_request_ctx=stamp)
        record.t_headers_ns = perf_counter_ns()
        record.status_code = response.status
        if response.status >= 400:
            async with asyncio.timeout(timeouts.read_s):
                payload = await response.content.read(ERROR_BODY_BYTES)
            error_class = ErrorClass.HTTP_4XX if response.status < 500 else ErrorClass.HTTP_5XX
            detail = " ".join(payload.decode("utf-8", "replace").split())
            return record.fail(error_class, f"HTTP {response.status}: {detail}", perf_counter_ns())
        decoder = await _read_stream(response, record, state, adapter.on_data, timeouts.read_s)
        record.t_end_ns = perf_counter_ns()
        _check_end(record, state, decoder, response.headers.get("Content-Type", ""))
    except EventError as exc:
        record.fail(exc.error_class, str(exc), perf_counter_ns())
    except asyncio.CancelledError:
        record.fail(ErrorClass.CANCELLED, "cancelled", perf_counter_ns())
        raise
    except Exception as exc:
        error_class, message = classify_exception(exc, record.t_headers_ns is not None)
        record.fail(error_class, message, perf_counter_ns())
    finally:
        if stamp.t_write_ns is not None:
            record.t_send_ns = stamp.t_write_ns
        if response is not None:
            response.release()
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
