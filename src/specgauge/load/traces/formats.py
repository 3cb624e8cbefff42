"""Timed trace files, read one line at a time (a million-line trace is never held whole).

Every reader yields :class:`TraceLine` in file order; a malformed line raises one
:class:`~specgauge.errors.UserError` naming the file, the line number and the field. Formats:

- ``mooncake``: JSONL of ``{"timestamp", "input_length", "output_length", "hash_ids"}``, the
  timestamp in milliseconds from the trace's first request, ``hash_ids`` one id per 512-token
  block of the prompt (equal ids: equal block and equal blocks before it). As published in
  kvcache-ai/Mooncake ``FAST25-release/traces/*.jsonl`` and read by AIPerf's ``mooncake_trace``
  loader (ai-dynamo/aiperf ``src/aiperf/dataset/loader/mooncake_trace.py``: the timestamp in ms,
  an optional ``session_id``) and SGLang's ``bench_serving --dataset-name mooncake``.
- ``vllm-timed``: the same fields as vLLM's ``timed_trace`` dataset reads them
  (vllm-project/vllm ``vllm/benchmarks/datasets/datasets.py``, ``TimedTrace``, field names
  remappable there with ``--timed-trace-label-*``): the timestamp in seconds (its
  ``--timed-trace-sec-multiplier`` default of 1; vLLM's benchmark docs replay a Mooncake trace
  with 0.001) and 16-token hash blocks (its ``--timed-trace-chunk-hash-size`` default; 512 for
  Mooncake in the same docs). Read from vLLM's docs and flag list; the reader's source file itself
  was too large to fetch here.
- ``bailian``: Alibaba's Qwen Bailian usage traces as AIPerf's ``bailian_trace`` loader reads them
  (ai-dynamo/aiperf ``src/aiperf/dataset/loader/bailian_trace.py``): ``chat_id``,
  ``parent_chat_id`` (-1 for a first turn), ``turn``, ``timestamp`` in seconds,
  ``input_length``, ``output_length``, ``hash_ids`` of 16-token blocks; a row's lengths and blocks
  already hold the conversation before it.
- ``burstgpt``: BurstGPT's CSV (HPMLL/BurstGPT; AIPerf's ``burst_gpt.py`` and vLLM's
  ``BurstGPTDataset`` read the same columns): ``Timestamp`` (seconds), ``Model``, ``Request
  tokens``, ``Response tokens``, ``Total tokens``, ``Log Type``. A row with 0 response tokens is a
  failed request in the log: it is read, and the replay leaves it out (counted).
- ``timed-jsonl``: specgauge's own form for traffic exported from your logs, with the real
  prompts: ``timestamp`` (seconds), ``messages`` (OpenAI chat messages) or ``prompt`` (text),
  optional ``max_tokens``, optional ``output_length`` (the answer's recorded length: sent with
  ``ignore_eos``), optional ``session_id`` (kept with the request: every line is sent at its own
  time with the messages it holds, history included).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from specgauge.errors import UserError

FORMATS = ("mooncake", "vllm-timed", "bailian", "burstgpt", "timed-jsonl")
# How each format writes its timestamp, in seconds per unit, and its tokens per hash block.
SECONDS_PER_UNIT = {"mooncake": 0.001, "vllm-timed": 1.0, "bailian": 1.0, "burstgpt": 1.0, "timed-jsonl": 1.0}
BLOCK_TOKENS = {"mooncake": 512, "vllm-timed": 16, "bailian": 16}
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
CHAT_ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class TraceLine:
    """One request of a trace: when it came (seconds, as recorded) and what it asked for."""

    line: int
    timestamp_s: float
    input_length: int | None = None      # prompt tokens (length-only formats)
    output_length: int | None = None     # answer tokens, as recorded
    hash_ids: tuple[int, ...] = ()       # one per block of ``block_tokens`` prompt tokens
    block_tokens: int | None = None
    messages: tuple[tuple[str, str], ...] | None = None   # (role, content), timed-jsonl
    prompt: str | None = None
    max_tokens: int | None = None
    session_id: str | None = None


class _Line:
    """The fields of one line, each read with an error that names the file, line and field."""

    def __init__(self, path: Path, number: int, record: dict) -> None:
        self.path, self.number, self.record = path, number, record

    def fail(self, field: str, why: str) -> UserError:
        return UserError(f"{self.path}:{self.number}: field '{field}': {why}")

    def number_field(self, field: str) -> float:
        value = self.record.get(field)
        if isinstance(value, str):   # BurstGPT's CSV cells; some traces quote their timestamps
            try:
                value = float(value)
            except ValueError:
                raise self.fail(field, f"not a number (got {value!r})") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise self.fail(field, f"must be a number >= 0 (got {value!r})" if field in self.record else "missing")
        return float(value)

    def count(self, field: str, *, minimum: int = 1, required: bool = True) -> int | None:
        if field not in self.record or self.record[field] in (None, ""):
            if required:
                raise self.fail(field, "missing")
            return None
        value = self.record[field]
        if isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise self.fail(field, f"not a whole number (got {value!r})") from None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(field, f"must be a whole number >= {minimum} (got {value!r})")
        return value

    def hash_ids(self, field: str = "hash_ids") -> tuple[int, ...]:
        value = self.record.get(field, [])
        if not isinstance(value, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in value):
            raise self.fail(field, f"must be a list of whole numbers (got {str(value)[:60]})")
        return tuple(value)


def _json_lines(path: Path) -> Iterator[_Line]:
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read trace file {path}: {exc.strerror or exc}") from None
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise UserError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
                if not isinstance(record, dict):
                    raise UserError(f"{path}:{number}: a trace line must be a JSON object")
                yield _Line(path, number, record)
        except UnicodeDecodeError as exc:
            raise UserError(f"{path}: not UTF-8 text ({exc.reason})") from None


def _length_only(path: Path, fmt: str) -> Iterator[TraceLine]:
    unit = SECONDS_PER_UNIT[fmt]
    for line in _json_lines(path):
        session = line.record.get("session_id")
        if fmt == "bailian":
            line.count("turn")
            session = str(line.record.get("chat_id")) if line.record.get("parent_chat_id") in (-1, None) else \
                str(line.record.get("parent_chat_id"))
        yield TraceLine(line=line.number, timestamp_s=line.number_field("timestamp") * unit,
                        input_length=line.count("input_length"), output_length=line.count("output_length"),
                        hash_ids=line.hash_ids(), block_tokens=BLOCK_TOKENS[fmt],
                        session_id=None if session is None else str(session))


def _messages(line: _Line) -> tuple[tuple[str, str], ...]:
    value = line.record["messages"]
    if not isinstance(value, list) or not value:
        raise line.fail("messages", "must be a non-empty list of {role, content}")
    out = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or message.get("role") not in CHAT_ROLES \
                or not isinstance(message.get("content"), str):
            raise line.fail(f"messages[{i}]", f"needs 'role' ({', '.join(CHAT_ROLES)}) and a 'content' string")
        out.append((message["role"], message["content"]))
    if not any(content.strip() for _, content in out):
        raise line.fail("messages", "every message's content is empty")
    return tuple(out)


def _timed_jsonl(path: Path) -> Iterator[TraceLine]:
    for line in _json_lines(path):
        if ("messages" in line.record) == ("prompt" in line.record):
            raise line.fail("messages", "a line needs exactly one of 'messages' or 'prompt'")
        prompt = line.record.get("prompt")
        if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
            raise line.fail("prompt", "must be non-empty text")
        session = line.record.get("session_id")
        yield TraceLine(line=line.number, timestamp_s=line.number_field("timestamp"),
                        output_length=line.count("output_length", required=False),
                        messages=_messages(line) if "messages" in line.record else None, prompt=prompt,
                        max_tokens=line.count("max_tokens", required=False),
                        session_id=None if session is None else str(session))


def _burstgpt(path: Path) -> Iterator[TraceLine]:
    try:
        handle = path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise UserError(f"cannot read trace file {path}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in BURSTGPT_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise UserError(f"{path}:1: field '{missing[0]}': missing from the header (a BurstGPT CSV has "
                            f"{', '.join(BURSTGPT_COLUMNS)})")
        for row in reader:
            line = _Line(path, reader.line_num, row)
            yield TraceLine(line=reader.line_num, timestamp_s=line.number_field("Timestamp"),
                            input_length=line.count("Request tokens"),
                            output_length=line.count("Response tokens", minimum=0))


def read_trace(path: str | Path, fmt: str) -> Iterator[TraceLine]:
    """The requests of trace ``path`` in format ``fmt`` (:data:`FORMATS`), one line at a time."""
    path = Path(path)
    if fmt == "burstgpt":
        return _burstgpt(path)
    if fmt == "timed-jsonl":
        return _timed_jsonl(path)
    if fmt in BLOCK_TOKENS:
        return _length_only(path, fmt)
    raise UserError(f"unknown trace format {fmt!r} (one of: {', '.join(FORMATS)})")


def detect_format(path: str | Path) -> str:
    """The format of trace ``path`` from its first non-empty line (``vllm-timed`` has Mooncake's
    fields in seconds: it is never guessed, name it with ``--trace-format``)."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as handle:
            first = next((text for text in handle if text.strip()), None)
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read trace file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if first is None:
        raise UserError(f"{path}: the trace has no lines")
    if all(column in first for column in BURSTGPT_COLUMNS):
        return "burstgpt"
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        record = None
    if isinstance(record, dict):
        if "messages" in record or "prompt" in record:
            return "timed-jsonl"
        if "chat_id" in record and "parent_chat_id" in record:
            return "bailian"
        if "input_length" in record:
            return "mooncake"
    raise UserError(f"cannot tell the trace format of {path} from its first line; pass --trace-format "
                    f"({', '.join(FORMATS)})")
