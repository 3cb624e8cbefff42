"""HTTP front end: OpenAI and SGLang-native routes over the engine thread (FastAPI + uvicorn).

Requests are validated here, then handed to the engine thread (:meth:`Engine.submit`); the
engine's events come back to asyncio through ``loop.call_soon_threadsafe`` into one
``asyncio.Queue`` per request. A stream whose client goes away aborts its request, which frees
its KV blocks before the engine's next step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import hmac
import json
import logging
import socket
import threading
import time
import typing
import uuid
from dataclasses import dataclass
from typing import AsyncIterator, Callable

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from specgauge import __version__
from specgauge.engine.engine import Engine, StreamEvent
from specgauge.engine.protocol import ChatCompletionRequest, CompletionRequest, GenerateRequest
from specgauge.engine.sampling_params import SamplingParams
from specgauge.errors import UserError


log = logging.getLogger("specgauge.engine.server")


@dataclass(frozen=True)
class ServerSettings:
    """Front-end options (the engine's own live in :class:`EngineConfig`)."""

    served_model_name: str = "specgauge-target"
    api_key: str | None = None
    max_body_bytes: int = 1 << 20
    incremental_streaming_output: bool = False   # SGLang's flag: /generate text deltas, not cumulative
    retry_after_s: int = 1
    header_timeout_s: float = 10.0      # a connection must send a request's whole head within this
    keep_alive_timeout_s: int = 5       # an idle keep-alive connection is closed after this (uvicorn's default)


class APIError(Exception):
    """An OpenAI-style error response: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 error_type: str = "invalid_request_error", headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.error_type, self.headers = error_type, headers

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


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


def _sse(payload: dict | str) -> bytes:
    """One server-sent event (orjson: the per-chunk cost matters at 64 streams on a small CPU)."""
    data = payload.encode() if isinstance(payload, str) else orjson.dumps(payload)
    return b"data: " + data + b"\n\n"


def _nested_model(annotation) -> type[BaseModel] | None:
    """The first pydantic model inside a field's type (``list[X] | None`` → X)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _param_path(model: type[BaseModel], loc: tuple) -> str | None:
    """The field path of a validation error, without pydantic's union-member tags (``prompt.str``)."""
    parts: list[str] = []
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            parts.append(str(part))
            continue
        fields = current.model_fields if current is not None else {}
        name = next((n for n, f in fields.items() if part in (n, f.alias)), None)
        if name is not None:
            parts.append(part)
            current = _nested_model(fields[name].annotation)
    return ".".join(parts) or None


def _validation_error(exc: ValidationError, model: type[BaseModel]) -> APIError:
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return APIError(400, f"malformed JSON body: {first.get('ctx', {}).get('error', first['msg'])}",
                        code="invalid_json")
    if first["type"] == "extra_forbidden":  # a field this server does not know: refused, never ignored
        param = ".".join(str(part) for part in first["loc"])
        return APIError(400, f"{param}: unrecognized field (this server does not support it)", param=param,
                        code="unsupported_field")
    param = _param_path(model, tuple(first["loc"]))
    where = param or "request body"
    message = first["msg"].removeprefix("Value error, ")
    code = "unsupported_field" if message.startswith("not supported by this server") else "invalid_value"
    return APIError(400, f"{where}: {message}", param=param, code=code)


NON_STANDARD_NUMBERS = ("NaN", "Infinity", "-Infinity")


def _refuse_constant(name: str):
    raise ValueError(name)


def _non_standard_number(body: bytes) -> str | None:
    """``NaN``/``Infinity``/``-Infinity`` outside strings (Python's and JavaScript's extensions,
    not JSON — RFC 8259 §6); None when the body has none. Only bodies that contain the words are
    parsed a second time."""
    if b"NaN" not in body and b"Infinity" not in body:
        return None
    try:
        json.loads(body, parse_constant=_refuse_constant)
    except ValueError as exc:
        if str(exc) in NON_STANDARD_NUMBERS:
            return str(exc)
    except RecursionError:
        pass  # nested too deep: the model's parser says so (400 invalid_json)
    return None


class ClientGone(Exception):
    """The client hung up while its request body was being read."""


def _openapi_body(model: type[BaseModel]) -> tuple[dict, dict]:
    """A route's OpenAPI ``requestBody`` from its pydantic model, and the schemas it refers to."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    body = {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
    return body, defs


def create_app(engine: Engine, settings: ServerSettings) -> FastAPI:
    """The FastAPI application serving ``engine``."""
    app = FastAPI(title="specgauge engine", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    client = EngineClient(engine)
    tokenizer = engine.tokenizer
    app.state.engine, app.state.client, app.state.settings = engine, client, settings

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return APIError(exc.status_code, str(exc.detail), code=code).response()

    @app.exception_handler(ClientGone)
    async def _client_gone(_: Request, exc: ClientGone) -> Response:
        log.info("client disconnected while sending its request body")
        return Response(status_code=499)  # nobody reads it: the connection is gone

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected error in a route", exc_info=exc)
        return APIError(500, f"internal error: {type(exc).__name__}", code="internal_error",
                        error_type="server_error").response()

    if settings.api_key:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key)

    async def parse(request: Request, model: type[BaseModel]) -> BaseModel:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise APIError(415, f"Content-Type must be application/json, got {content_type or 'none'!r}",
                           code="unsupported_media_type")
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.max_body_bytes:
            raise APIError(413, f"request body over the limit of {settings.max_body_bytes} bytes", code="body_too_large")
        body = bytearray()
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > settings.max_body_bytes:
                    raise APIError(413, f"request body over the limit of {settings.max_body_bytes} bytes",
                                   code="body_too_large")
        except ClientDisconnect:
            raise ClientGone() from None
        constant = _non_standard_number(bytes(body))
        if constant is not None:
            raise APIError(400, f"malformed JSON body: {constant} is not a JSON number (RFC 8259)",
                           code="invalid_json")
        try:
            return model.model_validate_json(bytes(body))
        except ValidationError as exc:
            raise _validation_error(exc, model) from None

    def check_model(name: str | None) -> None:
        if name is not None and name != settings.served_model_name:
            raise APIError(404, f"model {name!r} does not exist; this server serves {settings.served_model_name!r}",
                           param="model", code="model_not_found")

    def check_prompt(prompt_ids: list[int], param: str) -> None:
        if not prompt_ids:
            raise APIError(400, f"{param}: the prompt is empty", param=param, code="invalid_value")
        vocab = engine.model.config.vocab_size
        if any(not 0 <= t < vocab for t in prompt_ids):
            raise APIError(400, f"{param}: token ids must lie in [0, {vocab})", param=param, code="invalid_value")
        if len(prompt_ids) >= engine.max_model_len:
            raise APIError(400, f"{param}: the prompt has {len(prompt_ids)} tokens; this model's context is "
                           f"{engine.max_model_len} tokens", param=param, code="context_length_exceeded")

    def resolve_max_tokens(prompt_ids: list[int], asked: int | None, default: int | None, param: str) -> int:
        room = engine.max_model_len - len(prompt_ids)
        if asked is None:
            return min(default, room) if default else room
        if asked > room:
            raise APIError(400, f"{param}: {asked} new tokens after a {len(prompt_ids)}-token prompt exceed the "
                           f"context of {engine.max_model_len} tokens", param=param, code="context_length_exceeded")
        return asked

    def sampling(body, max_tokens: int) -> SamplingParams:
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
        return SamplingParams(max_tokens=max_tokens, temperature=body.temperature, top_p=body.top_p,
                              top_k=body.top_k, seed=body.seed, stop=tuple(s for s in stop if s),
                              stop_token_ids=frozenset(body.stop_token_ids or ()), ignore_eos=body.ignore_eos)

    def usage(handle: RequestHandle, completion_tokens: int) -> dict:
        prompt = len(handle.prompt_ids)
        return {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens}

    def spec_fields(event: StreamEvent) -> dict:
        """Per-request speculation figures (SGLang's ``meta_info`` names: ``spec_verify_ct``,
        ``spec_accept_length`` ...); empty while speculation is off."""
        return dict(event.spec) if event.spec is not None else {}

    def openai_spec_fields(event: StreamEvent) -> dict:
        """What OpenAI responses carry: ``spec_accept_length`` and ``spec_verify_ct`` (extensions)."""
        if event.spec is None:
            return {}
        return {"spec_accept_length": event.spec["spec_accept_length"], "spec_verify_ct": event.spec["spec_verify_ct"]}

    def error_event(event: StreamEvent) -> dict:
        return APIError(500, event.error or "request failed", code="engine_error", error_type="server_error").body()

    async def abort_on_disconnect(request: Request, handle: RequestHandle) -> None:
        """Wait for the client to hang up (the body is read, so the next message is the disconnect)."""
        while (await request.receive())["type"] != "http.disconnect":
            pass
        handle.close()  # the engine answers the abort with a final event, which ends collect()

    async def collect(request: Request, handle: RequestHandle) -> tuple[str, StreamEvent, list[int]]:
        """All of a non-streaming request's events; a client that hangs up meanwhile aborts it."""
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

    async def openai_route(request: Request, chat: bool):
        body = await parse(request, ChatCompletionRequest if chat else CompletionRequest)
        check_model(body.model)
        if chat:
            messages = [{"role": m.template_role, "content": m.text()} for m in body.messages]
            try:
                rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
            except Exception as exc:  # a template may refuse a conversation (raise_exception)
                raise APIError(400, f"messages: the model's chat template rejected them: {exc}",
                               param="messages", code="invalid_value") from None
            prompt_ids = tokenizer.encode(rendered)
            param, asked, default = "messages", body.max_completion_tokens or body.max_tokens, None
        else:
            prompt_ids = tokenizer.encode(body.prompt) if isinstance(body.prompt, str) else list(body.prompt)
            param, asked, default = "prompt", body.max_tokens, 16
        check_prompt(prompt_ids, param)
        max_tokens = resolve_max_tokens(prompt_ids, asked, default,
                                        "max_completion_tokens" if chat and body.max_completion_tokens else "max_tokens")
        handle = client.submit(prompt_ids, sampling(body, max_tokens), settings.retry_after_s)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        head = {"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                "created": created, "model": settings.served_model_name}
        if not body.stream:
            text, last, _ = await collect(request, handle)
            choice = {"index": 0, "finish_reason": last.finish_reason, "logprobs": None}
            choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
            out = dict(head, object="chat.completion" if chat else "text_completion", choices=[choice],
                       usage=usage(handle, last.completion_tokens))
            out.update(openai_spec_fields(last))
            out["usage"].update(openai_spec_fields(last))
            return JSONResponse(out)
        options = body.stream_options

        async def stream() -> AsyncIterator[bytes]:
            try:
                async for line in openai_events():
                    yield line
            finally:
                handle.close()  # the client went away before the end: abort, free the blocks

        async def openai_events() -> AsyncIterator[bytes]:
            if chat:
                yield _sse(dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                "logprobs": None, "finish_reason": None}]))
            last = None
            async for event in handle.events():
                last = event
                if event.error:
                    yield _sse(error_event(event))
                    break
                if not event.text_delta and not event.finished:
                    continue
                delta = {"content": event.text_delta} if event.text_delta else {}
                choice = {"index": 0, "logprobs": None,
                          "finish_reason": event.finish_reason if event.finished else None}
                choice.update({"delta": delta} if chat else {"text": event.text_delta})
                chunk = dict(head, choices=[choice], completion_tokens=event.completion_tokens)
                if options and options.continuous_usage_stats:
                    chunk["usage"] = usage(handle, event.completion_tokens)
                if event.finished:
                    chunk.update(openai_spec_fields(event))
                yield _sse(chunk)
            if last is not None and not last.error and options and options.include_usage:
                yield _sse(dict(head, choices=[], usage={**usage(handle, last.completion_tokens),
                                                         **openai_spec_fields(last)}))
            yield _sse("[DONE]")

        return StreamingResponse(stream(), media_type="text/event-stream")

    schemas: dict = {}

    def documented(model: type[BaseModel]) -> dict:
        """``openapi_extra`` for a route that reads ``model`` from its body (the routes parse the
        body themselves, to answer OpenAI-style errors)."""
        body, defs = _openapi_body(model)
        schemas.update(defs)
        return body

    @app.post("/v1/completions", openapi_extra=documented(CompletionRequest))
    async def completions(request: Request):
        return await openai_route(request, chat=False)

    @app.post("/v1/chat/completions", openapi_extra=documented(ChatCompletionRequest))
    async def chat_completions(request: Request):
        return await openai_route(request, chat=True)

    def model_card() -> dict:
        return {"id": settings.served_model_name, "object": "model", "created": 0, "owned_by": "specgauge",
                "max_model_len": engine.max_model_len}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def retrieve_model(model_id: str):
        check_model(model_id)
        return model_card()

    def meta_info(handle: RequestHandle, event: StreamEvent, max_new_tokens: int) -> dict:
        finish = None
        if event.finished:
            if event.finish_reason == "length":
                finish = {"type": "length", "length": max_new_tokens}
            elif event.finish_reason == "stop":
                finish = {"type": "stop", "matched": event.matched_stop}
            else:
                finish = {"type": "abort", "message": event.error or event.finish_reason}
        info = {"id": handle.public_id, "finish_reason": finish, "prompt_tokens": len(handle.prompt_ids),
                "completion_tokens": event.completion_tokens, "cached_tokens": 0,
                "e2e_latency": time.perf_counter() - handle.started}
        info.update(spec_fields(event))
        return info

    @app.post("/generate", openapi_extra=documented(GenerateRequest))
    async def generate(request: Request):
        body = await parse(request, GenerateRequest)
        if (body.text is None) == (body.input_ids is None):
            raise APIError(400, "give exactly one of text and input_ids", param="text", code="invalid_value")
        param = "text" if body.text is not None else "input_ids"
        prompt_ids = tokenizer.encode(body.text) if body.text is not None else list(body.input_ids)
        check_prompt(prompt_ids, param)
        sp = body.sampling_params
        max_new = resolve_max_tokens(prompt_ids, sp.max_new_tokens, None, "sampling_params.max_new_tokens")
        handle = client.submit(prompt_ids, sampling(sp, max_new), settings.retry_after_s, rid=body.rid)
        if not body.stream:
            text, last, tokens = await collect(request, handle)
            return JSONResponse({"text": text, "output_ids": tokens, "meta_info": meta_info(handle, last, max_new)})

        async def stream() -> AsyncIterator[bytes]:
            try:
                async for line in generate_events():
                    yield line
            finally:
                handle.close()

        async def generate_events() -> AsyncIterator[bytes]:
            text, tokens = "", []
            async for event in handle.events():
                if event.error:
                    yield _sse(error_event(event))
                    break
                text += event.text_delta
                tokens.extend(event.token_ids)
                incremental = settings.incremental_streaming_output
                yield _sse({"text": event.text_delta if incremental else text,
                            "output_ids": list(event.token_ids) if incremental else list(tokens),
                            "meta_info": meta_info(handle, event, max_new)})
            yield _sse("[DONE]")

        return StreamingResponse(stream(), media_type="text/event-stream")

    def server_info() -> dict:
        cfg = engine.config
        return {"version": __version__, "model_path": cfg.model_dir, "served_model_name": settings.served_model_name,
                "device": cfg.device, "dtype": str(cfg.torch_dtype).removeprefix("torch."),
                "weight_packing": engine.model.weight_packing,
                # every token's logits are the same bits whatever shares its step (see docs/engine.md)
                "batch_invariant": engine.model.batch_invariant,
                "max_running_requests": cfg.scheduler.max_running, "max_waiting_requests": cfg.scheduler.max_waiting,
                "incremental_streaming_output": settings.incremental_streaming_output,
                "speculative_algorithm": cfg.speculative.algorithm if cfg.speculative.enabled else None,
                **speculative_settings(), "internal_states": [engine.snapshot()]}

    def speculative_settings() -> dict:
        spec = engine.config.speculative
        if not spec.enabled:
            return {}
        return {"speculative_num_steps": spec.num_steps, "speculative_eagle_topk": spec.eagle_topk,
                "speculative_num_draft_tokens": spec.draft_tokens,
                "speculative_draft_model_path": str(spec.draft_dir) if spec.algorithm == "EAGLE3" else None,
                "speculative_disable_above": spec.disable_above, "speculative_adaptive": spec.adaptive}

    @app.get("/get_server_info")
    async def get_server_info():
        return server_info()

    @app.get("/server_info")
    async def server_info_route():
        return server_info()

    @app.get("/debug/kv_blocks")
    def kv_blocks():  # a plain def: FastAPI runs it in a worker thread while the engine answers
        """The KV pool checked in the engine thread: free + used == total (``whole``), with counts."""
        audit = engine.kv_audit()
        return JSONResponse(audit, status_code=200 if audit["whole"] else 500)

    @app.get("/health")
    async def health():
        if not engine.alive:
            return APIError(503, "engine thread is not running", code="engine_down", error_type="server_error").response()
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics():
        return Response(engine.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    openapi = app.openapi

    def openapi_with_bodies() -> dict:
        document = openapi()
        document.setdefault("components", {}).setdefault("schemas", {}).update(schemas)
        return document

    app.openapi = openapi_with_bodies
    return app


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

    class HeaderTimeoutProtocol(AutoHTTPProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        _head_bytes: int | None = 0        # bytes of the request head so far; None once it is complete

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if counts_head and self._head_bytes is not None and not self.transport.is_closing():
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
                self._head_timer = self.loop.call_later(timeout_s, self._head_timed_out)

        def _head_timed_out(self) -> None:
            self._head_timer = None
            waiting_for_head = self.cycle is None or self.cycle.response_complete
            if waiting_for_head and not self.transport.is_closing():
                log.info("closed a connection that sent no complete request head within %.0fs", timeout_s)
                self.transport.close()

    return HeaderTimeoutProtocol


def _uvicorn_server(app: FastAPI, settings: ServerSettings):
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=3,
                            timeout_keep_alive=settings.keep_alive_timeout_s,
                            http=header_timeout_protocol(settings.header_timeout_s))
    return uvicorn.Server(config)


def serve_forever(engine: Engine, settings: ServerSettings, sock: socket.socket,
                  on_ready: Callable[[str], None] = print) -> None:
    """Start the engine thread and serve HTTP on ``sock`` (from :func:`bind_or_explain`, bound
    before the model loads) in the foreground until SIGINT/SIGTERM."""
    engine.start()
    try:
        server = _uvicorn_server(create_app(engine, settings), settings)
        on_ready(url_of(sock))
        server.run(sockets=[sock])
    finally:
        engine.stop()
        sock.close()


class BackgroundServer:
    """Serve ``engine`` from a thread of this process (tests, notebooks); a context manager."""

    def __init__(self, engine: Engine, settings: ServerSettings | None = None, host: str = "127.0.0.1") -> None:
        self.engine = engine
        self.settings = settings or ServerSettings()
        self.sock = bind_socket(host, 0)
        self.url = url_of(self.sock)
        self.app = create_app(engine, self.settings)
        self._server = _uvicorn_server(self.app, self.settings)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self.sock]},
                                        name="specgauge-http", daemon=True)

    def __enter__(self) -> "BackgroundServer":
        if not self.engine.alive:
            self.engine.start()
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)
        self.sock.close()
