"""What the server says about its model: context length and where its tokenizer lives.

Sources, each read where the engine puts it (never guessed):

- ``GET /v1/models``: ``data[0].max_model_len`` — vLLM's model card (``vllm/entrypoints/openai/
  serving_models.py``), SGLang's ``ModelCard.max_model_len`` (``python/sglang/srt/entrypoints/openai/
  protocol.py``) and the embedded engine; vLLM's ``root`` is the model path it loaded.
- SGLang ``GET /get_model_info``: ``model_path``, ``tokenizer_path``.
- SGLang ``GET /get_server_info`` (newer ``/server_info``): the server args (``context_length``,
  ``model_path``, ``tokenizer_path``) and the scheduler's ``max_total_num_tokens`` (the KV-cache
  capacity in tokens: a request longer than that cannot run either); the embedded engine answers
  with ``model_path``.

The server's tokenizer is usable when one of those paths names a ``tokenizer.json`` (or a folder
holding one) on this machine — the embedded engine's always does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specgauge.client.endpoint import Endpoint
from specgauge.client.probe import SERVER_INFO_PATHS, _get_json, _session

CONTEXT_KEYS = ("max_model_len", "context_length", "context_len", "max_context_length")


@dataclass(frozen=True)
class ServerModel:
    """The server's context (prompt + output tokens it accepts) and its tokenizer, when known."""

    context_length: int | None = None
    context_source: str | None = None        # which route and field said so
    tokenizer_path: str | None = None        # a tokenizer.json on this machine
    tokenizer_source: str | None = None


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _first_context(data: object, route: str) -> tuple[int | None, str | None]:
    if not isinstance(data, dict):
        return None, None
    for key in CONTEXT_KEYS:
        value = _positive_int(data.get(key))
        if value is not None:
            return value, f"{route} {key}"
    return None, None


def local_tokenizer(path_text: object) -> str | None:
    """``path_text`` as a local ``tokenizer.json``: the file itself, or the one in that folder."""
    if not isinstance(path_text, str) or not path_text:
        return None
    path = Path(path_text)
    try:
        if path.is_file() and path.suffix == ".json":
            return str(path)
        candidate = path / "tokenizer.json"
        return str(candidate) if candidate.is_file() else None
    except OSError:
        return None


async def describe_server_model(endpoint: Endpoint) -> ServerModel:
    """Ask the server for its context length and model/tokenizer paths (see the module doc).

    Never raises: what no route answers stays None.
    """
    async with _session() as session:
        models, _ = await _get_json(session, endpoint, "/v1/models")
        card = models["data"][0] if (isinstance(models, dict) and isinstance(models.get("data"), list)
                                     and models["data"] and isinstance(models["data"][0], dict)) else {}
        model_info, _ = await _get_json(session, endpoint, "/get_model_info")
        server_info = None
        for path in SERVER_INFO_PATHS:
            server_info, _ = await _get_json(session, endpoint, path)
            if server_info is not None:
                break
    context, source = _first_context(card, "/v1/models")
    if context is None:
        context, source = _first_context(model_info, "/get_model_info")
    if context is None:
        context, source = _first_context(server_info, "server info")
    capacity = _positive_int(server_info.get("max_total_num_tokens")) if isinstance(server_info, dict) else None
    if capacity is None and isinstance(server_info, dict) and isinstance(server_info.get("internal_states"), list):
        states = [s for s in server_info["internal_states"] if isinstance(s, dict)]
        capacity = _positive_int(states[0].get("max_total_num_tokens")) if states else None
    if capacity is not None and (context is None or capacity < context):
        context, source = capacity, "server info max_total_num_tokens (KV-cache capacity)"
    tokenizer, tokenizer_source = None, None
    candidates = (("/get_model_info", model_info, "tokenizer_path"), ("server info", server_info, "tokenizer_path"),
                  ("/get_model_info", model_info, "model_path"), ("server info", server_info, "model_path"),
                  ("/v1/models", card, "root"))
    for route, data, key in candidates:
        found = local_tokenizer(data.get(key)) if isinstance(data, dict) else None
        if found:
            tokenizer, tokenizer_source = found, f"the server's own ({route} {key})"
            break
    return ServerModel(context, source, tokenizer, tokenizer_source)
