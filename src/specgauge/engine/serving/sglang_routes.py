"""SGLang's native API: ``/generate``, ``/server_info`` and ``/get_server_info``."""

from __future__ import annotations

import time
from typing import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from specgauge import __version__
from specgauge.engine.serving.protocol import GenerateRequest
from specgauge.engine.serving import payloads
from specgauge.engine.serving.context import ServerContext
from specgauge.engine.serving.engine_client import RequestHandle, closing, collect
from specgauge.engine.serving.errors import APIError
from specgauge.engine.serving.payloads import sse


def sglang_router(ctx: ServerContext) -> APIRouter:
    """The SGLang-native routes over ``ctx``."""
    router = APIRouter()

    @router.post("/generate", openapi_extra=ctx.documented(GenerateRequest))
    async def generate(request: Request):
        return await answer_generate(ctx, request)

    @router.get("/get_server_info")
    async def get_server_info():
        return server_info(ctx)

    @router.get("/server_info")
    async def server_info_route():
        return server_info(ctx)

    return router


def server_info(ctx: ServerContext) -> dict:
    engine, settings = ctx.engine, ctx.settings
    return payloads.server_info(__version__, engine.config, settings.served_model_name,
                                settings.incremental_streaming_output, engine.model.weight_packing,
                                engine.model.batch_invariant, engine.snapshot(),
                                engine.model.attention_path)


def meta_info(handle: RequestHandle, event, max_new_tokens: int) -> dict:
    return payloads.meta_info(handle.public_id, len(handle.prompt_ids), event, max_new_tokens,
                              time.perf_counter() - handle.started)


async def answer_generate(ctx: ServerContext, request: Request):
    """Answer ``/generate``, whole or streamed."""
    body = await ctx.parse(request, GenerateRequest)
    if (body.text is None) == (body.input_ids is None):
        raise APIError(400, "give exactly one of text and input_ids", param="text", code="invalid_value")
    param = "text" if body.text is not None else "input_ids"
    prompt_ids = ctx.tokenizer.encode(body.text) if body.text is not None else list(body.input_ids)
    ctx.check_prompt(prompt_ids, param)
    sp = body.sampling_params
    max_new = ctx.resolve_max_tokens(prompt_ids, sp.max_new_tokens, None, "sampling_params.max_new_tokens")
    handle = ctx.client.submit(prompt_ids, payloads.sampling_params(sp, max_new), ctx.settings.retry_after_s,
                               rid=body.rid)
    if not body.stream:
        text, last, tokens = await collect(request, handle)
        return JSONResponse(payloads.generate_payload(text, tokens, meta_info(handle, last, max_new)))
    lines = generate_events(handle, max_new, ctx.settings.incremental_streaming_output)
    return StreamingResponse(closing(handle, lines), media_type="text/event-stream")


async def generate_events(handle: RequestHandle, max_new: int, incremental: bool) -> AsyncIterator[bytes]:
    """``/generate``'s server-sent events: cumulative text and ids, or deltas when ``incremental``."""
    text, tokens = "", []
    async for event in handle.events():
        if event.error:
            yield sse(payloads.error_body(event))
            break
        text += event.text_delta
        tokens.extend(event.token_ids)
        yield sse(payloads.generate_payload(event.text_delta if incremental else text,
                                            list(event.token_ids) if incremental else list(tokens),
                                            meta_info(handle, event, max_new)))
    yield sse("[DONE]")
