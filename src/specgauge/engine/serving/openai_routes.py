"""OpenAI's API: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``."""

from __future__ import annotations

import time
import uuid
from typing import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from specgauge.engine.serving.protocol import ChatCompletionRequest, CompletionRequest
from specgauge.engine.serving import payloads
from specgauge.engine.serving.context import ServerContext
from specgauge.engine.serving.engine_client import RequestHandle, closing, collect
from specgauge.engine.serving.errors import APIError
from specgauge.engine.serving.payloads import sse


def openai_router(ctx: ServerContext) -> APIRouter:
    """The OpenAI routes over ``ctx``."""
    router = APIRouter()

    @router.post("/v1/completions", openapi_extra=ctx.documented(CompletionRequest))
    async def completions(request: Request):
        return await complete(ctx, request, chat=False)

    @router.post("/v1/chat/completions", openapi_extra=ctx.documented(ChatCompletionRequest))
    async def chat_completions(request: Request):
        return await complete(ctx, request, chat=True)

    @router.get("/v1/models")
    async def models():
        return {"object": "list", "data": [payloads.model_card(ctx.settings.served_model_name,
                                                               ctx.engine.max_model_len)]}

    @router.get("/v1/models/{model_id:path}")
    async def retrieve_model(model_id: str):
        ctx.check_model(model_id)
        return payloads.model_card(ctx.settings.served_model_name, ctx.engine.max_model_len)

    return router


def prompt_ids_of(ctx: ServerContext, body, chat: bool) -> list[int]:
    """The prompt's token ids: the chat template applied to the messages, or the prompt as given."""
    if not chat:
        return ctx.tokenizer.encode(body.prompt) if isinstance(body.prompt, str) else list(body.prompt)
    messages = [{"role": m.template_role, "content": m.text()} for m in body.messages]
    try:
        rendered = ctx.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    except Exception as exc:  # a template may refuse a conversation (raise_exception)
        raise APIError(400, f"messages: the model's chat template rejected them: {exc}",
                       param="messages", code="invalid_value") from None
    return ctx.tokenizer.encode(rendered)


async def complete(ctx: ServerContext, request: Request, chat: bool):
    """Answer a completion (``chat`` False) or chat completion, whole or streamed."""
    body = await ctx.parse(request, ChatCompletionRequest if chat else CompletionRequest)
    ctx.check_model(body.model)
    prompt_ids = prompt_ids_of(ctx, body, chat)
    ctx.check_prompt(prompt_ids, "messages" if chat else "prompt")
    asked, default, param = payloads.openai_token_request(body, chat)
    max_tokens = ctx.resolve_max_tokens(prompt_ids, asked, default, param)
    handle = ctx.client.submit(prompt_ids, payloads.sampling_params(body, max_tokens), ctx.settings.retry_after_s)
    response_id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    head = payloads.openai_head(response_id, chat, int(time.time()), ctx.settings.served_model_name)
    if not body.stream:
        text, last, _ = await collect(request, handle)
        return JSONResponse(payloads.openai_response(head, chat, text, last, len(handle.prompt_ids)))
    options = body.stream_options
    lines = openai_events(handle, head, chat, continuous_usage=bool(options and options.continuous_usage_stats),
                          include_usage=bool(options and options.include_usage))
    return StreamingResponse(closing(handle, lines), media_type="text/event-stream")


async def openai_events(handle: RequestHandle, head: dict, chat: bool, continuous_usage: bool,
                        include_usage: bool) -> AsyncIterator[bytes]:
    """A completion's server-sent events, up to ``[DONE]``."""
    prompt_tokens = len(handle.prompt_ids)
    if chat:
        yield sse(payloads.openai_role_chunk(head))
    last = None
    async for event in handle.events():
        last = event
        if event.error:
            yield sse(payloads.error_body(event))
            break
        chunk = payloads.openai_chunk(head, chat, event, prompt_tokens, continuous_usage)
        if chunk is not None:
            yield sse(chunk)
    if last is not None and not last.error and include_usage:
        yield sse(payloads.openai_usage_chunk(head, last, prompt_tokens))
    yield sse("[DONE]")
