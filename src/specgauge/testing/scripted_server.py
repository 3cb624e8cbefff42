"""A real streaming HTTP server on 127.0.0.1 with a scripted schedule and fault modes.

It speaks OpenAI ``/v1/chat/completions`` and ``/v1/completions`` (streaming, usage on
``stream_options.include_usage``), SGLang ``/generate`` (cumulative or incremental ``text``),
``/v1/models``, ``/health``, ``/metrics`` (vLLM speculation counters you script) and
``/get_server_info`` (or ``/server_info``). It records the server-side truth of every request:
``perf_counter_ns()`` when the handler got it and when each chunk was written.

In-process use (a background thread; ``perf_counter_ns`` is process-wide, so the truth shares the
client's clock)::

    from specgauge.testing.scripted_server import Script, ScriptedServer

    with ScriptedServer(Script(ttft_s=0.05, chunk_delay_s=0.01, num_chunks=8, tokens_per_chunk=2)) as server:
        endpoint = Endpoint(server.url, api="openai-chat")
        ...                                   # send requests
        truth = server.truth                  # list[TruthRecord], one per streamed request

A prompt containing ``[[fault:NAME]]`` gets that fault for that request only (a suite can mix
good and bad requests). Separate-process use (benchmarks): ``python -m
specgauge.testing.scripted_server --script '{"num_chunks": 64}'`` prints ``PORT <n>``; the truth
is at ``GET /_truth`` (``POST /_truth/reset`` clears it).
"""

from __future__ import annotations

import argparse
import os
import asyncio
import dataclasses
import re
import socket
import sys
import threading
import zlib
from dataclasses import dataclass, field
from time import perf_counter_ns

import orjson
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

FAULTS = ("hang", "http_error", "not_sse", "malformed_json", "cut", "stall", "error_event", "typed_error_event",
          "empty", "no_done", "abort", "immediate_stop")
FAULT_MARKER = re.compile(r"\[\[fault:([a-z_]+)\]\]")
FOREVER_S = 3600.0


