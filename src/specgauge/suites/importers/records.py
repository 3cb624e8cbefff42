"""Turn one imported record (a JSON object, a table row, a CSV row) into a :class:`SuiteRequest`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specgauge.errors import UserError
from specgauge.suites.chat_templates import messages_from_dicts
from specgauge.suites.model import ChatMessage, SuiteRequest

# MT-bench's eight categories, mapped onto the built-in suites' domains.
MT_BENCH_DOMAINS = {"writing": "chat", "roleplay": "chat", "extraction": "chat", "reasoning": "reasoning",
                    "math": "reasoning", "coding": "coding", "stem": "encyclopedic", "humanities": "encyclopedic"}
MAX_TOKENS_FLOOR, MAX_TOKENS_CEILING = 16, 2048


@dataclass(frozen=True)
class ImportDefaults:
    """What a record does not say: its domain, ``max_tokens`` and source tag."""

    domain: str | None = None      # forces the domain of every request when set
    max_tokens: int = 256
    source: str = "import"


def request_from_record(record: Any, where: str, defaults: ImportDefaults, flavor: str = "generic") -> SuiteRequest:
    """One request from ``record``: ``messages`` | ``conversations`` (ShareGPT) | ``turns`` (MT-/Spec-Bench;
    more than one turn makes a multi-turn session) | ``prompt``. ``flavor`` is ``generic``, ``mtbench`` or
    ``specbench`` (how ``category`` becomes the domain).

    A trailing assistant reply is dropped and sets ``max_tokens`` (about 4 characters a token)."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected an object, got {type(record).__name__}")
    if flavor in ("mtbench", "specbench") and record.get("turns") is None:
        keys = ", ".join(sorted(map(str, record))) or "nothing"
        raise UserError(f"{where}: not an {'MT-bench' if flavor == 'mtbench' else 'Spec-Bench'} question "
                        f"(needs 'turns'; found: {keys})")
    messages: list[ChatMessage] | None = None
    next_turns: tuple[ChatMessage, ...] | None = None
    prompt: str | None = None
    max_tokens = record.get("max_tokens")
    if record.get("messages") is not None or record.get("conversations") is not None:
        raw = record.get("messages") if record.get("messages") is not None else record.get("conversations")
        messages = messages_from_dicts(raw, where)
        if messages and messages[-1].role == "assistant":
            reply = messages.pop()
            max_tokens = max_tokens or _clamp(len(reply.content) // 4)
        if not any(m.role != "assistant" and m.content.strip() for m in messages):
            raise UserError(f"{where}: no user or system message to send")
    elif record.get("turns") is not None:
        messages, next_turns = session_turns(record["turns"], where)
    elif record.get("prompt") is not None:
        prompt = record["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise UserError(f"{where}: 'prompt' must be a non-empty string")
    else:
        keys = ", ".join(sorted(map(str, record))) or "none"
        raise UserError(f"{where}: a record needs 'messages', 'conversations', 'turns' or 'prompt' (found: {keys})")
    return SuiteRequest(
        messages=tuple(messages) if messages is not None else None,
        prompt=prompt,
        max_tokens=_max_tokens(max_tokens, defaults.max_tokens, where),
        domain=defaults.domain or _domain(record, flavor),
        source=str(record.get("source") or defaults.source),
        notes=_notes(record, flavor),
        next_turns=next_turns,
    )


def session_turns(turns: Any, where: str) -> tuple[list[ChatMessage], tuple[ChatMessage, ...] | None]:
    """``turns`` (MT-bench, Spec-Bench, SPEED-Bench: every turn a user turn of one conversation) as the
    first turn's messages and the later turns; the later ones are sent each after the server's actual
    answer to the one before (a multi-turn session, load/sessions.py)."""
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise UserError(f"{where}: 'turns' must be a non-empty list of non-empty strings")
    later = tuple(ChatMessage(role="user", content=t) for t in turns[1:])
    return [ChatMessage(role="user", content=turns[0])], later or None


def _domain(record: dict, flavor: str) -> str:
    category = record.get("domain") or record.get("category")
    if not category:
        return "general"
    category = str(category)
    if flavor == "mtbench" and not record.get("domain"):
        return MT_BENCH_DOMAINS.get(category, category)
    return category


def _notes(record: dict, flavor: str) -> str | None:
    if record.get("notes"):
        return str(record["notes"])
    if flavor in {"mtbench", "specbench"}:
        parts = [f"{flavor} question {record.get('question_id', '?')}", f"category {record.get('category', '?')}"]
        turns = record.get("turns") or []
        if len(turns) > 1:
            parts.append(f"a session of {len(turns)} turns, each after the previous answer")
        return "; ".join(parts)
    return None


def _max_tokens(value: Any, default: int, where: str) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: max_tokens must be an integer, got {value!r}") from None
    if number < 1:
        raise UserError(f"{where}: max_tokens must be at least 1, got {number}")
    return number


def _clamp(tokens: int) -> int:
    return min(max(tokens, MAX_TOKENS_FLOOR), MAX_TOKENS_CEILING)
