"""What decides a corpus, one sample, and the text cutting every source uses (``corpus`` and
``long_sources`` both build on it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class CorpusConfig:
    """What decides the corpus: the seed, the validation share and the sizes."""

    seed: int = 0
    validation_fraction: float = 0.05
    agentic_samples: int = 8000
    max_code_files: int = 2000
    chunk_chars: int = 2400
    long_chunk_chars: int = 12000
    session_samples: int = 3000

    def __post_init__(self) -> None:
        if not 0.0 < self.validation_fraction < 0.5:
            raise ValueError("validation_fraction must be in (0, 0.5)")


@dataclass(frozen=True)
class Sample:
    """One conversation; ``group`` decides its split (chunks of one file share a group)."""

    id: str
    source: str
    group: str
    messages: list[dict]

    def to_json(self) -> dict:
        return {"id": self.id, "source": self.source, "messages": self.messages}


def chunks(text: str, limit: int) -> Iterator[str]:
    """Consecutive pieces of ``text`` of about ``limit`` characters, cut before a top-level line."""
    lines = text.split("\n")
    start, size = 0, 0
    for index, line in enumerate(lines):
        size += len(line) + 1
        next_is_top = index + 1 < len(lines) and lines[index + 1][:1] not in ("", " ", "\t", ")", "]", "}")
        if size >= limit and (next_is_top or size >= 2 * limit):
            yield "\n".join(lines[start : index + 1])
            start, size = index + 1, 0
    if start < len(lines) and "".join(lines[start:]).strip():
        yield "\n".join(lines[start:])


def summary_line(doc: str) -> str:
    """The first paragraph of a docstring on one line, at most about 300 characters."""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    return first if len(first) <= 300 else first[:300].rsplit(" ", 1)[0] + " ..."


def paragraph_chunks(text: str, limit: int) -> list[str]:
    chunks, current = [], ""
    for para in text.strip().split("\n\n"):
        if current and len(current) + len(para) > limit:
            chunks.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current:
        chunks.append(current)
    return chunks
