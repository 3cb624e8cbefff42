"""Tokens per chunk, from the best source available (the record says which).

1. ``server``: the server's cumulative output-token count after each chunk (SGLang
   ``meta_info.completion_tokens``, OpenAI ``usage`` on content chunks) — differences per chunk;
2. ``tokenizer``: a ``tokenizer.json`` (the server's own when it can be loaded from the path the
   server reports, else ``--tokenizer``): the whole output is encoded once and each token is
   assigned to the chunk holding its first character (exact at chunk boundaries, unlike encoding
   each chunk's text alone); tokens the server counted beyond the text (EOS, special tokens) go
   to the last chunk;
3. ``spread``: the final usage count spread evenly over the chunks (earlier chunks take the remainder);
4. ``chunks``: no count at all — one token per chunk, and reports say so.
"""

from __future__ import annotations

from bisect import bisect_right
from functools import lru_cache
from pathlib import Path

from specgauge.client.records import RequestRecord, TokenCountSource
from specgauge.errors import UserError, require_extra


@lru_cache(maxsize=4)
def load_tokenizer(path: str):
    """A ``tokenizers.Tokenizer`` from ``path`` (cached); a missing or bad file is a UserError."""
    require_extra("engine", "tokenizers")
    from tokenizers import Tokenizer

    if not Path(path).is_file():
        raise UserError(f"tokenizer file not found: {path}")
    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # the Rust side raises plain Exception with a message
        raise UserError(f"cannot load tokenizer {path}: {' '.join(str(exc).split())}") from None


def server_chunk_tokens(cumulative: list[int | None]) -> list[int] | None:
    """Per-chunk counts from cumulative server counts, or None when any is missing or goes back."""
    if not cumulative or any(c is None for c in cumulative):
        return None
    counts, previous = [], 0
    for value in cumulative:
        if value < previous:
            return None
        counts.append(value - previous)
        previous = value
    return counts


def tokenizer_chunk_tokens(chunk_texts: list[str], tokenizer) -> list[int]:
    """Tokens per chunk: encode the joined text once, assign each token by its start offset."""
    starts, position = [], 0
    for text in chunk_texts:
        starts.append(position)
        position += len(text)
    encoding = tokenizer.encode("".join(chunk_texts), add_special_tokens=False)
    counts = [0] * len(chunk_texts)
    for begin, _end in encoding.offsets:
        counts[max(0, bisect_right(starts, begin) - 1)] += 1
    return counts


def spread_tokens(total: int, num_chunks: int) -> list[int]:
    """``total`` tokens spread evenly over ``num_chunks`` (the first chunks take the remainder)."""
    base, extra = divmod(total, num_chunks)
    return [base + (1 if i < extra else 0) for i in range(num_chunks)]


def assign_chunk_tokens(record: RequestRecord, chunk_texts: list[str], cumulative: list[int | None],
                        tokenizer_path: str | None) -> None:
    """Fill ``record.chunk_tokens`` and ``record.token_count_source`` (see module doc)."""
    num_chunks = len(record.chunk_times_ns)
    if num_chunks == 0:
        return
    counts = server_chunk_tokens(cumulative)
    if counts is not None and (record.output_tokens is None or sum(counts) <= record.output_tokens):
        if record.output_tokens is not None:  # tokens with no text after the last chunk (EOS)
            counts[-1] += record.output_tokens - sum(counts)
        record.chunk_tokens, record.token_count_source = counts, TokenCountSource.SERVER
        return
    if tokenizer_path:
        counts = tokenizer_chunk_tokens(chunk_texts, load_tokenizer(tokenizer_path))
        if record.output_tokens is not None and sum(counts) < record.output_tokens:
            counts[-1] += record.output_tokens - sum(counts)  # tokens with no text (EOS)
        record.chunk_tokens, record.token_count_source = counts, TokenCountSource.TOKENIZER
        return
    if record.output_tokens:
        record.chunk_tokens = spread_tokens(record.output_tokens, num_chunks)
        record.token_count_source = TokenCountSource.SPREAD
        return
    record.chunk_tokens = [1] * num_chunks
    record.token_count_source = TokenCountSource.CHUNKS
