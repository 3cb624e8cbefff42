"""Multi-turn sessions: one simulated user sends a session's turns in order, each after the last answer.

A suite request with ``next_turns`` is a session (:class:`~specgauge.suites.model.SuiteRequest`).
Its first turn is its ``messages``; turn k+1 is sent once turn k's answer has arrived, after a
think time, with that **actual answer** appended to the history as an assistant message and then
the next turn's message (a user question, or a tool result for an agent). Nothing canned is ever
put in the history in place of what the server said.

Numbering: in a suite with sessions, every request (a session of one turn too) is a session.
Turn ``t`` of the session in slot ``s`` of a point is stored with ``request_index = s * TURN_STRIDE
+ t``, ``session_index = s`` and ``turn_index = t``, so both arms of a comparison pair by
(session, turn), and ``--resume`` skips the sessions whose first turn is stored (a session cut in
the middle is not continued: its later turns would need a history that the run no longer holds).

History policy: the history is never truncated or summarised. When the server reports its context
and a tokenizer is known, a session ends before a turn whose prompt (the whole history, as served)
plus its ``max_tokens`` would not fit, and the point says how many sessions ended so; without them,
the server's own refusal of a too-long turn is that turn's error record and ends the session.
A failed turn ends its session (the next turn would need its answer).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Awaitable, Callable

from specgauge.client.endpoint import Endpoint
from specgauge.client.records import RequestRecord
from specgauge.suites.model import ChatMessage, SuiteRequest

TURN_STRIDE = 1000   # request_index = session slot * TURN_STRIDE + turn (suites.model.MAX_SESSION_TURNS < this)

SendTurn = Callable[[SuiteRequest, int, int], Awaitable[RequestRecord]]   # request, request_index, scheduled_ns


def turn_request_index(session_index: int, turn_index: int) -> int:
    """The stored request index of a session's turn."""
    return session_index * TURN_STRIDE + turn_index


def session_of(request_index: int) -> int:
    """The session slot a stored request index belongs to."""
    return request_index // TURN_STRIDE


@dataclass
class SessionEnds:
    """Why sessions of a point ended before their last turn (counts; reported with the point)."""

    context: int = 0          # the next turn would not fit the server's context
    failed_turn: int = 0      # a turn failed, so the next one had no answer to follow
    turns_not_sent: int = 0   # later turns left unsent for either reason
    examples: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        """One sentence per reason that happened."""
        out = []
        if self.context:
            out.append(f"{self.context} session(s) ended before a turn whose history + max_tokens would exceed the "
                       f"server's context (history is never truncated)")
        if self.failed_turn:
            out.append(f"{self.failed_turn} session(s) ended at a failed turn (the next turn needs its answer)")
        if self.turns_not_sent:
            out.append(f"{self.turns_not_sent} later turn(s) not sent"
                       + (f" (e.g. {'; '.join(self.examples[:2])})" if self.examples else ""))
        return out


def think_time_s(spec_seed: int, session_index: int, turn_index: int, mean_ms: float, distribution: str) -> float:
    """The pause before a session's turn ``turn_index`` (> 0): ``mean_ms`` fixed, or drawn from an
    exponential or a uniform(0, 2 x mean) distribution, deterministic in (seed, session, turn)."""
    if mean_ms <= 0:
        return 0.0
    if distribution == "fixed":
        return mean_ms / 1000.0
    rng = random.Random(f"think:{spec_seed}:{session_index}:{turn_index}")   # str seeds are stable across processes
    if distribution == "exponential":
        return rng.expovariate(1000.0 / mean_ms)
    return rng.uniform(0.0, 2.0 * mean_ms) / 1000.0


def fits_context(endpoint: Endpoint, request: SuiteRequest, max_tokens: int) -> bool:
    """Whether ``request`` (a whole history) plus ``max_tokens`` fits the server's context, counted
    with the run's tokenizer as the server will see it; True when either is unknown (the server's
    refusal then ends the session)."""
    if endpoint.context_length is None or not endpoint.tokenizer_path:
        return True
    from specgauge.client.prompts import chat_template
    from specgauge.client.tokens import load_tokenizer
    from specgauge.load.workload import prompt_tokens_as_served

    tokenizer = load_tokenizer(endpoint.tokenizer_path)
    templated = chat_template(endpoint.tokenizer_path) is not None
    tokens = prompt_tokens_as_served(tokenizer, endpoint.tokenizer_path, request, endpoint.api, templated)
    return tokens + max_tokens <= endpoint.context_length


async def run_session(request: SuiteRequest, session_index: int, first_scheduled_ns: int, *, send: SendTurn,
                      keep: Callable[[RequestRecord], Awaitable[None]], endpoint: Endpoint, max_tokens: int | None,
                      think: Callable[[int], float], ends: SessionEnds,
                      may_continue: Callable[[], bool] = lambda: True) -> None:
    """Send ``request``'s turns in order on one user (module doc); ``keep`` gets each turn's record
    as it finishes. ``think(turn)`` is the pause in seconds before that turn; ``may_continue()``
    False (a deadline passed, the server is down) stops before the next turn."""
    history: list[ChatMessage] = list(request.messages or ())
    later = list(request.next_turns or ())
    scheduled_ns = first_scheduled_ns
    for turn in range(request.num_turns):
        if turn > 0:
            history += [later[turn - 1]]
        turn_request = SuiteRequest(messages=tuple(history), max_tokens=request.max_tokens, domain=request.domain,
                                    source=request.source)
        if turn > 0 and not fits_context(endpoint, turn_request, max_tokens or request.max_tokens):
            ends.context += 1
            ends.turns_not_sent += request.num_turns - turn
            ends.examples.append(f"session {session_index} stopped before turn {turn}")
            return
        record = await send(turn_request, turn_request_index(session_index, turn), scheduled_ns)
        record.session_index, record.turn_index = session_index, turn
        await keep(record)
        if turn + 1 == request.num_turns:
            return
        if not record.ok:
            ends.failed_turn += 1
            ends.turns_not_sent += request.num_turns - turn - 1
            return
        history.append(ChatMessage(role="assistant", content=record.output_text))
        pause = think(turn + 1)
        if pause > 0:
            await asyncio.sleep(pause)
        if not may_continue():
            ends.turns_not_sent += request.num_turns - turn - 1
            return
        scheduled_ns = perf_counter_ns()
