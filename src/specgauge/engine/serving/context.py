"""What every route reads: the front end's settings and the :class:`ServerContext` of one app."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request
from pydantic import BaseModel

from specgauge.engine.core.engine import Engine
from specgauge.engine.serving import payloads
from specgauge.engine.serving.engine_client import EngineClient
from specgauge.engine.serving.errors import APIError
from specgauge.engine.serving.request_body import openapi_body, read_body


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


@dataclass(frozen=True)
class ServerContext:
    """One app's engine, settings and admission, with the checks routes share.

    ``schemas`` collects the OpenAPI schemas the request bodies refer to (see :meth:`documented`)."""

    engine: Engine
    settings: ServerSettings
    client: EngineClient
    schemas: dict = field(default_factory=dict)

    @classmethod
    def of(cls, engine: Engine, settings: ServerSettings) -> "ServerContext":
        return cls(engine, settings, EngineClient(engine))

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    async def parse(self, request: Request, model: type[BaseModel]) -> BaseModel:
        """The request's body as ``model`` (see :func:`read_body`)."""
        return await read_body(request, model, self.settings.max_body_bytes)

    def documented(self, model: type[BaseModel]) -> dict:
        """``openapi_extra`` for a route that reads ``model`` from its body (the routes parse the
        body themselves, to answer OpenAI-style errors)."""
        body, defs = openapi_body(model)
        self.schemas.update(defs)
        return body

    def check_model(self, name: str | None) -> None:
        """A 404 for a model name other than the one served (None: the caller named none)."""
        served = self.settings.served_model_name
        if name is not None and name != served:
            raise APIError(404, f"model {name!r} does not exist; this server serves {served!r}",
                           param="model", code="model_not_found")

    def check_prompt(self, prompt_ids: list[int], param: str) -> None:
        payloads.check_prompt(prompt_ids, param, self.engine.model.config.vocab_size, self.engine.max_model_len)

    def resolve_max_tokens(self, prompt_ids: list[int], asked: int | None, default: int | None, param: str) -> int:
        return payloads.resolve_max_tokens(len(prompt_ids), asked, default, param, self.engine.max_model_len)
