"""Keep-alive connections per origin, opened with a deadline and classified when they fail.

A connection goes back to the pool after a response read to its end on a connection the server
keeps open (:attr:`HttpConnection.reusable`); anything else is closed. Idle connections are kept
up to ``max_idle`` per origin and for ``keepalive_s``; the number open at once is bounded by the
caller's load (one per request in flight), as before. Host names are resolved once per pool (the
resolver can be replaced: the tests answer "no such host" without a network).
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from collections import defaultdict, deque
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Awaitable, Callable
from urllib.parse import urlsplit

from specgauge.client.http_connection import HttpConnection, TransportError
from specgauge.client.proxy import ProxyRoute, route_for
from specgauge.client.records import ErrorClass

KEEPALIVE_S = 300.0
MAX_IDLE_PER_ORIGIN = 4096
Resolver = Callable[[str, int], Awaitable[list[tuple]]]


@dataclass(frozen=True)
class Origin:
    """Where a request goes: scheme, host, port (the pool's key), and how to check its TLS."""

    scheme: str
    host: str
    port: int
    insecure: bool = False   # https without certificate or host name checks

    @property
    def host_header(self) -> str:
        """The ``Host`` header: the port only when it is not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def base(self) -> str:
        """``scheme://host[:port]``, as a proxy's absolute-form target begins."""
        return f"{self.scheme}://{self.host_header}"


def origin_of(url: str, insecure: bool = False) -> tuple[Origin, str]:
    """``(Origin, request target)`` of an absolute http(s) URL; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Origin(parts.scheme, parts.hostname, port, insecure), target


def tls_context(insecure: bool) -> ssl.SSLContext:
    """The client's TLS settings: the system's trust store, or no checks at all (``insecure``)."""
    context = ssl.create_default_context()
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


class ConnectionPool:
    """Idle keep-alive :class:`HttpConnection` s per origin (or per proxy), and opening new ones.

    ``connect_ms`` receives the set-up time (TCP, and TLS for https) of every connection opened.
    """

    def __init__(self, *, connect_ms: list[float] | None = None, resolver: Resolver | None = None,
                 keepalive_s: float = KEEPALIVE_S, max_idle: int = MAX_IDLE_PER_ORIGIN) -> None:
        self.connect_ms = connect_ms if connect_ms is not None else []
        self.keepalive_s = keepalive_s
        self.max_idle = max_idle
        self._resolver = resolver
        self._idle: dict[object, deque[HttpConnection]] = defaultdict(deque)
        self._open: set[HttpConnection] = set()
        self._addresses: dict[tuple[str, int], list[tuple]] = {}
        self._tls: dict[bool, ssl.SSLContext] = {}
        self._routes: dict[Origin, ProxyRoute | None] = {}

    def route(self, origin: Origin) -> ProxyRoute | None:
        """The proxy ``origin`` goes through (from the environment, read once), or None."""
        if origin not in self._routes:
            try:
                self._routes[origin] = route_for(origin.base)
            except ValueError as exc:
                raise TransportError(ErrorClass.OTHER, str(exc)) from None
        return self._routes[origin]

    async def acquire(self, origin: Origin, connect_s: float) -> tuple[HttpConnection, bool]:
        """An idle connection to ``origin`` (``reused`` True), else a new one opened within
        ``connect_s``; a :class:`TransportError` names why one could not be opened."""
        route = self.route(origin)
        key = route if route is not None else origin
        idle = self._idle.get(key)
        if idle:
            now = asyncio.get_running_loop().time()
            while idle:
                connection = idle.pop()   # the most recently used: warm in every cache
                if not connection.closed and now - connection.idle_since < self.keepalive_s:
                    return connection, True
                self.discard(connection)
        return await self._open_new(origin, route, key, connect_s), False

    def release(self, connection: HttpConnection) -> None:
        """Give ``connection`` back: kept when reusable and there is room, else closed."""
        idle = self._idle[connection.key]
        if connection.reusable and not connection.closed and len(idle) < self.max_idle:
            connection.idle_since = connection.loop.time()
            idle.append(connection)
        else:
            self.discard(connection)

    def discard(self, connection: HttpConnection) -> None:
        """Close ``connection`` for good."""
        connection.abort()
        self._open.discard(connection)

    async def close(self) -> None:
        """Close every connection this pool opened."""
        for connection in list(self._open):
            connection.abort()
        self._open.clear()
        self._idle.clear()
        await asyncio.sleep(0)   # let the transports run their connection_lost

    async def _open_new(self, origin: Origin, route: ProxyRoute | None, key: object,
                        connect_s: float) -> HttpConnection:
        loop = asyncio.get_running_loop()
        host, port = (route.host, route.port) if route is not None else (origin.host, origin.port)
        tls = origin.scheme == "https"   # a proxied route is http only (proxy.route_for refuses https)
        start_ns = perf_counter_ns()
        try:
            async with asyncio.timeout(connect_s):
                addresses = await self._resolve(host, port)
                family, address = addresses[0][0], addresses[0][4]
                _, connection = await loop.create_connection(
                    lambda: HttpConnection(loop, key), host=address[0],
                    port=address[1], family=family, ssl=self._tls_for(origin.insecure) if tls else None,
                    server_hostname=origin.host if tls else None,
                    ssl_handshake_timeout=connect_s if tls else None)
        except TransportError:
            raise
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise classify_connect_error(exc, tls) from None
        self.connect_ms.append((perf_counter_ns() - start_ns) / 1e6)
        sock = connection.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._open.add(connection)
        return connection

    async def _resolve(self, host: str, port: int) -> list[tuple]:
        cached = self._addresses.get((host, port))
        if cached is not None:
            return cached
        if self._resolver is not None:
            addresses = await self._resolver(host, port)
        else:
            addresses = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, f"no address for {host}")
        self._addresses[(host, port)] = addresses
        return addresses

    def _tls_for(self, insecure: bool) -> ssl.SSLContext:
        if insecure not in self._tls:
            self._tls[insecure] = tls_context(insecure)
        return self._tls[insecure]


def classify_connect_error(exc: BaseException, tls: bool) -> TransportError:
    """A failure to connect as a :class:`TransportError` (DNS, refused, TLS, timeout, other)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if isinstance(exc, socket.gaierror):
        return TransportError(ErrorClass.DNS, f"host name not found: {text}")
    if isinstance(exc, (ssl.SSLError, ssl.CertificateError)):
        return TransportError(ErrorClass.TLS, f"TLS handshake failed: {text}")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return TransportError(ErrorClass.CONNECT_TIMEOUT, "no connection within the connect timeout")
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return TransportError(ErrorClass.CONNECT_REFUSED, f"connection refused: {text}")
    if tls and isinstance(exc, ConnectionError):   # reset or closed during the handshake
        return TransportError(ErrorClass.TLS, f"TLS handshake failed: {text}")
    return TransportError(ErrorClass.CONNECT_FAILED, text)