@dataclass(frozen=True)
class Script:
    """How the server answers a streaming request.

    Timing: ``ttft_s`` after the request arrives the first chunk goes out, then one chunk every
    ``chunk_delay_s``; ``num_chunks`` chunks carrying ``tokens_per_chunk`` tokens each (an int, or
    a tuple cycled over the chunks), each token's text ``token_text``. ``ttft_jitter_s`` and
    ``num_chunks_jitter`` add a deterministic per-request extra (0 to the jitter, from the request's
    sequence number), so many streams do not all tick in lockstep. ``events_per_write`` > 1
    batches events into one socket write (the "as fast as it can" mode of the benchmark).

    Wire format: ``framing`` "lf" | "crlf" | "cr" | "single" (one newline between events);
    ``comments`` adds ``: keep-alive`` lines; ``gzip`` sends ``Content-Encoding: gzip`` (flushed per
    write); ``split_utf8`` writes every event in two parts split inside a multi-byte character;
    ``big_event_bytes`` makes the first chunk carry that many characters.

    Counts: ``sglang_text`` "cumulative" | "incremental"; ``sglang_meta`` extra ``meta_info`` fields
    (speculation fields under any name); ``usage_per_chunk`` puts cumulative OpenAI ``usage`` on every
    content chunk; ``openai_extra`` adds top-level fields to the final usage chunk; ``tool_calls``
    streams the chat output as tool-call arguments.

    Conversations: ``unique_answers`` starts every answer with ``<req-N>`` (N the server's request
    number), so a test can see which answer a later turn's history carries; ``prefix_cache`` reports
    prefix-cache hits as vLLM and SGLang do (``usage.prompt_tokens_details.cached_tokens``, SGLang's
    ``meta_info.cached_tokens``): the longest word prefix the prompt shares with any earlier prompt.

    Faults (``fault``): hang (no headers ever), http_error (``status`` + ``error_body``), not_sse
    (200 JSON body), malformed_json / cut / stall / error_event (``{"error": ...}``) /
    typed_error_event (``event: error``) / abort (SGLang) after ``fault_after_chunks`` chunks, empty (only ``[DONE]``),
    no_done (ends cleanly without [DONE] or a finish reason),
    immediate_stop (not a fault: the first event finishes with ``stop`` and no text, one token: EOS).
    """

    ttft_s: float = 0.0
    chunk_delay_s: float = 0.0
    num_chunks: int = 8
    ttft_jitter_s: float = 0.0
    num_chunks_jitter: int = 0
    tokens_per_chunk: int | tuple[int, ...] = 1
    token_text: str = "tok "
    events_per_write: int = 1
    framing: str = "lf"
    comments: bool = False
    gzip: bool = False
    split_utf8: bool = False
    big_event_bytes: int = 0
    sglang_text: str = "cumulative"
    sglang_meta: dict = field(default_factory=dict)
    usage_per_chunk: bool = False
    tool_calls: bool = False
    openai_extra: dict = field(default_factory=dict)
    unique_answers: bool = False
    prefix_cache: bool = False
    fault: str | None = None
    fault_after_chunks: int = 2
    status: int = 500
    error_body: str = '{"error": {"message": "scripted failure", "type": "server_error"}}'

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"unknown fault {self.fault!r} (one of {', '.join(FAULTS)})")
        if self.framing not in ("lf", "crlf", "cr", "single"):
            raise ValueError(f"unknown framing {self.framing!r} (lf, crlf, cr or single)")
        if self.sglang_text not in ("cumulative", "incremental"):
            raise ValueError(f"unknown sglang_text {self.sglang_text!r} (cumulative or incremental)")
        if self.num_chunks < 0 or self.events_per_write < 1:
            raise ValueError("num_chunks must be >= 0 and events_per_write >= 1")

    def for_request(self, number: int) -> "Script":
        """This script with the jitter resolved for request ``number`` (a low-discrepancy sequence)."""
        if not self.ttft_jitter_s and not self.num_chunks_jitter:
            return self
        fraction = (number * 0.6180339887498949) % 1.0
        return dataclasses.replace(self, ttft_s=self.ttft_s + fraction * self.ttft_jitter_s,
                                   num_chunks=self.num_chunks + round(fraction * self.num_chunks_jitter),
                                   ttft_jitter_s=0.0, num_chunks_jitter=0)

    def tokens_at(self, chunk: int) -> int:
        if isinstance(self.tokens_per_chunk, int):
            return self.tokens_per_chunk
        return self.tokens_per_chunk[chunk % len(self.tokens_per_chunk)]

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens_at(i) for i in range(self.num_chunks))


@dataclass
class TruthRecord:
    """What the server did for one request (its own ``perf_counter_ns`` clock)."""

    request_id: str
    path: str
    t_recv_ns: int
    t_headers_ns: int | None = None
    chunk_send_ns: list[int] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)

    @property
    def ttft_ns(self) -> int | None:
        return self.chunk_send_ns[0] - self.t_recv_ns if self.chunk_send_ns else None


@dataclass
class VllmCounters:
    """Scripted vLLM speculation counters: each finished request adds these per-request amounts."""

    drafts_per_request: int = 0
    draft_tokens_per_request: int = 0
    accepted_per_request: int = 0
    accepted_per_position: tuple[int, ...] = ()
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)

    def add_request(self) -> None:
        self.drafts += self.drafts_per_request
        self.draft_tokens += self.draft_tokens_per_request
        self.accepted += self.accepted_per_request
        if len(self.per_position) < len(self.accepted_per_position):
            self.per_position.extend([0] * (len(self.accepted_per_position) - len(self.per_position)))
        for i, value in enumerate(self.accepted_per_position):
            self.per_position[i] += value

    def exposition(self) -> str:
        """The counters as Prometheus text, the way vLLM exposes them (with a model label)."""
        label = 'model_name="scripted-model"'
        lines = []
        for name, value in (("num_drafts", self.drafts), ("num_draft_tokens", self.draft_tokens),
                            ("num_accepted_tokens", self.accepted)):
            lines += [f"# HELP vllm:spec_decode_{name}_total Scripted.",
                      f"# TYPE vllm:spec_decode_{name}_total counter",
                      f"vllm:spec_decode_{name}_total{{{label}}} {float(value)}"]
        lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
        for i, value in enumerate(self.per_position):
            lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="{i}"}} '
                         f'{float(value)}')
        return "\n".join(lines) + "\n"


