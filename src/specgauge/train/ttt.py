"""Training-time test: the EAGLE-3 head unrolled over its own outputs, with soft cross-entropy.

For a window of tokens x_0..x_{T−1} the target gives features g_t and logits p_t (over x_{t+1}).
Row t of the first step reads (g_t, x_{t+1}) at position t and is scored against p_{t+1} (the
target's distribution of x_{t+2}). Step s > 0 of row t reads the head's own step s−1 feature
and token — its argmax, mapped to a target id (``feed="draft"``), or the sequence's token
x_{t+1+s} (``feed="target"``, SpecForge's choice) — at position t+s, and is scored against
p_{t+1+s}. Attention of step s sees the first step's keys causally plus row t's own keys of
steps 1..s (:meth:`Eagle3Head.step`). Step s weighs ``decay**s``; only rows whose scored token
x_{t+2+s} is a response token count. Gradients flow through the fed-back features.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specgauge.engine.eagle3 import KV, Eagle3Head


@dataclass
class UnrollStats:
    """Per-step sums over one batch (divide by ``counts`` for rates)."""

    losses: list[float]  # masked mean soft cross-entropy per step
    correct: torch.Tensor  # (S,) rows where the head's token equals the target's greedy token
    prefix_correct: torch.Tensor  # (S,) rows where steps 0..s were all right (a chain would accept s+1)
    counts: torch.Tensor  # (S,) scored rows per step


def _shift(x: torch.Tensor, offset: int, length: int) -> torch.Tensor:
    """x[:, offset:offset+length] padded with zeros at the end to ``length`` along dim 1."""
    part = x[:, offset:offset + length]
    if part.shape[1] == length:
        return part
    pad = torch.zeros((x.shape[0], length - part.shape[1], *x.shape[2:]), dtype=x.dtype, device=x.device)
    return torch.cat([part, pad], dim=1)


def unrolled_loss(head: Eagle3Head, input_ids: torch.Tensor, aux: torch.Tensor, target_logits: torch.Tensor,
                  response_mask: torch.Tensor, steps: int, decay: float = 0.8,
                  feed: str = "draft") -> tuple[torch.Tensor, UnrollStats]:
    """Weighted TTT loss of ``steps`` unrolled draft steps over a batch of windows.

    input_ids (B, T); aux (B, T, 3H) target features; target_logits (B, T, V) (no grad);
    response_mask (B, T) bool, True on response tokens. Returns the loss and per-step stats.
    """
    if steps < 1:
        raise ValueError("steps must be ≥ 1")
    if feed not in ("draft", "target"):
        raise ValueError("feed must be 'draft' or 'target'")
    b, t = input_ids.shape
    rows = t - 1
    positions = torch.arange(rows, device=input_ids.device)  # (R,)
    greedy = target_logits.argmax(-1)  # (B, T) the target's next token after each position
    teacher = head.target_to_draft_logits(target_logits).float()  # (B, T, Vd)
    features = head.fuse(aux[:, :rows])  # (B, R, h)
    tokens = input_ids[:, 1:]  # (B, R)
    base: KV | None = None
    chain: list[KV] = []
    total = torch.zeros((), device=input_ids.device)
    losses: list[float] = []
    correct = torch.zeros(steps)
    prefix_correct = torch.zeros(steps)
    counts = torch.zeros(steps)
    prefix = torch.ones(b, rows, dtype=torch.bool, device=input_ids.device)
    for s in range(steps):
        out = head.step(tokens, features, positions + s, base=base, chain=chain)
        mask = _shift(response_mask, 2 + s, rows)  # (B, R): the scored token x_{t+2+s} is a response token
        probs = torch.softmax(_shift(teacher, 1 + s, rows), dim=-1)  # (B, R, Vd)
        per_row = -(probs * F.log_softmax(out.logits.float(), dim=-1)).sum(-1)  # (B, R)
        weight = mask.float()
        loss = (per_row * weight).sum() / weight.sum().clamp(min=1.0)
        total = total + (decay ** s) * loss
        losses.append(loss.item())
        with torch.no_grad():
            drafted = head.draft_to_target(out.logits.argmax(-1))  # (B, R) target ids
            right = drafted == _shift(greedy, 1 + s, rows)
            prefix = prefix & right
            correct[s] = (right & mask).sum()
            prefix_correct[s] = (prefix & mask).sum()
            counts[s] = mask.sum()
        if s + 1 < steps:
            if base is None:
                base = out.kv
            else:
                chain.append(out.kv)
            features = out.features
            tokens = drafted if feed == "draft" else _shift(input_ids, 2 + s, rows)
    return total, UnrollStats(losses, correct, prefix_correct, counts)


def acceptance_estimate(prefix_rates: list[float]) -> float:
    """Expected tokens per verify of a chain of len(prefix_rates) drafts: 1 (the bonus) + Σ P(first s+1 right)."""
    return 1.0 + sum(prefix_rates)
