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


def next_action_requests(scenarios, domain: str, max_tokens: int) -> list[SuiteRequest]:
    """Agent transcripts as requests: each ``(system, task, steps)`` scenario (``steps`` = (action,
    observation) pairs) cut after 0, 1, 2, ... steps; the model writes the next action."""
    built = []
    for system, task, steps in scenarios:
        turns: list[tuple[str, str]] = [("system", system), ("user", task)]
        for depth in range(len(steps) + 1):
            built.append(conversation(list(turns), domain, max_tokens, notes=f"next action after {depth} steps"))
            if depth < len(steps):
                action, observation = steps[depth]
                turns += [("assistant", action), ("user", observation)]
    return built
