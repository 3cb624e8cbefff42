"""The one client session of a point: the measured stream's connection pool, an aiohttp session
for what is not measured (``/metrics``, server info), pool warm-up, GC control."""

from __future__ import annotations

import asyncio
import gc
from contextlib import contextmanager
from typing import Callable, Iterator

import aiohttp

from specgauge.client.connection_pool import KEEPALIVE_S, ConnectionPool, Resolver
from specgauge.client.endpoint import Endpoint, Timeouts, request_headers
from specgauge.client.http_exchange import get_request

WARM_PATHS = ("/v1/models", "/health")


class StreamSession:
    """What :func:`specgauge.client.send.send_request` sends on: ``pool`` (our HTTP/1.1
    connections, :mod:`specgauge.client.connection_pool`) and ``http``, an ``aiohttp`` session for
    the unmeasured side requests (counter scrapes). Use as ``async with``; closing it closes both."""

    def __init__(self, timeouts: Timeouts, connect_ms: list[float] | None = None,
                 resolver: Resolver | None = None, insecure: bool = False) -> None:
        self.timeouts = timeouts
        self.insecure = insecure
        self.pool = ConnectionPool(connect_ms=connect_ms, resolver=resolver, keepalive_s=KEEPALIVE_S)
        self.http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "StreamSession":
        # trust_env: the scrapes take the measured stream's HTTP_PROXY / NO_PROXY route
        self.http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeouts.connect_s), trust_env=True,
            connector=aiohttp.TCPConnector(ssl=False) if self.insecure else None)
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection of the pool and the side session."""
        await self.pool.close()
        if self.http is not None:
            await self.http.close()


def open_session(timeouts: Timeouts, connect_ms: list[float] | None = None,
                 resolver: Resolver | None = None, insecure: bool = False) -> StreamSession:
    """One :class:`StreamSession` for a whole point: no connection limit (the load mode is the
    limit), 300 s keep-alive, every new connection's set-up time (ms) appended to ``connect_ms``.
    ``resolver(host, port)`` replaces DNS (getaddrinfo-shaped answers); ``insecure``: the side
    session's https scrapes skip certificate checks too (the stream takes it from the endpoint)."""
    return StreamSession(timeouts, connect_ms, resolver, insecure)


async def _warm_one(session: StreamSession, endpoint: Endpoint, timeouts: Timeouts) -> None:
    headers = request_headers(endpoint)
    for path in WARM_PATHS:
        status = await get_request(session.pool, endpoint.url(path), headers, timeouts,
                                   insecure=endpoint.insecure)
        if status is None or status < 400:   # answered, or failed (real requests classify their own faults)
            return


async def warm_pool(session: StreamSession, endpoint: Endpoint, connections: int,
                    timeouts: Timeouts, on_opened: Callable[[int, int], None] | None = None) -> None:
    """Open at least ``connections`` keep-alive connections before the measured window, with cheap
    concurrent ``GET /v1/models`` (or ``/health``) requests, so no measured request pays set-up.

    All requests start in one loop turn, so each opens a connection of its own (a request started
    after another finished would reuse that one); the set-up times recorded for them therefore
    include waiting behind the other connects of the same burst. ``on_opened(done, total)`` is
    called as they finish (progress for large pools).
    """
    total = max(1, connections)
    done = 0

    async def one() -> None:
        nonlocal done
        await _warm_one(session, endpoint, timeouts)
        done += 1
        if on_opened is not None:
            on_opened(done, total)

    await asyncio.gather(*(one() for _ in range(total)))


@contextmanager
def gc_frozen() -> Iterator[None]:
    """No garbage-collector pauses inside the measured window: collect, freeze, disable; undo after."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
