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

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specgauge.engine.core.sampling import greedy_tokens
from specgauge.engine.models.eagle3 import KV, Eagle3Head, chain_attention
from specgauge.train.target_outputs import teacher_and_greedy


@dataclass
class UnrollStats:
    """Per-step sums over one batch (divide by ``counts`` for rates)."""

    losses: list[float]  # masked mean soft cross-entropy per step
    correct: torch.Tensor  # (S,) rows where the head's token equals the target's greedy token
    prefix_correct: torch.Tensor  # (S,) rows where steps 0..s were all right (a chain would accept s+1)
    counts: torch.Tensor  # (S,) scored rows per step
    trace: list[dict] | None = None  # per step, on the scored rows (flat B·R indices): what it read and wrote


def _shift(x: torch.Tensor, offset: int, length: int) -> torch.Tensor:
    """x[:, offset:offset+length] padded with zeros at the end to ``length`` along dim 1."""
    part = x[:, offset:offset + length]
    if part.shape[1] == length:
        return part
    pad = torch.zeros((x.shape[0], length - part.shape[1], *x.shape[2:]), dtype=x.dtype, device=x.device)
    return torch.cat([part, pad], dim=1)


def _rows_step(head: Eagle3Head, tokens: torch.Tensor, features: torch.Tensor, positions: torch.Tensor,
               rows: torch.Tensor, shape: tuple[int, int], base: KV, chain: list[KV]) -> tuple[torch.Tensor, KV]:
    """An unrolled step (s > 0) computed on ``rows`` only (flat indices into the (B, R) grid).

    Rows of steps after the first attend to the first step's keys and their own chain, never
    to other rows of later steps, so only the scored rows need projections, MLP and logits;
    the attention itself runs on the dense grid (rows left out hold zeros and are dropped).
    tokens (N,), features (N, h), positions (N,) → new features (N, h) and this step's dense KV.
    """
    b, r = shape
    layer = head.midlayer
    x = layer.attention_input(head.embed(tokens), features)  # (N, 2h)
    q, k, v = layer.project_qkv(x.unsqueeze(0), *head.rope(positions.unsqueeze(0)))  # (1, H, N, D)

    def dense(part: torch.Tensor) -> torch.Tensor:  # (1, H, N, D) → (B, H, R, D), zeros off ``rows``
        heads, dim = part.shape[1], part.shape[3]
        grid = part.new_zeros(b * r, heads, dim).index_copy(0, rows, part[0].transpose(0, 1))
        return grid.view(b, r, heads, dim).transpose(1, 2)

    own = KV(dense(k), dense(v))
    out = chain_attention(dense(q), base, [*chain, own], 1.0 / math.sqrt(layer.self_attn.head_dim))  # (B, H, R, D)
    out = out.transpose(1, 2).reshape(b * r, -1).index_select(0, rows)  # (N, H*D)
    return layer.finish(features, out), own


def unrolled_loss(head: Eagle3Head, input_ids: torch.Tensor, aux: torch.Tensor, target_logits: torch.Tensor,
                  response_mask: torch.Tensor, steps: int, decay: float = 0.8, feed: str = "draft",
                  trace: bool = False) -> tuple[torch.Tensor, UnrollStats]:
    """Weighted TTT loss of ``steps`` unrolled draft steps over a batch of sequences.

    input_ids (B, T); aux (B, T, 3H) target features; target_logits (B, T, V) (no grad);
    response_mask (B, T) bool, True on response tokens. The first step runs on every row (its
    keys are the context of all later steps); later steps, and all logits, only on the rows
    some step scores. Returns the loss and per-step stats (with ``trace``, what each step read
    and wrote on those rows).
    """
    with torch.no_grad():
        teacher, greedy = teacher_and_greedy(head, target_logits)
    return unrolled_loss_from(head, input_ids, aux, teacher, greedy, response_mask, steps, decay, feed, trace)


