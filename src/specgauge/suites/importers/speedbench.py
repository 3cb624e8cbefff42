"""SPEED-Bench (NVIDIA's SPEculative Evaluation Dataset) read from the user's own files; nothing is fetched.

The format, from the dataset's own readers:

- the dataset card (huggingface.co/datasets/nvidia/SPEED-Bench, ``README.md``): configs ``qualitative``
  (880 rows) and ``throughput_1k``, ``throughput_2k``, ``throughput_8k``, ``throughput_16k``,
  ``throughput_32k`` (1,536 rows each), one split ``test``, parquet; columns ``question_id``,
  ``category``, ``sub_category``, ``turns`` (a list of strings: user turns of one conversation),
  ``source``, ``src_id``, ``difficulty``, ``multiturn``;
- AIPerf (ai-dynamo/aiperf ``src/aiperf/dataset/loader/speed_bench.py``, ``SpeedBenchRow`` and
  ``SpeedBenchLoader``): the same rows as JSONL with ``messages`` (``role``/``content``) in place of
  ``turns`` (its public loader maps each turn to a user message); the qualitative categories
  (coding, humanities, math, multilingual, qa, rag, reasoning, roleplay, stem, summarization,
  writing) and the throughput categories, one per entropy tier (``low_entropy``, ``mixed``,
  ``high_entropy``, 512 rows each per input-length config); and the placeholder text that stands
  where a source's licence keeps the prompt out of the published dataset (it must be resolved
  from the sources first; AIPerf refuses such rows, and so does this reader).

Domains: a qualitative row's category; a throughput row's entropy tier joined to its config's input
length, read from the file's path (``throughput_8k:high_entropy``; ``throughput:high_entropy`` when
the path does not name the config). A row with more than one turn becomes a multi-turn session.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from specgauge.errors import UserError
from specgauge.suites.importers.records import session_turns
from specgauge.suites.model import ChatMessage, SuiteRequest

PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"
QUALITATIVE_CATEGORIES = frozenset({"coding", "humanities", "math", "multilingual", "qa", "rag", "reasoning",
                                    "roleplay", "stem", "summarization", "writing"})
ENTROPY_TIERS = frozenset({"low_entropy", "mixed", "high_entropy"})
SPEED_BENCH_KEYS = frozenset({"sub_category", "src_id", "multiturn", "difficulty"})   # beside MT-bench's
THROUGHPUT_CONFIG = re.compile(r"throughput_(\d+k)", re.IGNORECASE)


def looks_like_speedbench(record: Any) -> bool:
    """Whether a record has SPEED-Bench's own columns (``auto`` format detection)."""
    return isinstance(record, dict) and "category" in record and bool(SPEED_BENCH_KEYS & set(record)) and \
        ("turns" in record or "messages" in record)


def throughput_length(path: Path) -> str | None:
    """The input-length config a throughput file belongs to (``8k``), from its path, or None."""
    match = THROUGHPUT_CONFIG.search(str(path))
    return match.group(1).lower() if match else None


def _turn_texts(record: dict, where: str) -> tuple[list[ChatMessage], list[str]]:
    """(first-turn messages, texts of the later user turns) of a row, from ``turns`` or ``messages``."""
    if record.get("turns") is not None:
        first, later = session_turns(record["turns"], where)
        return first, [m.content for m in later or ()]
    messages = record["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                                 for m in messages):
        raise UserError(f"{where}: SPEED-Bench 'messages' must be a list of {{role, content}} objects")
    system = [ChatMessage(role="system", content=m["content"]) for m in messages if m.get("role") == "system"]
    users = [m["content"] for m in messages if m.get("role", "user") == "user" and m["content"].strip()]
    if not users:
        raise UserError(f"{where}: a SPEED-Bench row with no user message")
    return [*system, ChatMessage(role="user", content=users[0])], users[1:]


def speedbench_request(record: Any, where: str, path: Path, max_tokens: int, domain: str | None,
                       source: str) -> SuiteRequest:
    """One SPEED-Bench row as a request (a session when it has several turns); a row that is not
    SPEED-Bench's, or still holds the placeholder, is one line naming ``where``."""
    if not isinstance(record, dict) or not record.get("category") or \
            (record.get("turns") is None and record.get("messages") is None):
        keys = ", ".join(sorted(map(str, record))) if isinstance(record, dict) else type(record).__name__
        raise UserError(f"{where}: not a SPEED-Bench row (needs 'category' and 'turns' or 'messages'; found: "
                        f"{keys or 'nothing'})")
    first, later = _turn_texts(record, where)
    if any(PLACEHOLDER in text for text in [m.content for m in first] + later):
        raise UserError(f"{where}: the prompt is SPEED-Bench's placeholder for text its licence keeps out of the "
                        f"dataset; resolve the rows from their sources first (NVIDIA's specdec_bench, or AIPerf), "
                        f"then import the resolved file")
    category = str(record["category"])
    if category in ENTROPY_TIERS:
        length = throughput_length(path)
        category_domain = f"throughput_{length}:{category}" if length else f"throughput:{category}"
    else:
        category_domain = category
    notes = [f"speedbench question {record.get('question_id', '?')}", f"category {category}"]
    if record.get("sub_category"):
        notes.append(f"sub-category {record['sub_category']}")
    if later:
        notes.append(f"a session of {1 + len(later)} turns, each after the previous answer")
    return SuiteRequest(messages=tuple(first), max_tokens=max_tokens, domain=domain or category_domain,
                        source=str(record.get("source") or source), notes="; ".join(notes),
                        next_turns=tuple(ChatMessage(role="user", content=t) for t in later) or None)
