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
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specgauge.engine.core.sampling import greedy_tokens
from specgauge.engine.models.eagle3 import KV, Eagle3Head
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


@dataclass
class RowSlots:
    """Where each scored row sits in a (B, S) grid of query slots: S the most rows any sequence
    has scored, each sequence's rows in order. Later unrolled steps attend from these slots only,
    not from every row of the (B, R) grid (most of a window is prompt that no step scores)."""

    index: torch.Tensor  # (N,) flat slot (b * S + j) of each scored row
    grid_row: torch.Tensor  # (B, S) the row (position in its sequence) in each slot; 0 in an empty one
    shape: tuple[int, int]  # (B, S)

    @classmethod
    def of(cls, rows: torch.Tensor, batch: int, rows_per_seq: int) -> "RowSlots":
        """``rows``: sorted flat indices into the (B, R) grid."""
        seq = rows // rows_per_seq
        per_seq = torch.bincount(seq, minlength=batch)  # (B,)
        width = max(int(per_seq.max()), 1) if rows.numel() else 1
        starts = torch.cumsum(per_seq, 0) - per_seq  # (B,) first index of each sequence in ``rows``
        index = seq * width + (torch.arange(rows.numel(), device=rows.device) - starts[seq])
        grid_row = torch.zeros(batch * width, dtype=torch.long, device=rows.device)
        grid_row[index] = rows % rows_per_seq
        return cls(index, grid_row.view(batch, width), (batch, width))

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """(N, H, D) per scored row → (B, H, S, D), zeros in empty slots."""
        b, width = self.shape
        grid = x.new_zeros(b * width, *x.shape[1:]).index_copy(0, self.index, x)
        return grid.view(b, width, *x.shape[1:]).transpose(1, 2)

    def scatter(self, x: torch.Tensor) -> torch.Tensor:
        """(B, H, S, D) → (N, H·D) in the scored rows' order."""
        b, heads, width, dim = x.shape
        return x.transpose(1, 2).reshape(b * width, heads * dim).index_select(0, self.index)


def rows_attention(q: torch.Tensor, base: KV, chain: Sequence[KV], slots: RowSlots, scale: float) -> torch.Tensor:
    """:func:`~specgauge.engine.models.eagle3.chain_attention` from the scored rows' slots only:
    the query in slot (b, j), row t = ``slots.grid_row[b, j]``, attends to ``base`` rows 0..t
    and to slot (b, j) of every KV in ``chain``. q (B, Hq, S, D); base (B, Hkv, R, D); chain
    entries (B, Hkv, S, D) → (B, Hq, S, D), softmax in fp32. Query heads share their key head
    through a view (no copies of the keys per query head)."""
    b, hq, width, d = q.shape
    hkv, rows = base.k.shape[1], base.k.shape[2]
    groups = hq // hkv
    qf = q.float().reshape(b, hkv, groups * width, d)  # query head h = kv head h // groups, as in repeat_interleave
    scores = (qf @ base.k.float().transpose(-1, -2) * scale).view(b, hkv, groups, width, rows)
    past = torch.arange(rows, device=q.device) <= slots.grid_row.unsqueeze(-1)  # (B, S, R)
    scores = scores.masked_fill(~past[:, None, None], float("-inf"))
    qg = qf.view(b, hkv, groups, width, d)
    diag = [(qg * kv.k.float().unsqueeze(2)).sum(-1, keepdim=True) * scale for kv in chain]  # (B, Hkv, G, S, 1)
    weights = torch.softmax(torch.cat([scores, *diag], dim=-1), dim=-1)  # (B, Hkv, G, S, R + len(chain))
    out = (weights[..., :rows].reshape(b, hkv, groups * width, rows) @ base.v.float()).view(b, hkv, groups, width, d)
    for index, kv in enumerate(chain):
        out = out + weights[..., rows + index:rows + index + 1] * kv.v.float().unsqueeze(2)
    return out.reshape(b, hq, width, d).to(q.dtype)


