"""The suite model: a named, versioned, content-hashed list of benchmark requests.

Identity is ``name@version`` plus the sha256 of the suite's canonical JSON (sorted keys, no
whitespace, requests in order), so any edit to any request changes the hash and starts a new
lineage. Stored as JSONL: one header line (``{"suite": {...}}``) then one request a line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from specgauge.errors import UserError


class ChatMessage(BaseModel):
    """One OpenAI-style chat message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str


MAX_SESSION_TURNS = 999   # turns a session may have (the store numbers turn t of session s as s * 1000 + t)


class SuiteRequest(BaseModel):
    """One benchmark request: chat ``messages`` or a raw ``prompt`` (exactly one of them).

    A request with ``next_turns`` is a multi-turn *session*: ``messages`` is its first turn; each
    later turn is one message (a user question, or a tool result for an agent) that the load runner
    appends after the server's actual answer to the turn before (:mod:`specgauge.load.sessions`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: tuple[ChatMessage, ...] | None = None
    prompt: str | None = None
    max_tokens: int = Field(default=128, ge=1, strict=True)   # "5" or 5.0 is refused, not converted
    domain: str = Field(default="general", min_length=1)
    source: str = "builtin"
    notes: str | None = None
    next_turns: tuple[ChatMessage, ...] | None = None   # a session's later turns, in order

    @model_validator(mode="after")
    def _one_of_messages_or_prompt(self) -> "SuiteRequest":
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("a request needs exactly one of 'messages' or 'prompt'")
        if self.messages is not None and not self.messages:
            raise ValueError("'messages' is empty")
        if self.prompt is not None and not self.prompt.strip():
            raise ValueError("'prompt' is empty")
        if self.messages is not None and not any(m.content.strip() for m in self.messages):
            raise ValueError("every message's 'content' is empty")
        if self.next_turns is not None:
            if self.messages is None:
                raise ValueError("'next_turns' needs 'messages' (a session is a chat)")
            if not self.next_turns or len(self.next_turns) + 1 > MAX_SESSION_TURNS:
                raise ValueError(f"'next_turns' must hold 1 to {MAX_SESSION_TURNS - 1} messages")
            if any(m.role not in ("user", "tool") or not m.content.strip() for m in self.next_turns):
                raise ValueError("each of 'next_turns' must be a non-empty 'user' or 'tool' message")
        return self

    @property
    def num_turns(self) -> int:
        """Turns the request sends: 1, or 1 + its ``next_turns`` for a session."""
        return 1 + len(self.next_turns or ())

    def canonical(self) -> dict:
        """The request as plain JSON data, omitting unset optional fields."""
        return self.model_dump(mode="json", exclude_none=True)

    @property
    def content_hash(self) -> str:
        """sha256 of this request's canonical JSON (the unit :func:`Suite.content_hash` is built from)."""
        body = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    def text(self) -> str:
        """The prompt as plain text: ``prompt``, or the message contents joined by blank lines."""
        if self.prompt is not None:
            return self.prompt
        return "\n\n".join(m.content for m in self.messages or ())


class Suite(BaseModel):
    """A named, versioned list of requests; ``content_hash`` is derived, never stored by hand."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: int = Field(default=1, ge=1)
    description: str = ""
    requests: tuple[SuiteRequest, ...]
    source_mix: dict[str, float] | None = None
    # How the suite was made (e.g. the training-data builder's found/sampled counts); not hashed.
    build_info: dict[str, Any] | None = None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def content_hash(self) -> str:
        """sha256 of the canonical JSON of the requests (name, version and mix excluded)."""
        body = json.dumps([r.canonical() for r in self.requests], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()

    @property
    def has_sessions(self) -> bool:
        """Whether any request is a multi-turn session (the runner then sends every request as one)."""
        return any(r.next_turns for r in self.requests)

    def domains(self) -> list[str]:
        """The distinct domain tags, sorted."""
        return sorted({r.domain for r in self.requests})

    def request_hashes(self) -> list[str]:
        """Each request's content hash, in order (what a content diff between versions compares)."""
        return [r.content_hash for r in self.requests]

    def header(self) -> dict:
        head = {"name": self.name, "version": self.version, "description": self.description,
                "content_hash": self.content_hash, "num_requests": len(self.requests)}
        if self.source_mix is not None:
            head["source_mix"] = self.source_mix
        if self.build_info is not None:
            head["build_info"] = self.build_info
        return head


def write_suite_jsonl(suite: Suite, path: str | Path) -> None:
    """Write ``suite`` as JSONL: a header line, then one request a line."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"suite": suite.header()}, sort_keys=True) + "\n")
        for request in suite.requests:
            out.write(json.dumps(request.canonical(), sort_keys=True, ensure_ascii=False) + "\n")


def _validation_detail(exc: ValidationError) -> str:
    """``max_tokens: Input should be a valid integer (got '5')`` for the first two errors."""
    parts = []
    for error in exc.errors()[:2]:
        where = ".".join(str(p) for p in error.get("loc", ()))
        message = error.get("msg", "invalid").removeprefix("Value error, ")
        if error.get("type") != "value_error" and "input" in error:
            message += f" (got {error['input']!r})"
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def read_suite_jsonl(path: str | Path, *, name: str | None = None) -> Suite:
    """Read a suite JSONL file; the header line is optional (then ``name`` or the file stem names it).

    A bad line raises :class:`UserError` naming the file and line number.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read suite file {path}: {exc}") from None
    header: dict = {}
    requests: list[SuiteRequest] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not requests and not header and isinstance(obj, dict) and set(obj) == {"suite"}:
            header = obj["suite"]
            continue
        try:
            requests.append(SuiteRequest.model_validate(obj))
        except ValidationError as exc:  # keep it to one line: field and reason, no pydantic boilerplate
            raise UserError(f"{path}:{lineno}: bad request ({_validation_detail(exc)})") from None
    if not requests:
        raise UserError(f"{path}: the suite has no requests")
    if not isinstance(header, dict):
        raise UserError(f"{path}:1: the 'suite' header must be an object")
    stem_name, _, stem_version = path.stem.partition("@")
    try:
        suite = Suite(
            name=header.get("name") or name or stem_name,
            version=int(header.get("version", stem_version if stem_version.isdigit() else 1)),
            description=header.get("description", ""),
            requests=tuple(requests),
            source_mix=header.get("source_mix"),
            build_info=header.get("build_info"),
        )
    except (ValueError, TypeError) as exc:  # pydantic ValidationError is a ValueError
        raise UserError(f"{path}:1: bad suite header ({' '.join(str(exc).split())[:200]})") from None
    stored = header.get("content_hash")
    if stored and stored != suite.content_hash:
        raise UserError(f"{path}: content hash in the header ({stored[:12]}) does not match the requests "
                        f"({suite.content_hash[:12]}): the file was edited; bump its version")
    return suite
