"""Typed per-request records. Errors are stored on the record, never raised out of the load loop.

All timestamps are ``time.perf_counter_ns()`` values (monotonic, ns) taken in the client process.
The metric definitions (TTFT, TPOT, ICL, ITL) live in :mod:`specgauge.analysis.definitions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class ErrorClass(str, Enum):
    """Why a request failed; stored on the record and counted per point."""

    CONNECT_REFUSED = "connect_refused"
    DNS = "dns"
    TLS = "tls"
    CONNECT_TIMEOUT = "connect_timeout"
    CONNECT_FAILED = "connect_failed"   # any other failure to connect (host unreachable, reset...)
    CONNECTION_LOST = "connection_lost"  # connected, then closed or reset before response headers
    HEADER_TIMEOUT = "header_timeout"   # connected, but no response headers in time
    READ_TIMEOUT = "read_timeout"       # headers came, then the stream stalled
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    NOT_SSE = "not_sse"                 # 200 but the body is not an event stream
    BAD_JSON = "bad_json"               # an event's data is not the JSON the API promises
    STREAM_CUT = "stream_cut"           # connection closed before the stream's end
    SERVER_ERROR_EVENT = "server_error_event"  # an in-stream {"error": ...} event
    EMPTY_RESPONSE = "empty_response"   # the stream ended cleanly with no content at all
    CANCELLED = "cancelled"
    OTHER = "other"


class TokenCountSource(str, Enum):
    """Where the tokens-per-chunk figures came from."""

    SERVER = "server"        # cumulative counts the server reported per chunk (meta_info / usage)
    TOKENIZER = "tokenizer"  # a local tokenizer the user named, applied to each chunk's text
    SPREAD = "spread"        # the final usage count spread evenly over the chunks
    CHUNKS = "chunks"        # no count at all: one token per chunk assumed (said so in reports)


@dataclass
class RequestRecord:
    """One request as the client saw it."""

    request_index: int                  # position in the point's request sequence
    prompt_index: int                   # index of the prompt in the suite
    domain: str = "general"
    api: str = ""
    scheduled_ns: int | None = None     # when the load runner meant to send it
    t_send_ns: int | None = None        # just before the request is written
    t_headers_ns: int | None = None     # response headers received
    t_end_ns: int | None = None         # stream end (or failure)
    chunk_times_ns: list[int] = field(default_factory=list)   # every content-bearing chunk
    chunk_tokens: list[int] = field(default_factory=list)     # tokens carried by each of them
    token_count_source: TokenCountSource = TokenCountSource.CHUNKS
    prompt_tokens: int | None = None
    cached_tokens: int | None = None    # prompt tokens the server's prefix cache served, where it says
    output_tokens: int | None = None
    output_text: str = ""
    finish_reason: str | None = None
    # Speculation, per request, where the server reports it (SGLang meta_info, our engine).
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None
    spec_correct_drafts: int | None = None
    spec_proposed_drafts: int | None = None
    spec_accept_histogram: list[int] | None = None
    # Outcome.
    status_code: int | None = None
    error_class: ErrorClass | None = None
    error_message: str | None = None
    server_request_id: str | None = None
    # A multi-turn session's turn (load/sessions.py): which session slot of the point, which turn.
    session_index: int | None = None
    turn_index: int | None = None

    @property
    def ok(self) -> bool:
        return self.error_class is None

    @property
    def send_lag_ns(self) -> int | None:
        """Actual minus scheduled send time: large values mean the client is the bottleneck."""
        if self.scheduled_ns is None or self.t_send_ns is None:
            return None
        return self.t_send_ns - self.scheduled_ns

    def fail(self, error_class: ErrorClass, message: str, now_ns: int) -> "RequestRecord":
        """Mark the record failed (first failure wins) and stamp its end."""
        if self.error_class is None:
            self.error_class = error_class
            self.error_message = message[:2000]
        if self.t_end_ns is None:
            self.t_end_ns = now_ns
        return self