def _first_step(head: Eagle3Head, tokens: torch.Tensor, fused: torch.Tensor, fused_rows: torch.Tensor,
                rows: torch.Tensor, slots: RowSlots) -> tuple[torch.Tensor, KV]:
    """The first unrolled step: keys and values of every row (the context of all later steps),
    queries, attention, MLP of the scored rows only — on those rows, the head's causal pass
    (:meth:`Eagle3Head.step`). tokens (B, R), fused (B, R, h) and its ``rows`` (N, h) → features
    (N, h) of ``rows`` and the keys and values (B, Hkv, R, D)."""
    b, r = tokens.shape
    layer = head.midlayer
    x = layer.attention_input(head.embed(tokens), fused)  # (B, R, 2h)
    cos, sin = head.rope(torch.arange(r, device=tokens.device).unsqueeze(0))  # (1, R, D)
    base = KV(*layer.project_kv(x, cos, sin))  # (B, Hkv, R, D) each
    row_of = rows % r
    q = layer.project_q(x.reshape(b * r, -1).index_select(0, rows).unsqueeze(0), cos[:, row_of], sin[:, row_of])
    out = rows_attention(slots.gather(q[0].transpose(0, 1)), base, [], slots,
                         1.0 / math.sqrt(layer.self_attn.head_dim))  # (B, Hq, S, D)
    features = layer.finish(fused_rows, slots.scatter(out))  # (N, h)
    return features, base


def _rows_step(head: Eagle3Head, tokens: torch.Tensor, features: torch.Tensor, positions: torch.Tensor,
               slots: RowSlots, base: KV, chain: list[KV]) -> tuple[torch.Tensor, KV]:
    """An unrolled step (s > 0) computed on the scored rows only.

    Rows of steps after the first attend to the first step's keys and their own chain, never
    to other rows of later steps, so only the scored rows need projections, MLP, logits and
    queries (:func:`rows_attention`). tokens (N,), features (N, h), positions (N,) → new
    features (N, h) and this step's KV in ``slots``' layout.
    """
    layer = head.midlayer
    x = layer.attention_input(head.embed(tokens), features)  # (N, 2h)
    q, k, v = layer.project_qkv(x.unsqueeze(0), *head.rope(positions.unsqueeze(0)))  # (1, H, N, D)
    own = KV(slots.gather(k[0].transpose(0, 1)), slots.gather(v[0].transpose(0, 1)))  # (B, Hkv, S, D)
    out = rows_attention(slots.gather(q[0].transpose(0, 1)), base, [*chain, own], slots,
                         1.0 / math.sqrt(layer.self_attn.head_dim))  # (B, Hq, S, D)
    return layer.finish(features, slots.scatter(out)), own


def unrolled_loss(head: Eagle3Head, input_ids: torch.Tensor, aux: torch.Tensor, target_logits: torch.Tensor,
                  response_mask: torch.Tensor, steps: int, decay: float = 0.8, feed: str = "draft",
                  trace: bool = False) -> tuple[torch.Tensor, UnrollStats]:
    """Weighted TTT loss of ``steps`` unrolled draft steps over a batch of sequences.

    input_ids (B, T); aux (B, T, 3H) target features; target_logits (B, T, V) (no grad);
    response_mask (B, T) bool, True on response tokens. Only the first step's keys and values
    are computed on every row (the context of all later steps); queries, attention, MLP and
    logits of every step only on the rows some step scores. Returns the loss and per-step stats (with ``trace``, what each step read
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
    slots = RowSlots.of(rows, b, rows_per_seq)
    features_in = fused.reshape(b * rows_per_seq, -1).index_select(0, rows)  # (N, h)
    features, base = _first_step(head, tokens, fused, features_in, rows, slots)  # (N, h), the keys every later step reads
    tokens_in = tokens.reshape(-1).index_select(0, rows)  # (N,)
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
            features, kv = _rows_step(head, tokens_in, features, grid_positions[rows] + s, slots, base, chain)
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
