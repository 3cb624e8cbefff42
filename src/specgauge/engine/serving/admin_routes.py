"""Operations: ``/health``, ``/metrics`` (Prometheus) and ``/debug/kv_blocks``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from specgauge.engine.serving.context import ServerContext
from specgauge.engine.serving.errors import APIError


def admin_router(ctx: ServerContext) -> APIRouter:
    """The health, metrics and debug routes over ``ctx``."""
    router = APIRouter()
    engine = ctx.engine

    @router.get("/debug/kv_blocks")
    def kv_blocks():  # a plain def: FastAPI runs it in a worker thread while the engine answers
        """The KV pool checked in the engine thread: free + used == total (``whole``), with counts."""
        audit = engine.kv_audit()
        return JSONResponse(audit, status_code=200 if audit["whole"] else 500)

    @router.get("/health")
    async def health():
        if not engine.alive:
            return APIError(503, "engine thread is not running", code="engine_down", error_type="server_error").response()
        return {"status": "ok"}

    @router.get("/metrics")
    async def metrics():
        return Response(engine.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return router
