"""A lean streaming server for client benchmarks: raw asyncio protocol, one timer per chunk.

The aiohttp :mod:`~specgauge.testing.scripted_server` is the test server (every fault mode, every
wire variant). On a 2-core machine, though, its ~30 µs of Python per written chunk competes with
the client being measured; this server writes a chunk with one ``orjson.dumps`` and one
``transport.write`` from a ``loop.call_at`` callback, so at hundreds of streams the client, not
the server, owns the CPU. It speaks enough HTTP/1.1 for keep-alive clients: ``POST
/v1/completions`` and ``/v1/chat/completions`` (streaming, chunked, usage chunk, ``[DONE]``),
``GET /v1/models`` and ``/health``, and ``GET /_truth`` (the same truth records as the scripted
server: ``t_recv_ns`` when the request's last bytes were read, ``chunk_send_ns`` per chunk).

    python -m specgauge.testing.lean_server --script '{"ttft_s": 0.1, "chunk_delay_s": 0.02}'
"""

from __future__ import annotations

import asyncio
import dataclasses
from time import perf_counter_ns

import orjson

from specgauge.testing.scripted_server import Script, TruthRecord, serve_in_process

HEADERS_END = b"\r\n\r\n"
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
               b"Transfer-Encoding: chunked\r\nServer: lean/1\r\n\r\n")


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _plain(status: str, body: bytes, content_type: bytes = b"application/json") -> bytes:
    return (b"HTTP/1.1 " + status.encode() + b"\r\nContent-Type: " + content_type +
            b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


class _Stream:
    """One streamed response driven by timer callbacks (no coroutine per stream)."""

    def __init__(self, server: "LeanServer", protocol: "_Protocol", script: Script, truth: TruthRecord,
                 chat: bool, prompt_tokens: int, include_usage: bool) -> None:
        self.server, self.protocol, self.script, self.truth = server, protocol, script, truth
        self.chat, self.prompt_tokens, self.include_usage = chat, prompt_tokens, include_usage
        self.chunk, self.produced, self.pending = 0, 0, []
        self.next_at = truth.t_recv_ns / 1e9 + script.ttft_s

    def _event(self) -> bytes:
        tokens = self.script.tokens_at(self.chunk)
        self.produced += tokens
        text = self.script.token_text * tokens
        finish = "length" if self.chunk == self.script.num_chunks - 1 else None
        if self.chat:
            choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish}
        self.truth.chunk_tokens.append(tokens)
        return b"data: " + orjson.dumps({"id": self.truth.request_id, "choices": [choice]}) + b"\n\n"

    def tick(self) -> None:
        transport = self.protocol.transport
        if transport is None or transport.is_closing():
            return
        batch = []
        while self.chunk < self.script.num_chunks and len(batch) < self.script.events_per_write:
            batch.append(self._event())
            self.chunk += 1
        if self.chunk == self.script.num_chunks and self.include_usage:
            usage = {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.produced,
                     "total_tokens": self.prompt_tokens + self.produced}
            batch.append(b"data: " + orjson.dumps({"id": self.truth.request_id, "choices": [], "usage": usage})
                         + b"\n\n")
        if self.chunk == self.script.num_chunks:
            batch.append(b"data: [DONE]\n\n")
        now = perf_counter_ns()
        self.truth.chunk_send_ns.extend([now] * (len(self.truth.chunk_tokens) - len(self.truth.chunk_send_ns)))
        data = _chunked(b"".join(batch))
        if self.chunk == self.script.num_chunks:
            transport.write(data + b"0\r\n\r\n")
            self.protocol.busy = False
            if self.protocol.buffer:  # the next request arrived before this response ended
                self.protocol.data_received(b"")
            return
        transport.write(data)
        self.next_at += self.script.chunk_delay_s
        loop = self.server.loop
        if self.script.chunk_delay_s > 0:
            loop.call_at(loop.time() + max(0.0, self.next_at - perf_counter_ns() / 1e9), self.tick)
        else:
            loop.call_soon(self.tick)


class _Protocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection."""

    def __init__(self, server: "LeanServer") -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.busy = False
        self.arrived_ns = 0

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        if data:
            self.arrived_ns = perf_counter_ns()
        t_recv = self.arrived_ns
        self.buffer += data
        while not self.busy:
            end = self.buffer.find(HEADERS_END)
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            method, path, _ = head[0].split(" ", 2)
            self.busy = True  # one request at a time per connection; released when its response is done
            # Handled in a later callback: when many requests arrive together, each one's arrival is
            # stamped before any of them is answered (answering writes, and writes take time).
            self.server.loop.call_soon(self.server.handle, self, method, path, body, t_recv)


class LeanServer:
    """Serve ``script`` on 127.0.0.1 (``port`` 0: a free port); ``truth`` as in the scripted server."""

    def __init__(self, script: Script, *, model: str = "scripted-model", port: int = 0) -> None:
        self.script, self.model, self.port = script, model, port
        self.truth: list[TruthRecord] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._count = 0
        self._server: asyncio.AbstractServer | None = None

    async def start_async(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(lambda: _Protocol(self), "127.0.0.1", self.port, backlog=4096)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop_async(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def handle(self, protocol: _Protocol, method: str, path: str, body: bytes, t_recv: int) -> None:
        transport = protocol.transport
        if transport is None or transport.is_closing():
            return
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            self._count += 1
            request = orjson.loads(body)
            prompt = str(request.get("prompt") or request.get("messages") or "")
            truth = TruthRecord(f"req-{self._count}", path, t_recv)
            self.truth.append(truth)
            protocol.busy = True
            transport.write(STREAM_HEAD)
            truth.t_headers_ns = perf_counter_ns()
            stream = _Stream(self, protocol, self.script.for_request(self._count), truth,
                             chat=path.endswith("chat/completions"), prompt_tokens=len(prompt.split()),
                             # the usage chunk only when asked, as OpenAI-compatible servers do
                             include_usage=bool((request.get("stream_options") or {}).get("include_usage")))
            self.loop.call_at(self.loop.time() + max(0.0, stream.next_at - perf_counter_ns() / 1e9), stream.tick)
            return
        protocol.busy = False
        if method == "GET" and path == "/v1/models":
            transport.write(_plain("200 OK", orjson.dumps({"object": "list", "data": [{"id": self.model}]})))
        elif method == "GET" and path == "/health":
            transport.write(_plain("200 OK", b"ok", b"text/plain"))
        elif method == "GET" and path == "/_truth":
            transport.write(_plain("200 OK", orjson.dumps([dataclasses.asdict(t) for t in self.truth])))
        else:
            transport.write(_plain("404 Not Found", b'{"error": {"message": "no such route"}}'))
        if protocol.buffer:  # a request that came in behind this one
            protocol.data_received(b"")


def main(argv: list[str] | None = None) -> None:
    """Serve in this process: prints ``PORT <n>`` once listening."""
    serve_in_process(__doc__.splitlines()[0], lambda script, port: LeanServer(script, port=port), argv)


if __name__ == "__main__":
    main()
