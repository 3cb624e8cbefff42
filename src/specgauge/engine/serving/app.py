"""The HTTP front end's assembly: OpenAI and SGLang-native routes over the engine thread.

Requests are validated by the routes (``openai_routes``, ``sglang_routes``, ``admin_routes``),
then handed to the engine thread (:meth:`Engine.submit`) through ``engine_client``. This module
puts the routers, error handlers and middleware together (:func:`create_app`) and runs the app
with uvicorn (:func:`serve_forever`, :class:`BackgroundServer`).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from specgauge import __version__
from specgauge.engine.core.engine import Engine
from specgauge.engine.serving.admin_routes import admin_router
from specgauge.engine.serving.context import ServerContext, ServerSettings
from specgauge.engine.serving.errors import APIError, ClientGone
from specgauge.engine.serving.openai_routes import openai_router
from specgauge.engine.serving.sglang_routes import sglang_router
from specgauge.engine.serving.transport import (APIKeyMiddleware, bind_or_explain, bind_socket,
                                                header_timeout_protocol, url_of)

__all__ = ["BackgroundServer", "ServerSettings", "bind_or_explain", "create_app", "serve_forever"]

log = logging.getLogger(__name__)


def create_app(engine: Engine, settings: ServerSettings) -> FastAPI:
    """The FastAPI application serving ``engine``."""
    app = FastAPI(title="specgauge engine", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    ctx = ServerContext.of(engine, settings)
    app.state.engine, app.state.client, app.state.settings = engine, ctx.client, settings
    for router in (openai_router(ctx), sglang_router(ctx), admin_router(ctx)):
        app.include_router(router)
    add_error_handlers(app)
    if settings.api_key:
        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key)
    openapi = app.openapi

    def openapi_with_bodies() -> dict:  # the routes parse their bodies: add the schemas they refer to
        document = openapi()
        document.setdefault("components", {}).setdefault("schemas", {}).update(ctx.schemas)
        return document

    app.openapi = openapi_with_bodies
    return app


def add_error_handlers(app: FastAPI) -> None:
    """Every error leaves as an OpenAI-style JSON error (a hang-up mid-body: a bare 499)."""

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
