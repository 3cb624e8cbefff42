"""Prompt-lookup (n-gram) drafting: propose what followed the last occurrence of the sequence's
own suffix. Free to draft (no model), strong when the output copies its context (code editing)."""

from __future__ import annotations

from dataclasses import dataclass, field

from specgauge.engine.core.scheduler import Request
from specgauge.engine.speculative.tree import DraftTree, Proposal


@dataclass
class NgramIndex:
    """Per-request index: for each n-gram, the position right after its latest occurrence that
    has a continuation. Built incrementally as the sequence grows (``Request.draft_state``)."""

    latest: dict[tuple[int, ...], int] = field(default_factory=dict)
    indexed: int = 0  # continuation positions 0..indexed-1 are in ``latest``


class NgramDrafter:
    """Chain drafts from the longest suffix n-gram (``max_n`` down to ``min_n``) seen before."""

    aux_layers: tuple[int, ...] = ()
    is_tree = False

    def __init__(self, max_n: int = 3, min_n: int = 1) -> None:
        self.max_n, self.min_n = max_n, min_n

    def slots_needed(self, k: int) -> int:
        """KV slots past the pending token that ``k`` chain drafts need."""
        return k

    def propose_one(self, request: Request, k: int) -> DraftTree:
        """Up to ``k`` draft tokens for ``request`` (fewer, or none, when nothing matches)."""
        if k <= 0:
            return DraftTree.chain(())
        index = request.draft_state
        if not isinstance(index, NgramIndex):
            index = request.draft_state = NgramIndex()
        length = request.num_tokens
        offset = max(0, index.indexed - self.max_n)
        tail = request.token_ids(offset, length)  # only what the new positions need
        # Index every continuation position e < length: the n-grams ending right before e.
        for end in range(max(index.indexed, 1), length):
            for n in range(self.min_n, self.max_n + 1):
                if end - n >= 0:
                    index.latest[tuple(tail[end - n - offset:end - offset])] = end
        index.indexed = max(index.indexed, length)
        for n in range(self.max_n, self.min_n - 1, -1):
            if length < n:
                continue
            start = index.latest.get(tuple(request.token_ids(length - n, length)))
            if start is not None:
                return DraftTree.chain(request.token_ids(start, min(start + k, length)))
        return DraftTree.chain(())

    def propose(self, requests: list[Request], ks: list[int]) -> Proposal:
        """One chain per request (``ks``: drafts wanted, 0 = none); nothing to catch up, and no
        request skipped (a miss proposes nothing, but every request is looked up)."""
        return Proposal(tuple(self.propose_one(r, k) for r, k in zip(requests, ks)))

    def features(self, aux) -> None:
        """No target features are asked for (``aux_layers`` is empty)."""
        return None

    def observe(self, request: Request, features) -> None:
        """N-gram drafting reads no target features."""
