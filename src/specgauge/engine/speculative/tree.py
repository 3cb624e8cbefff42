"""Draft trees: the tokens a drafter proposes for one request, hanging off its root."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DraftTree:
    """Draft tokens in verify order (every parent before its children).

    ``parents[i]`` is the parent of draft ``i``: ``-1`` for the root (the request's pending
    token), else an index into ``tokens``. Verify node 0 is the root; draft ``i`` is node ``i + 1``.
    A chain has ``parents == [-1, 0, 1, ...]``.
    """

    tokens: tuple[int, ...]
    parents: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.parents):
            raise ValueError("one parent per draft token")
        if any(not -1 <= p < i for i, p in enumerate(self.parents)):
            raise ValueError("a parent must come before its child")

    @classmethod
    def chain(cls, tokens: list[int] | tuple[int, ...]) -> "DraftTree":
        """A chain: each draft the child of the one before."""
        return cls(tuple(tokens), tuple(range(-1, len(tokens) - 1)))

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def is_chain(self) -> bool:
        """True when every draft's parent is the draft before it (a causal mask suffices)."""
        return all(p == i - 1 for i, p in enumerate(self.parents))

    def node_depths(self) -> list[int]:
        """Depth of every verify node (root 0), i.e. its RoPE offset after the root."""
        depths = [0]
        for parent in self.parents:
            depths.append(depths[parent + 1] + 1)
        return depths

    def children(self) -> list[list[int]]:
        """For every verify node, its children's verify-node indices, in draft order."""
        kids: list[list[int]] = [[] for _ in range(len(self.tokens) + 1)]
        for i, parent in enumerate(self.parents):
            kids[parent + 1].append(i + 1)
        return kids

    def ancestor_mask(self) -> list[list[bool]]:
        """(1+M) × (1+M): node i sees node j iff j is i or one of its ancestors."""
        size = len(self.tokens) + 1
        mask = [[False] * size for _ in range(size)]
        mask[0][0] = True
        for i, parent in enumerate(self.parents):
            row = mask[i + 1]
            row[:] = mask[parent + 1]
            row[i + 1] = True
        return mask


@dataclass(frozen=True)
class Proposal:
    """What a drafter's ``propose`` gives back: one draft tree per request (empty: no drafts),
    and what drafting cost besides the drafts, for the step's report."""

    trees: tuple[DraftTree, ...]
    catch_up: int = 0  # EAGLE-3 draft pairs caught up before drafting (a backlog after an off period is many)
    skipped: frozenset[str] = frozenset()  # request ids asked to draft whose backlog was not worth catching up
