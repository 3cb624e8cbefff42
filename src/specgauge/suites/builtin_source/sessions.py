"""``sessions@1``: multi-turn sessions — a coding assistant asked follow-ups, and agents fed tool results.

Each request is a session (``next_turns``): the first turn is a question or a task, and each later turn
is sent by the load runner after the server's actual answer to the one before (load/sessions.py), so
the server sees its own answers again, as it does in a chat or an agent loop. Coding sessions take a
short question of the ``coding`` suite and ask follow-ups a user asks of an answer (tests, edge cases,
types); agentic sessions give a compact tool list and a task of the ``agentic`` suite, then that
scenario's tool results (``OBSERVATION: ...``) as the following turns, whatever action the model took:
a replayed environment. Sized for the default model's 512-token context: short turns and 48 output
tokens a turn, three turns (tests/suites/test_sessions_suite.py checks the fit).
"""

from __future__ import annotations

from specgauge.suites.builtin_source import agentic, coding
from specgauge.suites.model import ChatMessage, SuiteRequest

NAME = "sessions"
VERSION = 1
MAX_TOKENS = 48
DESCRIPTION = ("Multi-turn sessions: coding-assistant conversations (a coding question, then follow-ups about the "
               "answer) and agent loops (a task, then tool results as the next turns). Each later turn is sent "
               "after the server's actual answer, which joins the history. Three turns of 48 output tokens, "
               "sized for a 512-token context. Intended max_tokens: 48.")

FOLLOW_UPS = (
    ("Add type hints and a one-line docstring.", "Now write two pytest tests for it."),
    ("What happens with empty input? Handle it.", "Shorten it without changing what it does."),
    ("Explain the tricky line in one sentence.", "Give one more example of using it."),
)
CODING_QUESTIONS = (0, 1, 4, 5, 9, 12, 17, 20, 26, 29)   # short questions of coding.SHORT
AGENT_SYSTEM = ("You are an agent. Reply with one THOUGHT line, then one ACTION line holding a JSON object "
                '{"tool": NAME, "arguments": {...}}. Tools: bash, search, read_file, edit_file, submit, '
                "search_flights, get_weather, calendar_list, calendar_create, send_email. "
                "You get an OBSERVATION after each action.")
AGENT_SCENARIOS = (0, 1, 2, 4, 7, 9, 10)   # agentic.SCENARIOS whose sessions fit 512 tokens
AGENT_OBSERVATIONS = 2              # tool results sent as later turns
MAX_OBSERVATION_CHARS = 420


def _coding_sessions() -> list[SuiteRequest]:
    built = []
    for number, index in enumerate(CODING_QUESTIONS):
        question = coding.SHORT[index]
        follow_ups = FOLLOW_UPS[number % len(FOLLOW_UPS)]
        built.append(SuiteRequest(
            messages=(ChatMessage(role="user", content=question),),
            next_turns=tuple(ChatMessage(role="user", content=text) for text in follow_ups),
            max_tokens=MAX_TOKENS, domain="coding", source="builtin", notes="coding-assistant session, 3 turns"))
    return built


def _agent_sessions() -> list[SuiteRequest]:
    built = []
    for index in AGENT_SCENARIOS:
        _, task, steps = agentic.SCENARIOS[index]
        observations = [obs[:MAX_OBSERVATION_CHARS] for _, obs in steps[:AGENT_OBSERVATIONS]]
        built.append(SuiteRequest(
            messages=(ChatMessage(role="system", content=AGENT_SYSTEM), ChatMessage(role="user", content=task)),
            next_turns=tuple(ChatMessage(role="user", content=text) for text in observations),
            max_tokens=MAX_TOKENS, domain="agentic", source="builtin",
            notes=f"agent session: task then {len(observations)} tool results (agentic scenario {index})"))
    return built


def requests() -> list[SuiteRequest]:
    """Coding and agentic sessions, interleaved."""
    coding_sessions, agent_sessions = _coding_sessions(), _agent_sessions()
    out = []
    for i in range(max(len(coding_sessions), len(agent_sessions))):
        out += coding_sessions[i:i + 1] + agent_sessions[i:i + 1]
    return out