def _frame(data: bytes, framing: str) -> bytes:
    if framing == "crlf":
        return b"data: " + data + b"\r\n\r\n"
    if framing == "cr":
        return b"data: " + data + b"\r\r"
    if framing == "single":
        return b"data: " + data + b"\n"
    return b"data: " + data + b"\n\n"


def _prompt_of(body: dict) -> str:
    if "messages" in body:
        return "\n".join(str(m.get("content", "")) for m in body["messages"])
    return str(body.get("prompt") or body.get("text") or "")


class _Stream:
    """One streamed response: framing, optional gzip, split writes, truth stamps."""

    def __init__(self, request: web.Request, response: web.StreamResponse, script: Script,
                 truth: TruthRecord) -> None:
        self.request = request
        self.response = response
        self.script = script
        self.truth = truth
        self.pending: list[bytes] = []
        self.compressor = zlib.compressobj(wbits=31) if script.gzip else None

    async def write_raw(self, data: bytes) -> None:
        if self.compressor is not None:
            data = self.compressor.compress(data) + self.compressor.flush(zlib.Z_SYNC_FLUSH)
        await self.response.write(data)

    async def event(self, payload: bytes, tokens: int | None) -> None:
        """Queue one event (``tokens`` not None marks a content chunk); writes every
        ``events_per_write`` events."""
        framed = _frame(payload, self.script.framing)
        if self.script.comments:
            framed = b": keep-alive\n\n" + framed
        if tokens is not None:
            self.truth.chunk_tokens.append(tokens)
        if self.script.split_utf8 and tokens is not None:
            cut = framed.index(b"\xc3") + 1 if b"\xc3" in framed else len(framed) // 2
            await self.write_raw(framed[:cut])
            await asyncio.sleep(0.005)
            self.truth.chunk_send_ns.append(perf_counter_ns())
            await self.write_raw(framed[cut:])
            return
        self.pending.append(framed)
        if tokens is not None:
            self.truth.chunk_send_ns.append(-1)  # stamped when the batch is written
            if len(self.pending) >= self.script.events_per_write:
                await self.flush()
        # Other events (usage, [DONE]) go out with the next content write or the stream's end.

    async def flush(self) -> None:
        if not self.pending:
            return
        data, self.pending = b"".join(self.pending), []
        now = perf_counter_ns()
        stamps = self.truth.chunk_send_ns
        for i in range(len(stamps) - 1, -1, -1):
            if stamps[i] != -1:
                break
            stamps[i] = now
        await self.write_raw(data)

    async def finish(self) -> None:
        """Write what is queued and end the body (one write where possible)."""
        data, self.pending = b"".join(self.pending), []
        if self.compressor is not None:
            data = self.compressor.compress(data) + self.compressor.flush()
        await self.response.write_eof(data)


class _TimedRequestHandler(RequestHandler):
    """aiohttp's connection handler, stamping when request bytes were read off the socket, so the
    truth's ``t_recv_ns`` excludes the time the request then waited in this server's own loop."""

    last_data_ns = 0

    def data_received(self, data: bytes) -> None:
        self.last_data_ns = perf_counter_ns()
        super().data_received(data)


class _TimedServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _TimedRequestHandler(self, loop=self._loop, **self._kwargs)


