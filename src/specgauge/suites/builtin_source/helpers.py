"""Small constructors the built-in suite sources are written with."""

from __future__ import annotations

from specgauge.suites.model import ChatMessage, SuiteRequest


def ask(text: str, domain: str, max_tokens: int, notes: str | None = None, system: str | None = None) -> SuiteRequest:
    """A single-turn request: an optional system message and one user message."""
    messages = ([ChatMessage(role="system", content=system)] if system else []) + [ChatMessage(role="user", content=text)]
    return SuiteRequest(messages=tuple(messages), max_tokens=max_tokens, domain=domain, source="builtin", notes=notes)


def conversation(turns: list[tuple[str, str]], domain: str, max_tokens: int, notes: str | None = None) -> SuiteRequest:
    """A multi-turn request from (role, content) pairs; the last turn is what the model answers."""
    messages = tuple(ChatMessage(role=role, content=content) for role, content in turns)
    return SuiteRequest(messages=messages, max_tokens=max_tokens, domain=domain, source="builtin", notes=notes)
