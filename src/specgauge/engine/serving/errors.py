"""OpenAI-style error responses, and how a pydantic validation error becomes one."""

from __future__ import annotations

import typing

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError


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


class ClientGone(Exception):
    """The client hung up while its request body was being read."""


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


def validation_error(exc: ValidationError, model: type[BaseModel]) -> APIError:
    """The 400 answering the first error of ``exc`` (raised validating ``model``)."""
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