class ScriptedServer:
    """The scripted server (see the module doc). ``script`` may be replaced between requests."""

    def __init__(self, script: Script | None = None, *, model: str = "scripted-model",
                 vllm: VllmCounters | None = None, sglang_gauges: dict | None = None,
                 server_info: dict | None = None, server_info_path: str = "/get_server_info",
                 owned_by: str = "specgauge-test",
                 host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = script or Script()
        self.model = model
        self.vllm = vllm
        self.sglang_gauges = sglang_gauges
        self.server_info = server_info
        self.server_info_path = server_info_path
        self.host, self.port = host, port
        self.truth: list[TruthRecord] = []
        self.requests_seen: list[dict] = []    # JSON bodies of the streaming requests
        self.paths_seen: list[str] = []        # every request's path, in order
        self.owned_by = owned_by               # /v1/models "owned_by" ("vllm" makes it look like vLLM)
        self.headers_seen: list[dict[str, str]] = []
        self._prompt_words: list[list[str]] = []   # every prompt so far (the scripted prefix cache)
        self._count = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopped: asyncio.Event | None = None
        self._routes: dict = {}

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def routes(self) -> dict[tuple[str, str], object]:
        return {("POST", "/v1/chat/completions"): self._openai, ("POST", "/v1/completions"): self._openai,
                ("POST", "/generate"): self._sglang, ("GET", "/v1/models"): self._models,
                ("GET", "/health"): self._health, ("GET", "/metrics"): self._metrics,
                ("GET", self.server_info_path): self._server_info, ("GET", "/_truth"): self._truth,
                ("POST", "/_truth/reset"): self._truth_reset}

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        self.paths_seen.append(request.path)
        handler = self._routes.get((request.method, request.path))
        if handler is None:
            return web.json_response({"error": {"message": f"no route {request.method} {request.path}"}},
                                     status=404)
        return await handler(request)

    async def start_async(self) -> None:
        """Start serving on the running loop (binds ``port``; 0 picks a free one)."""
        self._routes = self.routes()
        self._runner = web.ServerRunner(_TimedServer(self._dispatch, access_log=None), handle_signals=False,
                                        shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=2048, reuse_address=True)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # the port the OS chose

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def __enter__(self) -> "ScriptedServer":
        ready = threading.Event()
        errors: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stopped = asyncio.Event()
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:  # bind failure: report it to the caller
                errors.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_until_complete(self._stopped.wait())
            loop.run_until_complete(self.stop_async())
            loop.close()

        self._thread = threading.Thread(target=serve, name="scripted-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def __exit__(self, *exc_info) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)

    # -- handlers ----------------------------------------------------------------------------
    def _next_id(self) -> str:
        self._count += 1
        return f"req-{self._count}"

    def _cached_words(self, prompt: str) -> int:
        """The longest word prefix ``prompt`` shares with an earlier prompt (then remembered)."""
        words = prompt.split()
        best = 0
        for earlier in self._prompt_words:
            shared = 0
            for a, b in zip(words, earlier):
                if a != b:
                    break
                shared += 1
            best = max(best, shared)
        self._prompt_words.append(words)
        return best

    def _script_for(self, prompt: str) -> Script:
        match = FAULT_MARKER.search(prompt)
        if match:
            return dataclasses.replace(self.script, fault=match.group(1))
        return self.script

    async def _begin(self, request: web.Request, truth: TruthRecord, script: Script) -> web.StreamResponse:
        """Apply pre-stream faults; otherwise prepare the event-stream response."""
        if script.fault == "hang":
            await asyncio.sleep(FOREVER_S)
        if script.fault == "http_error":
            return web.Response(status=script.status, text=script.error_body, content_type="application/json")
        if script.fault == "not_sse":
            return web.json_response({"result": "a plain JSON body, not an event stream"})
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Server": "scripted/1"}
        if script.gzip:
            headers["Content-Encoding"] = "gzip"
        response = web.StreamResponse(status=200, headers=headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        truth.t_headers_ns = perf_counter_ns()
        return response

    async def _serve(self, request: web.Request, api: str) -> web.StreamResponse:
        t_recv = getattr(request.protocol, "last_data_ns", 0) or perf_counter_ns()
        body = orjson.loads(await request.read())
        self.requests_seen.append(body)
        self.headers_seen.append(dict(request.headers))
        request_id = self._next_id()
        script = self._script_for(_prompt_of(body)).for_request(self._count)
        truth = TruthRecord(request_id, request.path, t_recv)
        early = await self._begin(request, truth, script)
        if isinstance(early, web.Response):
            return early
        response = early
        self.truth.append(truth)
        stream = _Stream(request, response, script, truth)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        try:
            await self._stream_body(stream, script, truth, api, body, t_recv, include_usage)
        except ConnectionResetError:
            return response
        if script.fault != "cut":
            if self.vllm is not None:
                self.vllm.add_request()
            await stream.finish()
        return response

    async def _stream_body(self, stream: _Stream, script: Script, truth: TruthRecord, api: str, body: dict,
                           t_recv: int, include_usage: bool) -> None:
        prompt_tokens = len(_prompt_of(body).split())
        cached = self._cached_words(_prompt_of(body)) if script.prefix_cache else None
        if script.comments:
            await stream.write_raw(b": connected\n\n")
        if script.fault == "empty":
            await stream.event(b"[DONE]", None)
            return
        if script.fault == "immediate_stop":
            await self._immediate_stop(stream, truth, api, prompt_tokens, include_usage)
            return
        next_at = t_recv / 1e9 + script.ttft_s
        produced, cumulative_text = 0, ""
        for chunk in range(script.num_chunks):
            if chunk == script.fault_after_chunks and script.fault in ("malformed_json", "cut", "stall", "abort",
                                                                       "error_event", "typed_error_event"):
                await self._mid_stream_fault(stream, script, truth, api)
                return
            wait = next_at - perf_counter_ns() / 1e9
            if wait > 0:
                await stream.flush()
                await asyncio.sleep(wait)
            next_at += script.chunk_delay_s
            tokens = script.tokens_at(chunk)
            text = script.token_text * tokens
            if chunk == 0 and script.big_event_bytes:
                text = "x" * script.big_event_bytes
            if chunk == 0 and script.unique_answers:
                text = f"<{truth.request_id}> " + text
            produced += tokens
            cumulative_text += text
            last = chunk == script.num_chunks - 1 and script.fault != "no_done"
            payload = self._payload(api, truth.request_id, text, cumulative_text, produced, prompt_tokens,
                                    last, script, include_usage, cached)
            await stream.event(payload, tokens)
        if script.fault == "no_done":
            return
        if api != "sglang" and include_usage:
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": produced,
                     "total_tokens": prompt_tokens + produced}
            if cached is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            final = {"id": truth.request_id, "object": "chat.completion.chunk", "choices": [], "usage": usage}
            final.update(script.openai_extra)
            await stream.event(orjson.dumps(final), None)
        await stream.event(b"[DONE]", None)

    async def _immediate_stop(self, stream: _Stream, truth: TruthRecord, api: str, prompt_tokens: int,
                              include_usage: bool) -> None:
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1}
        if api == "sglang":
            meta = {"id": truth.request_id, "prompt_tokens": prompt_tokens, "completion_tokens": 1,
                    "finish_reason": {"type": "stop", "matched": 0}}
            await stream.event(orjson.dumps({"text": "", "meta_info": meta, "index": 0}), 1)
        else:
            choice = ({"index": 0, "delta": {"content": ""}, "finish_reason": "stop"} if api == "chat"
                      else {"index": 0, "text": "", "finish_reason": "stop"})
            await stream.event(orjson.dumps({"id": truth.request_id, "model": self.model, "choices": [choice]}), 1)
            if include_usage:
                await stream.event(orjson.dumps({"id": truth.request_id, "choices": [], "usage": usage}), None)
        await stream.event(b"[DONE]", None)

    async def _mid_stream_fault(self, stream: _Stream, script: Script, truth: TruthRecord, api: str) -> None:
        await stream.flush()
        if script.fault == "malformed_json":
            await stream.event(b'{"choices": [{"delta": {"content": "broken', None)
            await stream.event(b"[DONE]", None)
        elif script.fault == "error_event":
            await stream.event(b'{"error": {"message": "scripted in-stream failure", "code": 500}}', None)
            await stream.event(b"[DONE]", None)
        elif script.fault == "typed_error_event":  # an SSE ``event: error`` with a plain-text message
            await stream.write_raw(b"event: error\ndata: upstream overloaded\n\n")
        elif script.fault == "abort":
            meta = {"id": truth.request_id, "finish_reason": {"type": "abort", "message": "scripted abort"}}
            await stream.event(orjson.dumps({"text": "", "meta_info": meta}), None)
            await stream.event(b"[DONE]", None)
        elif script.fault == "stall":
            await asyncio.sleep(FOREVER_S)
        elif script.fault == "cut":
            stream.request.transport.abort()  # mid-chunked-body: the client sees a cut stream
            raise ConnectionResetError("scripted cut")

    def _payload(self, api: str, request_id: str, text: str, cumulative_text: str, produced: int,
                 prompt_tokens: int, last: bool, script: Script, include_usage: bool,
                 cached: int | None = None) -> bytes:
        if api == "sglang":
            meta = {"id": request_id, "prompt_tokens": prompt_tokens, "completion_tokens": produced,
                    "finish_reason": {"type": "length", "length": produced} if last else None}
            if cached is not None:
                meta["cached_tokens"] = cached
            meta.update(script.sglang_meta)
            shown = cumulative_text if script.sglang_text == "cumulative" else text
            return orjson.dumps({"text": shown, "meta_info": meta, "index": 0})
        finish = "length" if last else None
        if api == "chat":
            delta = ({"tool_calls": [{"index": 0, "function": {"arguments": text}}]} if script.tool_calls
                     else {"content": text})
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            event = {"id": request_id, "object": "chat.completion.chunk", "model": self.model, "choices": [choice]}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish}
            event = {"id": request_id, "object": "text_completion", "model": self.model, "choices": [choice]}
        if script.usage_per_chunk:
            event["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": produced,
                              "total_tokens": prompt_tokens + produced}
        return orjson.dumps(event)

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "chat" if request.path.endswith("chat/completions") else "completions")

    async def _sglang(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "sglang")

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model",
                                                              "owned_by": self.owned_by}]},
                                 headers={"Server": "scripted/1"})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        text = self.vllm.exposition() if self.vllm is not None else ""
        for name, value in (self.sglang_gauges or {}).items():
            text += f"# TYPE sglang:{name} gauge\nsglang:{name}{{model_name=\"{self.model}\"}} {value}\n"
        if not text:
            return web.Response(status=404, text="metrics are not enabled")
        return web.Response(text=text, content_type="text/plain")

    async def _server_info(self, request: web.Request) -> web.Response:
        if self.server_info is None:
            return web.Response(status=404, text="no server info")
        return web.json_response(self.server_info)

    async def _truth(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps([dataclasses.asdict(t) for t in self.truth]),
                            content_type="application/json")

    async def _truth_reset(self, request: web.Request) -> web.Response:
        self.truth.clear()
        return web.Response(text="ok")


