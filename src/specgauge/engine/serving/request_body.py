"""Reading a request's JSON body: media type, size limit, RFC 8259 numbers, the pydantic model."""

from __future__ import annotations

import json

from fastapi import Request
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from specgauge.engine.serving.errors import APIError, ClientGone, validation_error

NON_STANDARD_NUMBERS = ("NaN", "Infinity", "-Infinity")


async def read_body(request: Request, model: type[BaseModel], max_body_bytes: int) -> BaseModel:
    """``request``'s body as ``model``, or an :class:`APIError` (415, 413, 400) saying what is wrong;
    :class:`ClientGone` when the client hangs up before the body's end."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise APIError(415, f"Content-Type must be application/json, got {content_type or 'none'!r}",
                       code="unsupported_media_type")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_body_bytes:
        raise APIError(413, f"request body over the limit of {max_body_bytes} bytes", code="body_too_large")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                raise APIError(413, f"request body over the limit of {max_body_bytes} bytes", code="body_too_large")
    except ClientDisconnect:
        raise ClientGone() from None
    constant = non_standard_number(bytes(body))
    if constant is not None:
        raise APIError(400, f"malformed JSON body: {constant} is not a JSON number (RFC 8259)", code="invalid_json")
    try:
        return model.model_validate_json(bytes(body))
    except ValidationError as exc:
        raise validation_error(exc, model) from None


def _refuse_constant(name: str):
    raise ValueError(name)


def non_standard_number(body: bytes) -> str | None:
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


def openapi_body(model: type[BaseModel]) -> tuple[dict, dict]:
    """A route's OpenAPI ``requestBody`` from its pydantic model, and the schemas it refers to."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    body = {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
    return body, defs
