"""The flat ragged layout of one cached forward: segments in, a :class:`BatchLayout` out.

Every cached forward — the plain runner's step, the speculative runner's verify, the EAGLE-3
head's catch-up and tree passes — lays its sequences' new tokens out with :func:`lay_out`:
grouped by their number of new tokens and :func:`~specgauge.engine.core.kv_cache.width_bucket`
of their block tables (each group attends as one padded batch, see
:mod:`specgauge.engine.core.kv_cache`), draft trees with their masks and depths. The result
says where each segment landed; the segments are not changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Callable, NamedTuple, Sequence, TypeVar

import torch

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.kv_cache import AttentionGroup, ForwardBatch, build_group, consecutive_from, width_bucket

T = TypeVar("T")


class Segment(NamedTuple):
    """One sequence's new tokens in a forward: ``tokens`` after ``context`` cached positions.

    ``tree_mask`` ((T, T) nested lists) and ``depths`` (T) describe a tree over the new tokens
    (None: a causal chain). ``logit_rows`` are the indices among the new tokens whose logits
    are wanted. ``prompt_rows``: how many leading new tokens are prompt tokens (a batch-invariant
    model attends those in position-aligned blocks; see :class:`~specgauge.engine.core.kv_cache.AttentionGroup`).
    (A named tuple: immutable, and made per sequence per step at a fraction of a frozen
    dataclass's cost.)
    """

    request_id: str
    context: int
    tokens: Sequence[int]
    logit_rows: Sequence[int]
    tree_mask: Sequence[Sequence[bool]] | None = None
    depths: Sequence[int] | None = None
    prompt_rows: int = 0


@dataclass(frozen=True)
class BatchLayout:
    """Where :func:`lay_out` put each segment; per-segment tuples follow the order the segments were given in."""

    batch: ForwardBatch
    offsets: tuple[int, ...]        # index of each segment's first new token in the flat batch
    logit_offsets: tuple[int, ...]  # index of each segment's first wanted row among the logits (segment order)
    order: tuple[int, ...]          # segment indices in the order their tokens are laid out

    def in_layout_order(self, per_segment: Sequence[T]) -> list[T]:
        """``per_segment`` (one item per segment, in segment order) in the order of the flat batch."""
        return [per_segment[i] for i in self.order]


CausalRows = Callable[[int, int, int], torch.Tensor]  # (first, count, keys) → additive causal mask rows (count, keys)


def lay_out(segments: Sequence[Segment], blocks: BlockManager, device: torch.device,
            dtype: torch.dtype = torch.float32, causal_rows: CausalRows | None = None) -> BatchLayout:
    """Lay the segments' new tokens out flat, grouped by their number of new tokens and
    :func:`width_bucket` of their block tables; masks in ``dtype``.

    The logits rows (``batch.logit_indices``) are the segments' ``logit_rows`` in segment order.
    With ``causal_rows`` (a source of mask rows, e.g. a table kept by the caller), one chain
    segment after a cached context is laid out from Python ints and those rows: 4 small tensors
    instead of ~25 ops, for a one-stream step.
    """
    if causal_rows is not None and len(segments) == 1 and segments[0].context > 0 and segments[0].tree_mask is None:
        return _one_chain(segments[0], blocks, device, causal_rows)

    def key(i: int) -> tuple[int, int, int, int]:
        seg = segments[i]  # segments with prompt rows group only with others of the same context
        return (len(seg.tokens), width_bucket(len(blocks.table(seg.request_id).blocks)), seg.prompt_rows,
                seg.context if seg.prompt_rows else 0)

    ordered = sorted(range(len(segments)), key=key)
    input_ids: list[int] = []
    offsets = [0] * len(segments)
    positions, slots, groups = [], [], []
    for (q_len, _, prompt_rows, _), indices in groupby(ordered, key=key):
        indices = list(indices)
        members = [segments[i] for i in indices]
        start = len(input_ids)
        for i, seg in zip(indices, members):
            offsets[i] = len(input_ids)
            input_ids.extend(seg.tokens)
        tree_mask = depths = None
        if any(seg.tree_mask is not None for seg in members):
            causal = torch.ones(q_len, q_len, dtype=torch.bool).tril()
            tree_mask = torch.stack([torch.tensor(s.tree_mask, dtype=torch.bool) if s.tree_mask is not None
                                     else causal for s in members])  # (B, Tq, Tq)
            depths = torch.stack([torch.tensor(s.depths) if s.depths is not None else torch.arange(q_len)
                                  for s in members])  # (B, Tq)
        group, group_positions, group_slots = build_group(
            start, q_len, [s.context for s in members], [blocks.table(s.request_id).blocks for s in members],
            blocks.block_size, device, dtype, tree_mask=tree_mask, tree_depths=depths, prompt_rows=prompt_rows)
        groups.append(group)
        positions.append(group_positions)
        slots.append(group_slots)
    logit_indices: list[int] = []
    logit_offsets: list[int] = []
    for seg, offset in zip(segments, offsets):
        logit_offsets.append(len(logit_indices))
        for row in seg.logit_rows:
            logit_indices.append(offset + row)
    batch = ForwardBatch(
        input_ids=torch.tensor(input_ids, dtype=torch.long, device=device),
        positions=torch.cat(positions).to(device),
        write_slots=torch.cat(slots).to(device),
        groups=groups,
        logit_indices=torch.tensor(logit_indices, dtype=torch.long, device=device),
    )
    return BatchLayout(batch, tuple(offsets), tuple(logit_offsets), tuple(ordered))


def _one_chain(segment: Segment, blocks: BlockManager, device: torch.device, causal_rows: CausalRows) -> BatchLayout:
    """:func:`lay_out` of one chain segment after a cached context, from Python ints and the caller's mask rows."""
    table = blocks.table(segment.request_id).blocks
    first, count = segment.context, len(segment.tokens)
    slots = blocks.slots(segment.request_id, first, first + count)
    mask = causal_rows(first, count, len(table) * blocks.block_size).unsqueeze(0).unsqueeze(0)  # (1, 1, T, Tk)
    group = AttentionGroup(0, count, 1, count, torch.tensor([table], device=device), mask,
                           first_block=consecutive_from([table]))
    batch = ForwardBatch(torch.tensor(segment.tokens, device=device), torch.arange(first, first + count, device=device),
                         torch.tensor(slots, device=device), [group], torch.tensor(segment.logit_rows, device=device))
    return BatchLayout(batch, (0,), (0,), (0,))
