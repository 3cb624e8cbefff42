"""Looking at a server before the load: reachable?, which model?, what is it? (fingerprint)."""

from __future__ import annotations

import asyncio
import errno
import ssl

import aiohttp
import orjson

from specgauge.client.endpoint import Endpoint, request_headers
from specgauge.client.proxy import proxy_refusal
from specgauge.client.records import ErrorClass
from specgauge.errors import UserError

PROBE_TIMEOUT_S = 10.0
FINGERPRINT_HEADERS = ("server", "x-powered-by", "via")
SERVER_INFO_PATHS = ("/get_server_info", "/server_info")


async def _get_json(session: aiohttp.ClientSession, endpoint: Endpoint, path: str) -> tuple[object, dict]:
    """``(JSON or None, response headers)`` of ``GET path``; never raises."""
    try:
        async with session.get(endpoint.url(path), headers=request_headers(endpoint),
                               ssl=tls_setting(endpoint)) as resp:
            headers = {k.lower(): v for k, v in resp.headers.items()}
            if resp.status != 200:
                return None, headers
            try:
                return orjson.loads(await resp.read()), headers
            except orjson.JSONDecodeError:
                return None, headers
    except Exception:
        return None, {}


def classify_exception(exc: BaseException, headers_received: bool) -> tuple[ErrorClass, str]:
    """Map an aiohttp exception of a probe to an :class:`ErrorClass` and a one-line message (the
    measured stream classifies its own: :mod:`specgauge.client.connection_pool`)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ErrorClass.DNS, text
    if isinstance(exc, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientConnectorSSLError,
                        aiohttp.ClientSSLError, ssl.SSLError)):
        return ErrorClass.TLS, text
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ConnectionRefusedError) or exc.os_error.errno == errno.ECONNREFUSED:
            return ErrorClass.CONNECT_REFUSED, text
        if isinstance(exc.os_error, ssl.SSLError):
            return ErrorClass.TLS, text
        return ErrorClass.CONNECT_FAILED, text
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ErrorClass.CONNECT_TIMEOUT, text
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        if headers_received:
            return ErrorClass.READ_TIMEOUT, "stream stalled: no data within the read timeout"
        return ErrorClass.HEADER_TIMEOUT, "no response headers within the header timeout"
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
                        aiohttp.ClientOSError, ConnectionResetError)):
        if headers_received:
            return ErrorClass.STREAM_CUT, text
        return ErrorClass.CONNECTION_LOST, f"connection closed before response headers ({text})"
    return ErrorClass.OTHER, text


def tls_setting(endpoint: Endpoint) -> bool:
    """aiohttp's ``ssl=`` for ``endpoint``: False (no certificate checks) with ``--insecure``."""
    return not endpoint.insecure


def _session() -> aiohttp.ClientSession:
    # trust_env: the probes take the same HTTP_PROXY / NO_PROXY route as the measured stream
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S), trust_env=True)


def first_model_id(models: object) -> str | None:
    """The first ``id`` of an OpenAI ``/v1/models`` listing."""
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        first = models["data"][0]
        if isinstance(first, dict) and first.get("id"):
            return str(first["id"])
    return None


async def detect_model(endpoint: Endpoint) -> str | None:
    """The server's model name: the first id of ``/v1/models``, else SGLang's
    ``/get_model_info`` ``model_path``; None when neither answers. Never raises."""
    async with _session() as session:
        models, _ = await _get_json(session, endpoint, "/v1/models")
        model = first_model_id(models)
        if model is None:
            info, _ = await _get_json(session, endpoint, "/get_model_info")
            if isinstance(info, dict) and info.get("model_path"):
                model = str(info["model_path"])
        return model


def is_vllm_models(models: object) -> bool:
    """Whether a ``/v1/models`` answer is vLLM's (every model ``owned_by: "vllm"``)."""
    data = models.get("data") if isinstance(models, dict) else None
    return bool(data) and all(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in data)


def server_of(fingerprint_: dict | None) -> str | None:
    """``"sglang"`` when the fingerprint's ``/v1/models`` is SGLang's (every model ``owned_by:
    "sglang"``: ``ModelCard`` in ``python/sglang/srt/entrypoints/openai/protocol.py``), ``"vllm"``
    when it is vLLM's, else None (unknown, our engine, any other server)."""
    models = (fingerprint_ or {}).get("models")
    if is_vllm_models(models):
        return "vllm"
    data = models.get("data") if isinstance(models, dict) else None
    if data and all(isinstance(m, dict) and m.get("owned_by") == "sglang" for m in data):
        return "sglang"
    return None


async def fingerprint(endpoint: Endpoint) -> dict:
    """What the server says it is: ``/v1/models`` JSON, SGLang server info when present, and
    identifying response headers (``server``, ...). Never raises; missing parts are None.
    A server whose models are ``owned_by: "vllm"`` (vLLM's ``/v1/models``,
    ``ModelCard`` in ``vllm/entrypoints/serve/engine/serving/protocol.py``) is not asked for SGLang's server
    info routes."""
    async with _session() as session:
        models, headers = await _get_json(session, endpoint, "/v1/models")
        server_info = None
        for path in () if is_vllm_models(models) else SERVER_INFO_PATHS:
            server_info, more_headers = await _get_json(session, endpoint, path)
            headers = headers or more_headers
            if server_info is not None:
                break
        return {"base_url": endpoint.base_url, "api": endpoint.api, "models": models,
                "server_info": server_info,
                "headers": {k: headers[k] for k in FINGERPRINT_HEADERS if k in headers}}


async def unreachable_reason(endpoint: Endpoint, *, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the server does not answer HTTP at all ("connection refused", ...), or None when it
    answers (any status counts). Never raises."""
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s), trust_env=True)
    async with session:
        try:
            async with session.get(endpoint.url("/v1/models"), headers=request_headers(endpoint),
                                   ssl=tls_setting(endpoint)) as resp:
                await resp.read()
            return None
        except Exception as exc:
            error_class, message = classify_exception(exc, headers_received=False)
            return {"connect_refused": "connection refused", "dns": "host name not found (DNS)",
                    "tls": "TLS handshake failed", "connect_timeout": "connect timed out",
                    "header_timeout": "no response within the timeout"}.get(error_class.value, message)


async def check_reachable(endpoint: Endpoint) -> None:
    """Raise :class:`UserError` ("cannot reach URL: connection refused") unless the server
    answers HTTP at all (any status counts as reachable), or when the proxy the environment names
    for it is one the measured stream refuses (:mod:`specgauge.client.proxy`)."""
    reason = proxy_refusal(endpoint.base_url) or await unreachable_reason(endpoint)
    if reason is not None:
        raise UserError(f"cannot reach {endpoint.base_url}: {reason}")
