"""The registry of endpoint adapters, one module each: ``get_adapter(name)``."""

from __future__ import annotations

from specgauge.client.adapters.base import Adapter, EventError, StreamState
from specgauge.client.adapters.openai_chat import ADAPTER as OPENAI_CHAT
from specgauge.client.adapters.openai_completions import ADAPTER as OPENAI_COMPLETIONS
from specgauge.client.adapters.sglang import ADAPTER as SGLANG
from specgauge.errors import UserError

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (OPENAI_CHAT, OPENAI_COMPLETIONS, SGLANG)}

__all__ = ["ADAPTERS", "Adapter", "EventError", "StreamState", "get_adapter"]


def get_adapter(name: str) -> Adapter:
    """The adapter for ``--api NAME``; unknown names raise :class:`UserError`."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise UserError(f"unknown --api {name!r} (choose one of: {', '.join(ADAPTERS)})") from None