def unrolled_loss_from(head: Eagle3Head, input_ids: torch.Tensor, aux: torch.Tensor, teacher: torch.Tensor,
                       greedy: torch.Tensor, response_mask: torch.Tensor, steps: int, decay: float = 0.8,
                       feed: str = "draft", trace: bool = False) -> tuple[torch.Tensor, UnrollStats]:
    """:func:`unrolled_loss` from the target's teacher logits over the draft vocabulary (B, T, Vd)
    and its greedy next tokens (B, T) (:func:`specgauge.train.target_outputs.teacher_and_greedy`),
    computed here or read from :mod:`specgauge.train.target_outputs`."""
    if steps < 1:
        raise ValueError("steps must be ≥ 1")
    if feed not in ("draft", "target"):
        raise ValueError("feed must be 'draft' or 'target'")
    b, t = input_ids.shape
    rows_per_seq = t - 1
    masks = [_shift(response_mask, 2 + s, rows_per_seq).reshape(-1) for s in range(steps)]  # each (B*R,)
    rows = torch.nonzero(torch.stack(masks).any(0)).flatten()  # (N,) flat rows some step scores
    grid_positions = torch.arange(rows_per_seq, device=input_ids.device).repeat(b)  # (B*R,)
    fused = head.fuse(aux[:, :rows_per_seq])  # (B, R, h)
    tokens = input_ids[:, 1:]  # (B, R)
    first = head.step(tokens, fused, grid_positions[:rows_per_seq], logits=False)  # logits on ``rows`` below
    base = first.kv
    features = first.features.reshape(b * rows_per_seq, -1).index_select(0, rows)  # (N, h)
    tokens_in = tokens.reshape(-1).index_select(0, rows)  # (N,)
    features_in = fused.reshape(b * rows_per_seq, -1).index_select(0, rows)  # (N, h), for the trace
    chain: list[KV] = []
    total = torch.zeros((), device=input_ids.device)
    losses: list[float] = []
    records: list[dict] = []
    correct, prefix_correct, counts = torch.zeros(steps), torch.zeros(steps), torch.zeros(steps)
    prefix = torch.ones(rows.numel(), dtype=torch.bool, device=input_ids.device)
    # Row r of sequence b is scored at step s against position r + 1 + s of the target's outputs:
    # gathered from the flat (B·T) outputs, not shifted copies of them. An index past the sequence
    # (clamped) only ever meets rows whose mask is False, as the mask is the response mask shifted by 2 + s.
    seq_of, row_of = rows // rows_per_seq, rows % rows_per_seq
    flat_teacher, flat_greedy = teacher.reshape(b * t, -1), greedy.reshape(-1)
    for s in range(steps):
        if s > 0:
            features_in = features
            features, kv = _rows_step(head, tokens_in, features, grid_positions[rows] + s, rows,
                                      (b, rows_per_seq), base, chain)
            chain.append(kv)
        logits = head.draft_logits(features)  # (N, Vd)
        mask = masks[s][rows]  # (N,) the scored token x_{t+2+s} is a response token
        at = seq_of * t + (row_of + 1 + s).clamp(max=t - 1)  # (N,) flat positions scored at this step
        probs = torch.softmax(flat_teacher.index_select(0, at), dim=-1)
        per_row = -(probs * F.log_softmax(logits.float(), dim=-1)).sum(-1)  # (N,)
        weight = mask.float()
        loss = (per_row * weight).sum() / weight.sum().clamp(min=1.0)
        total = total + (decay ** s) * loss
        losses.append(loss.item())
        with torch.no_grad():
            drafted = head.draft_to_target(greedy_tokens(logits))  # (N,) target ids
            right = drafted == flat_greedy.index_select(0, at)
            prefix = prefix & right
            correct[s], prefix_correct[s], counts[s] = (right & mask).sum(), (prefix & mask).sum(), mask.sum()
        if trace:
            records.append({"tokens": tokens_in.detach(), "features_in": features_in.detach(),
                            "features_out": features.detach(), "logits": logits.detach(), "mask": mask,
                            "rows": rows})
        if s + 1 < steps:
            tokens_in = drafted if feed == "draft" else _shift(input_ids, 2 + s, rows_per_seq).reshape(-1)[rows]
    return total, UnrollStats(losses, correct, prefix_correct, counts, records if trace else None)


def acceptance_estimate(prefix_rates: list[float]) -> float:
    """Expected tokens per verify of a chain of len(prefix_rates) drafts: 1 (the bonus) + Σ P(first s+1 right)."""
    return 1.0 + sum(prefix_rates)
