"""Acceptance of a draft tree against the target's verify logits (see the package docstring).

Drafts are deterministic proposals (the drafter's argmax / top-k, or an n-gram lookup), so the
draft distribution ``q`` of a proposed token is a point mass and rejection sampling reduces to:
accept child ``c`` with probability ``r(c)`` under the current residual ``r`` (the target's
distribution at that node, renormalised after removing the children rejected so far); when all
are rejected, sample the recovered token from ``r`` — ``max(p − q, 0)`` normalised, over every
rejected child. Each emitted token is therefore distributed exactly as the target's (tested with
a chi-square test), and greedy acceptance gives exactly the plain greedy output.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specgauge.engine.speculative.tree import DraftTree


@dataclass(frozen=True)
class Verdict:
    """Outcome of one request's verify: accepted nodes and the tokens to emit."""

    accepted_nodes: tuple[int, ...]   # verify-node indices (1-based drafts) of the accepted path
    tokens: tuple[int, ...]           # accepted draft tokens, then the recovered or bonus token
    bonus: bool                       # the last token is a bonus (the path ended at a leaf)

    @property
    def num_accepted(self) -> int:
        return len(self.accepted_nodes)


def accept_greedy(tree: DraftTree, target_argmax: list[int]) -> Verdict:
    """Walk from the root, accepting a child equal to the target's argmax (``target_argmax``:
    one per verify node, (1+M)); the target's argmax where the walk stops is the last token."""
    children = tree.children()
    node, path = 0, []
    while True:
        wanted = target_argmax[node]
        match = next((c for c in children[node] if tree.tokens[c - 1] == wanted), None)
        if match is None:
            tokens = tuple(tree.tokens[c - 1] for c in path) + (wanted,)
            return Verdict(tuple(path), tokens, bonus=not children[node])
        path.append(match)
        node = match


def accept_sampled(tree: DraftTree, target_probs: torch.Tensor, generator: torch.Generator | None,
                   accept_bias: float = 1.0) -> Verdict:
    """Rejection sampling over the tree: ``target_probs`` (1+M, V) is the target's sampling
    distribution after each verify node (temperature/top-k/top-p applied).

    ``accept_bias``: a testing fault (``specgauge serve --testing-fault accept-bias=F``): each
    drafted token's acceptance probability is multiplied by it (clamped to 1) — a wrong sampler
    that shifts the output distribution toward the drafts, for tests of the distribution check.
    1 is the correct sampler."""
    children = tree.children()
    node, path = 0, []
    while True:
        residual = target_probs[node].clone()  # (V,)
        moved = False
        for child in children[node]:
            token = tree.tokens[child - 1]
            total = float(residual.sum())
            chance = min(1.0, accept_bias * float(residual[token]) / total) if total > 0 else 0.0
            if chance > 0 and float(torch.rand((), generator=generator, device=residual.device)) < chance:
                path.append(child)
                node, moved = child, True
                break
            residual[token] = 0.0  # rejected: max(p − q, 0) with q the point mass on this draft
        if moved:
            continue
        last = int(torch.multinomial(residual, 1, generator=generator))
        tokens = tuple(tree.tokens[c - 1] for c in path) + (last,)
        return Verdict(tuple(path), tokens, bonus=not children[node])
