"""The server's sockets and connections: binding, the API-key check, uvicorn's header timeout."""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import socket

from specgauge.engine.serving.errors import APIError
from specgauge.errors import UserError

log = logging.getLogger(__name__)


class APIKeyMiddleware:
    """Plain ASGI middleware (no per-chunk cost on streams): every route but /health needs the key.

    ``Authorization: Bearer <key>``, the scheme in any case (RFC 9110 §11.1: schemes are
    case-insensitive)."""

    def __init__(self, app, api_key: str) -> None:
        self.app = app
        self.expected = api_key.encode()

    def authorized(self, header: bytes) -> bool:
        scheme, _, token = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.expected)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] != "/health":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not self.authorized(given):
                response = APIError(401, "missing or wrong API key (send Authorization: Bearer <key>)",
                                    code="invalid_api_key", error_type="authentication_error").response()
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket (``port`` 0: the OS picks a free one).

    Raises OSError (``socket.gaierror`` for a host that does not resolve); see :func:`bind_or_explain`."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def bind_or_explain(host: str, port: int) -> socket.socket:
    """:func:`bind_socket`, or a one-line :class:`UserError` saying why the address is unusable."""
    try:
        return bind_socket(host, port)
    except socket.gaierror as exc:
        raise UserError(f"--host {host}: not an address this machine can bind ({exc.strerror})") from None
    except OverflowError as exc:
        raise UserError(f"--port {port}: {exc}") from None
    except OSError as exc:
        reason = "already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise UserError(f"cannot listen on {host}:{port}: {reason}") from None


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


MAX_HEAD_BYTES = 64 * 1024   # a request line + headers longer than this: 431 (llhttp sets no limit)
HEAD_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
                  b"connection: close\r\ncontent-length: 32\r\n\r\nRequest header fields too large.")


class HeadTimeoutMixin:
    """Mixed into uvicorn's HTTP protocol by :func:`header_timeout_protocol` (which sets
    ``timeout_s`` and ``counts_head``): close a connection that has not sent a whole request head
    in time; with httptools, answer a head over ``MAX_HEAD_BYTES`` with 431."""

    timeout_s: float
    counts_head: bool                  # httptools' parser (it has on_headers_complete); h11 limits heads itself
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes: int | None = 0        # bytes of the request head so far; None once it is complete

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.counts_head and self._head_bytes is not None and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self.transport.write(HEAD_TOO_LARGE)
                self.transport.close()

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._head_bytes = 0
        self._arm_head_timer()

    def connection_lost(self, exc) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        if not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self.timeout_s, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        waiting_for_head = self.cycle is None or self.cycle.response_complete
        if waiting_for_head and not self.transport.is_closing():
            log.info("closed a connection that sent no complete request head within %.0fs", self.timeout_s)
            self.transport.close()


def header_timeout_protocol(timeout_s: float) -> type:
    """uvicorn's HTTP protocol (httptools, else h11) closing a connection that has not sent a whole
    request head within ``timeout_s`` — counted from the connection's start, or from the end of
    its previous response (keep-alive). uvicorn's own ``timeout_keep_alive`` starts only after a
    response, so a client sending half a header, or a byte a minute, would otherwise hold a
    connection forever (uvicorn/protocols/http/httptools_impl.py: the timer is armed in
    ``on_response_complete`` and cancelled in ``data_received``).

    With httptools, a head over ``MAX_HEAD_BYTES`` is answered 431 and closed (httptools, unlike
    h11's ``h11_max_incomplete_event_size``, buffers headers without a limit)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    counts_head = hasattr(AutoHTTPProtocol, "on_headers_complete")  # httptools' parser callback
    return type("HeaderTimeoutProtocol", (HeadTimeoutMixin, AutoHTTPProtocol),
                {"timeout_s": timeout_s, "counts_head": counts_head})
