"""One HTTP/1.1 client connection: an ``asyncio.Protocol`` whose response is parsed by ``httptools``.

The measured stream's bytes go from the socket to the caller's :class:`ResponseSink` inside
``data_received``, with no task wake-up in between: each read is stamped (``perf_counter_ns``)
first, then fed to ``httptools.HttpResponseParser`` (status, headers, chunked / content-length /
close-delimited bodies, RFC 9112 section 6.3), gunzipped when ``Content-Encoding: gzip``, and
handed to the sink with the read's stamp. The request coroutine waits on two futures only: the
headers, and the end of the response.

``httptools`` callbacks used (``httptools/parser/parser.pyx``): ``on_header``,
``on_headers_complete``, ``on_body``, ``on_message_complete``; ``get_status_code()``,
``should_keep_alive()``. A close-delimited body (neither ``Content-Length`` nor chunked) ends at
EOF, which the parser cannot be told (it has no ``finish``), so EOF is judged here.
"""

from __future__ import annotations

import asyncio
import zlib
from time import perf_counter_ns
from typing import Protocol

import httptools

from specgauge.client.records import ErrorClass

NO_BODY_STATUSES = frozenset({204, 304})


class TransportError(Exception):
    """A failed exchange, already classified: ``error_class`` and a one-line ``message``."""

    def __init__(self, error_class: ErrorClass, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message


class ResponseSink(Protocol):
    """Where a response goes. Both calls run inside ``data_received``; an exception they raise
    ends the exchange with that exception (the connection is then closed)."""

    def on_headers(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        """Status and headers (names lower-case) of the response, and the time their read arrived."""

    def on_data(self, data: bytes, t_ns: int) -> bool:
        """Decoded body bytes and the time their read came off the socket; True: read no more."""


class Exchange:
    """One request and its response on a connection: the futures the request coroutine awaits."""

    __slots__ = ("sink", "headers_received", "done", "received_any")

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: ResponseSink) -> None:
        self.sink = sink
        self.headers_received: asyncio.Future[None] = loop.create_future()
        self.done: asyncio.Future[None] = loop.create_future()
        self.received_any = False   # any response byte at all (a stale keep-alive connection has none)

    def fail(self, error: BaseException) -> None:
        """End the exchange with ``error`` (first end wins)."""
        for future in (self.headers_received, self.done):
            if not future.done():
                future.set_exception(error)
                future.exception()  # marked retrieved: the headers future may never be awaited

    def finish(self) -> None:
        """End the exchange cleanly (first end wins)."""
        if not self.headers_received.done():
            self.headers_received.set_result(None)
        if not self.done.done():
            self.done.set_result(None)


class HttpConnection(asyncio.Protocol):
    """A keep-alive HTTP/1.1 connection carrying one exchange at a time (no pipelining).

    ``last_data_ns`` is the ``perf_counter_ns`` of the latest read; ``reusable`` says, after an
    exchange, whether the response was read to its end on a connection the server keeps open.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, key: object) -> None:
        self.loop = loop
        self.key = key                 # the pool's key (origin or proxy) this connection belongs to
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        self.idle_since = 0.0
        self.last_data_ns = 0
        self._exchange: Exchange | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._headers: dict[str, str] = {}
        self._status = 0
        self._informational = False
        self._close_delimited = False
        self._complete = False
        self._inflate = None
        self._sink_error: BaseException | None = None
        self._stop = False
        self._t_ns = 0

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        t_ns = perf_counter_ns()   # the arrival, before any parsing
        self.last_data_ns = self._t_ns = t_ns
        exchange = self._exchange
        if exchange is None:       # bytes with no request outstanding: the connection is not sane
            self._close()
            return
        exchange.received_any = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            if self._sink_error is None:
                self._end(TransportError(ErrorClass.OTHER, "HTTP response callback failed"))
        except httptools.HttpParserError as exc:
            self._end(self._protocol_error(exc))
            return
        if self._sink_error is not None:
            self._end(self._sink_error)
        elif self._stop:
            self._end(None)

    def eof_received(self) -> bool | None:
        return False   # close the transport: connection_lost judges the end of the body

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        exchange = self._exchange
        if exchange is None:
            return
        detail = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        if self._complete:
            return
        if not exchange.headers_received.done():
            self._end(TransportError(ErrorClass.CONNECTION_LOST,
                                     f"connection closed before response headers{detail}"))
        elif self._close_delimited and exc is None:
            self._flush_inflate()
            self._end(self._sink_error)
        else:
            self._end(TransportError(ErrorClass.STREAM_CUT, f"connection closed mid-body{detail}"))

    # -- httptools callbacks ------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:   # 1xx: an interim response; the real one follows
            self._informational = True
            self._headers = {}
            return
        self._status = status
        headers = self._headers
        self._close_delimited = ("content-length" not in headers and "chunked" not in
                                 headers.get("transfer-encoding", "").lower() and status not in NO_BODY_STATUSES)
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding == "gzip":
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding not in ("identity", ""):
            self._sink_error = TransportError(ErrorClass.OTHER, f"unsupported Content-Encoding {encoding!r} "
                                                                "(specgauge asks for gzip or nothing)")
            return
        try:
            self._exchange.sink.on_headers(status, headers, self._t_ns)
        except BaseException as exc:
            self._sink_error = exc
            return
        self._exchange.headers_received.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self._sink_error is not None or self._stop:
            return
        if self._inflate is not None:
            try:
                body = self._inflate.decompress(body)
            except zlib.error as exc:
                self._sink_error = TransportError(ErrorClass.STREAM_CUT, f"bad gzip body: {exc}")
                return
            if not body:
                return
        try:
            self._stop = bool(self._exchange.sink.on_data(body, self._t_ns))
        except BaseException as exc:
            self._sink_error = exc

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        if self._sink_error is None and not self._stop:
            self._flush_inflate()
        self._complete = True
        self.reusable = self._parser.should_keep_alive() and self._sink_error is None and not self._stop
        self._end(self._sink_error)

    # -- the request side ---------------------------------------------------------------------

    def start(self, request: bytes, sink: ResponseSink) -> Exchange:
        """Write ``request`` now (the caller stamps the time just before) and return its exchange."""
        exchange = Exchange(self.loop, sink)
        if self.closed or self.transport is None or self.transport.is_closing():
            exchange.fail(TransportError(ErrorClass.CONNECTION_LOST, "connection closed before the request was sent"))
            return exchange
        self._exchange = exchange
        self._parser = httptools.HttpResponseParser(self)
        self._headers, self._status, self._informational = {}, 0, False
        self._close_delimited = self._complete = self._stop = self.reusable = False
        self._inflate = self._sink_error = None
        self.transport.write(request)
        return exchange

    def watch_reads(self, exchange: Exchange, read_s: float) -> "ReadWatchdog":
        """A watchdog that fails ``exchange`` when no byte arrived for ``read_s`` seconds."""
        self.last_data_ns = perf_counter_ns()
        return ReadWatchdog(self, exchange, read_s)

    def stall(self, exchange: Exchange) -> None:
        """End ``exchange`` as stalled (the watchdog's verdict) if it is still this connection's."""
        if self._exchange is exchange:
            self._end(TransportError(ErrorClass.READ_TIMEOUT, "stream stalled: no data within the read timeout"))

    def abort(self) -> None:
        """Drop the connection at once (an exchange given up mid-way cannot leave it reusable)."""
        self._close()

    # -- internals ----------------------------------------------------------------------------

    def _flush_inflate(self) -> None:
        if self._inflate is None:
            return
        tail, self._inflate = self._inflate.flush(), None
        if tail:
            try:
                self._exchange.sink.on_data(tail, self._t_ns)
            except BaseException as exc:
                self._sink_error = exc

    def _end(self, error: BaseException | None) -> None:
        exchange = self._exchange
        if exchange is None:
            return
        self._exchange = None
        if error is None:
            exchange.finish()
        else:
            exchange.fail(error)
        if not self.reusable:
            self._close()

    def _close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def _protocol_error(self, exc: Exception) -> TransportError:
        text = " ".join(str(exc).split()) or type(exc).__name__
        if self._exchange is not None and self._exchange.headers_received.done():
            return TransportError(ErrorClass.STREAM_CUT, f"malformed HTTP body: {text}")
        return TransportError(ErrorClass.OTHER, f"malformed HTTP response: {text}")


class ReadWatchdog:
    """Fails an exchange whose connection read nothing for ``read_s``. It looks at the time of the
    latest read every ``read_s`` rather than re-arming a timer on every read (that cost more than
    parsing the chunk)."""

    __slots__ = ("connection", "exchange", "read_ns", "handle")

    def __init__(self, connection: HttpConnection, exchange: Exchange, read_s: float) -> None:
        self.connection, self.exchange, self.read_ns = connection, exchange, int(read_s * 1e9)
        self.handle = connection.loop.call_later(read_s, self.check)

    def check(self) -> None:
        if self.exchange.done.done():
            return
        idle_ns = perf_counter_ns() - self.connection.last_data_ns
        if idle_ns >= self.read_ns:
            self.connection.stall(self.exchange)
        else:
            self.handle = self.connection.loop.call_later((self.read_ns - idle_ns) / 1e9, self.check)

    def cancel(self) -> None:
        """Stop watching (the exchange ended)."""
        self.handle.cancel()
