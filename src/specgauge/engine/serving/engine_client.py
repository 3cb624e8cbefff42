"""Between asyncio and the engine thread: admission, one event queue per request, a sure abort.

The engine's events come back to asyncio through ``loop.call_soon_threadsafe`` into one
``asyncio.Queue`` per request. A request whose client goes away is aborted, which frees its KV
blocks before the engine's next step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from dataclasses import dataclass
from typing import AsyncIterator

from fastapi import Request

from specgauge.engine.core.engine import Engine, StreamEvent
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.serving.errors import APIError


def merge_events(first: StreamEvent, second: StreamEvent) -> StreamEvent:
    """One event standing for two consecutive ones of the same request."""
    return dataclasses.replace(second, text_delta=first.text_delta + second.text_delta,
                               token_ids=first.token_ids + second.token_ids)


class RequestHandle:
    """The asyncio side of one engine request: an event queue and a guaranteed abort.

    ``request_id`` is the engine's key; ``public_id`` the id the caller sees (its own ``rid``)."""

    def __init__(self, client: "EngineClient", request_id: str, public_id: str, prompt_ids: list[int]) -> None:
        self.client, self.request_id, self.public_id, self.prompt_ids = client, request_id, public_id, prompt_ids
        self.queue: asyncio.Queue[StreamEvent] = asyncio.Queue()
        self.finished = False
        self.started = time.perf_counter()

    async def events(self) -> AsyncIterator[StreamEvent]:
        """Yield events until the finishing one; abort the request if the consumer stops early.

        Events that queued up while the consumer was busy are merged into one (text and tokens
        concatenated, counts from the latest), so a slow client gets fewer, larger chunks — as a
        speculative step's chunk carries several tokens — and the server never falls behind.
        """
        try:
            while not self.finished:
                event = await self.queue.get()
                while not event.finished and not self.queue.empty():
                    event = merge_events(event, self.queue.get_nowait())
                if event.finished:
                    self.finished = True
                yield event
        finally:
            self.close()

    def close(self) -> None:
        if not self.finished:
            self.finished = True
            self.client.engine.abort(self.request_id)
        self.client.release(self)


@dataclass(frozen=True)
class LoopSink:
    """Where the engine sends a request's events: called on ``loop`` (batched per step by the engine)."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue

    def __call__(self, event: StreamEvent) -> None:
        self.queue.put_nowait(event)


class EngineClient:
    """Admission on the event loop: a bounded number of requests in flight (running + waiting).

    Engine keys live in two namespaces that cannot meet: ``rid:<caller's rid>`` for ids a caller
    chose (SGLang's ``rid``) and ``auto:<uuid4>`` for the others, so no caller can squat another
    request's id; a caller reusing its own rid while it is in flight fails alone (409)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        cfg = engine.config.scheduler
        self.capacity = cfg.max_running + cfg.max_waiting
        self.in_flight: set[str] = set()

    def submit(self, prompt_ids: list[int], params: SamplingParams, retry_after_s: int,
               rid: str | None = None) -> RequestHandle:
        if len(self.in_flight) >= self.capacity:
            raise APIError(503, f"server is full ({len(self.in_flight)} requests in flight); retry later",
                           code="queue_full", error_type="server_error",
                           headers={"Retry-After": str(retry_after_s)})
        public_id = rid if rid is not None else uuid.uuid4().hex
        request_id = f"rid:{rid}" if rid is not None else f"auto:{public_id}"
        if request_id in self.in_flight:
            raise APIError(409, f"rid {rid!r} is already in flight (a request id must be unique)", param="rid",
                           code="duplicate_rid")
        handle = RequestHandle(self, request_id, public_id, prompt_ids)
        self.in_flight.add(request_id)
        self.engine.submit(request_id, prompt_ids, params, LoopSink(asyncio.get_running_loop(), handle.queue))
        return handle

    def release(self, handle: RequestHandle) -> None:
        self.in_flight.discard(handle.request_id)


async def abort_on_disconnect(request: Request, handle: RequestHandle) -> None:
    """Wait for the client to hang up (the body is read, so the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    handle.close()  # the engine answers the abort with a final event, which ends collect()


async def collect(request: Request, handle: RequestHandle) -> tuple[str, StreamEvent, list[int]]:
    """All of a non-streaming request's events: (text, the last event, token ids); a client that
    hangs up meanwhile aborts it (499)."""
    text, tokens, last = [], [], None
    watcher = asyncio.create_task(abort_on_disconnect(request, handle))
    try:
        async for event in handle.events():
            text.append(event.text_delta)
            tokens.extend(event.token_ids)
            last = event
    finally:
        watcher.cancel()
    if last is None or last.finish_reason == "abort":
        raise APIError(499, "the client closed the connection", code="client_closed")
    if last.error:
        raise APIError(500, last.error, code="engine_error", error_type="server_error")
    return "".join(text), last, tokens


async def closing(handle: RequestHandle, lines: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``lines``, then abort ``handle``'s request if the stream ended early (the client went away:
    free its blocks)."""
    try:
        async for line in lines:
            yield line
    finally:
        handle.close()