def refused_url() -> str:
    """A loopback URL where nothing listens (a port bound, then released): connection refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def serve_in_process(description: str, make_server, argv: list[str] | None = None) -> None:
    """Command-line entry shared by the test servers: ``--port``, ``--script JSON``; builds the
    server with ``make_server(script, port)``, prints ``PORT <n>`` once listening, serves until
    killed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", default="{}", help="Script fields as JSON")
    parser.add_argument("--exit-after-requests", type=int, default=0,
                        help="die (exit 1, no goodbye) once this many streams were served: a server crash on cue")
    args = parser.parse_args(argv)
    fields = orjson.loads(args.script)
    if isinstance(fields.get("tokens_per_chunk"), list):
        fields["tokens_per_chunk"] = tuple(fields["tokens_per_chunk"])
    server = make_server(Script(**fields), args.port)

    async def serve() -> None:
        await server.start_async()
        print(f"PORT {server.port}", flush=True)
        try:
            if args.exit_after_requests:
                while len(server.truth) < args.exit_after_requests:   # the condition, checked often
                    await asyncio.sleep(0.01)
                os._exit(1)
            await asyncio.Event().wait()
        finally:
            await server.stop_async()

    try:
        import uvloop
        uvloop.run(serve())
    except ImportError:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass


def main(argv: list[str] | None = None) -> None:
    """Serve in this process (for benchmarks): prints ``PORT <n>`` once listening."""
    serve_in_process(__doc__.splitlines()[0], lambda script, port: ScriptedServer(script, port=port), argv)


if __name__ == "__main__":
    sys.exit(main())
