"""Prompt text for a length-only trace, from a suite's own text.

A drafter's acceptance on random tokens says nothing about real text, so the words come from a
suite the user names. The suite's text is tokenized once into a pool of token ids. A hash block
of ``n`` tokens is the ``n`` ids of the pool that start at a position keyed by its hash id (a
stable hash, so the same on every run and machine): equal hash ids give equal tokens, hence equal
text, and a trace's shared prefixes reach the server's prefix cache as shared prefixes. A
request's prompt is its blocks in order, the last one cut to the request's length; tokens past
its hash ids (a trace without them, BurstGPT) are keyed by the trace line, so they are its own.

With a tokenizer the prompt is token-exact: the decoded text is re-encoded and, where the
tokenizer merges across a block boundary, trimmed or padded at its end until it encodes to the
asked length (:attr:`BlockText.inexact` counts any it could not make exact). Without one, a
"token" is a word of the suite and lengths are approximate.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

from specgauge.errors import UserError

EXACT_TRIES = 4


def stable_key(*parts: object) -> int:
    """A 64-bit hash of ``parts`` that is the same in every process (``hash()`` is salted)."""
    return int.from_bytes(hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest(), "big")


class BlockText:
    """Builds prompts of given token lengths and hash blocks from ``source_text`` (module doc)."""

    def __init__(self, source_text: str, tokenizer=None) -> None:
        self.tokenizer = tokenizer
        if tokenizer is not None:
            self.pool: Sequence = tokenizer.encode(source_text, add_special_tokens=False).ids
            # Blocks start at a token that begins a word, so that block boundaries fall where the
            # tokenizer splits anyway (its pre-tokenizer cuts before a space)
            starts = [i for i, token in enumerate(tokenizer.encode(source_text, add_special_tokens=False).tokens)
                      if token.startswith(("Ġ", "▁", " "))]
        else:
            self.pool = source_text.split()
            starts = list(range(len(self.pool)))
        if len(self.pool) < 2:
            raise UserError("the --trace-text-from suite has too little text to build prompts from")
        self.starts = starts or list(range(len(self.pool)))
        self.inexact = 0

    def block(self, key: int, size: int) -> list:
        """The ``size`` pool entries of block ``key``."""
        start = self.starts[key % len(self.starts)]
        return [self.pool[(start + k) % len(self.pool)] for k in range(size)]

    def prompt(self, length: int, hash_ids: Sequence[int], block_tokens: int | None, own_key: object) -> str:
        """A prompt of ``length`` tokens: the blocks of ``hash_ids``, then tokens keyed by ``own_key``."""
        pieces: list = []
        size = block_tokens or length
        for index, hash_id in enumerate(hash_ids):
            if len(pieces) >= length:
                break
            pieces += self.block(stable_key("block", hash_id), min(size, length - len(pieces)))
        extra = 0
        while len(pieces) < length:
            pieces += self.block(stable_key("own", own_key, extra), min(size, length - len(pieces)))
            extra += 1
        if self.tokenizer is None:
            return " ".join(pieces)
        return self._exact(list(pieces), length, own_key)

    def _exact(self, ids: list[int], length: int, own_key: object) -> str:
        text = self.tokenizer.decode(ids)
        for attempt in range(EXACT_TRIES):
            encoded = self.tokenizer.encode(text, add_special_tokens=False).ids
            if len(encoded) == length:
                return text
            if len(encoded) > length:
                text = self.tokenizer.decode(encoded[:length])
            else:
                text = self.tokenizer.decode(encoded + self.block(stable_key("pad", own_key, attempt),
                                                                  length - len(encoded)))
        if len(self.tokenizer.encode(text, add_special_tokens=False).ids) != length:
            self.inexact += 1
        return text
