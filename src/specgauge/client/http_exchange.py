"""One request over the pool: the bytes on the wire, the deadlines, and what happens to the connection.

``exchange`` takes a connection (idle or new), writes the request, waits for the response headers
until ``connect_s + headers_s`` after it began, then for the end of the body under a stall
watchdog (``read_s`` between reads); the body itself goes to the caller's sink as it arrives.
A connection whose response was read to its end goes back to the pool; any other is closed. A
request that finds its reused keep-alive connection already closed by the server (no response
byte at all) is sent once more on a new connection.

Request head (RFC 9112): ``METHOD target HTTP/1.1``, ``Host``, the caller's headers,
``Accept-Encoding: gzip``, ``Content-Length``. Through a proxy the target is the absolute URL and
``Proxy-Authorization`` is added when the proxy URL carries a user (:mod:`specgauge.client.proxy`).
"""

from __future__ import annotations

import asyncio
from functools import lru_cache
from typing import Callable

from specgauge.client.connection_pool import ConnectionPool, Origin, origin_of
from specgauge.client.endpoint import Timeouts
from specgauge.client.http_connection import ResponseSink, TransportError
from specgauge.client.proxy import ProxyRoute
from specgauge.client.records import ErrorClass


@lru_cache(maxsize=256)
def request_head(method: str, origin: Origin, target: str, header_items: tuple[tuple[str, str], ...],
                 route: ProxyRoute | None) -> bytes:
    """The request line and headers up to ``Content-Length:`` (its value and the body follow)."""
    lines = [f"{method} {origin.base + target if route is not None else target} HTTP/1.1",
             f"Host: {origin.host_header}"]
    names = {name.lower() for name, _ in header_items}
    for name, value in header_items:
        if any(c in name or c in value for c in "\r\n"):
            raise TransportError(ErrorClass.OTHER, f"header {name.splitlines()[0]!r} holds a line break")
        lines.append(f"{name}: {value}")
    if "accept-encoding" not in names:
        lines.append("Accept-Encoding: gzip")
    if route is not None and route.authorization and "proxy-authorization" not in names:
        lines.append(f"Proxy-Authorization: {route.authorization}")
    lines.append("Content-Length: ")
    return "\r\n".join(lines).encode("latin-1", "replace")


async def exchange(pool: ConnectionPool, origin: Origin, target: str, header_items: tuple[tuple[str, str], ...],
                   body: bytes, sink: ResponseSink, timeouts: Timeouts, *, method: str = "POST",
                   on_write: Callable[[], None] | None = None) -> None:
    """Send one request and feed its response to ``sink``; returns when the response ended.

    Raises :class:`TransportError` (classified), whatever ``sink`` raised, or CancelledError.
    ``on_write()`` runs right before the request's bytes are handed to the socket.
    """
    loop = asyncio.get_running_loop()
    headers_deadline = loop.time() + timeouts.connect_s + timeouts.headers_s
    route = pool.route(origin)
    request = request_head(method, origin, target, header_items, route) + b"%d\r\n\r\n" % len(body) + body
    for attempt in (1, 2):
        connection, reused = await pool.acquire(origin, timeouts.connect_s)
        if on_write is not None:
            on_write()
        current = connection.start(request, sink)
        try:
            try:
                async with asyncio.timeout_at(headers_deadline):
                    await current.headers_received
            except TimeoutError:
                raise TransportError(ErrorClass.HEADER_TIMEOUT,
                                     "no response headers within the header timeout") from None
            except TransportError as exc:
                if (attempt == 1 and reused and not current.received_any
                        and exc.error_class is ErrorClass.CONNECTION_LOST):
                    continue   # the server had closed the idle connection: once more on a new one
                raise
            watchdog = connection.watch_reads(current, timeouts.read_s)
            try:
                await current.done
            finally:
                watchdog.cancel()
            return
        finally:
            if current.done.done() and connection.reusable:
                pool.release(connection)
            else:
                pool.discard(connection)


class _StatusOnly:
    """A sink that keeps the status and drops the body."""

    __slots__ = ("status",)

    def __init__(self) -> None:
        self.status: int | None = None

    def on_headers(self, status: int, headers: dict[str, str], t_ns: int) -> None:
        self.status = status

    def on_data(self, data: bytes, t_ns: int) -> bool:
        return False


async def get_request(pool: ConnectionPool, url: str, headers: dict[str, str], timeouts: Timeouts, *,
                      insecure: bool = False) -> int | None:
    """``GET url`` on the pool, body read and dropped: its status, or None when it failed."""
    sink = _StatusOnly()
    try:
        origin, target = origin_of(url, insecure)
        await exchange(pool, origin, target, tuple(headers.items()), b"", sink, timeouts, method="GET")
    except (TransportError, ValueError, OSError):
        return None
    return sink.status
