"""The one shared HTTP session of a point: a pooled connector, connect-time tracing, pool warm-up."""

from __future__ import annotations

import asyncio
import functools
import gc
from contextlib import contextmanager
from time import perf_counter_ns
from typing import Callable, Iterator

import aiohttp
from aiohttp.client_proto import ResponseHandler

from specgauge.client.endpoint import Endpoint, Timeouts, request_headers

KEEPALIVE_S = 300.0
WARM_PATHS = ("/v1/models", "/health")


class StampingResponseHandler(ResponseHandler):
    """aiohttp's client protocol, noting when response bytes were last read off the socket.

    ``send_request`` stamps each chunk with this time rather than the moment its coroutine
    resumed, so a chunk's time does not include the event loop's work on other streams that
    became readable in the same turn (the same place the test servers stamp their truth).
    """

    last_data_ns = 0

    def data_received(self, data: bytes) -> None:
        if data:  # aiohttp calls data_received(b"") to resume its parser: not an arrival
            self.last_data_ns = perf_counter_ns()
        super().data_received(data)


class StampingConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` whose connections use :class:`StampingResponseHandler`."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._factory = functools.partial(StampingResponseHandler, loop=self._loop)


def open_session(timeouts: Timeouts, connect_ms: list[float] | None = None) -> aiohttp.ClientSession:
    """One ``ClientSession`` for a whole point: no connection limit (the load mode is the limit),
    long keep-alive, gzip decoded by aiohttp. Its traces stamp each request's write time for
    :func:`specgauge.client.send.send_request`, its connections stamp each read (see
    :class:`StampingResponseHandler`), and every new connection's set-up time (ms) is appended to
    ``connect_ms``."""
    connect_ms = connect_ms if connect_ms is not None else []
    trace = aiohttp.TraceConfig()

    async def on_chunk_sent(_session, context, _params) -> None:
        stamp = context.trace_request_ctx
        if stamp is not None and getattr(stamp, "t_write_ns", 0) is None:
            stamp.t_write_ns = perf_counter_ns()

    async def on_start(_session, context, _params) -> None:
        context.connect_start_ns = perf_counter_ns()

    async def on_end(_session, context, _params) -> None:
        connect_ms.append((perf_counter_ns() - context.connect_start_ns) / 1e6)

    trace.on_connection_create_start.append(on_start)
    trace.on_connection_create_end.append(on_end)
    trace.on_request_chunk_sent.append(on_chunk_sent)
    connector = StampingConnector(limit=0, limit_per_host=0, keepalive_timeout=KEEPALIVE_S, ttl_dns_cache=3600)
    return aiohttp.ClientSession(connector=connector, trace_configs=[trace], auto_decompress=True,
                                 timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeouts.connect_s))


async def _warm_one(session: aiohttp.ClientSession, endpoint: Endpoint, timeouts: Timeouts) -> None:
    headers = request_headers(endpoint)
    for path in WARM_PATHS:
        try:
            async with session.get(endpoint.url(path), headers=headers,
                                   timeout=aiohttp.ClientTimeout(total=timeouts.connect_s + timeouts.headers_s)
                                   ) as resp:
                await resp.read()
                if resp.status < 400:
                    return
        except Exception:  # warming is best effort; real requests classify their own faults
            return


async def warm_pool(session: aiohttp.ClientSession, endpoint: Endpoint, connections: int,
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
