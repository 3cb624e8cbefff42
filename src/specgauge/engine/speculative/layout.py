"""Flat ragged layout of one forward: the same grouping as the target's runner, plus draft trees."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

import torch

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.kv_cache import ForwardBatch, build_group, width_bucket


@dataclass
class Segment:
    """One sequence's new tokens in a forward: ``tokens`` after ``context`` cached positions.

    ``tree_mask`` ((T, T) nested lists) and ``depths`` (T) describe a tree over the new tokens
    (None: a causal chain). ``logit_rows`` are the indices among the new tokens whose logits
    are wanted.
    """

    request_id: str
    context: int
    tokens: list[int]
    logit_rows: list[int]
    tree_mask: list[list[bool]] | None = None
    depths: list[int] | None = None
    offset: int = 0  # set by ``layout``: index of the first new token in the flat batch
    logit_offset: int = 0  # set by ``layout``: index of the first wanted row among the logits


def layout(segments: list[Segment], blocks: BlockManager, device: torch.device,
           dtype: torch.dtype = torch.float32) -> ForwardBatch:
    """Lay the segments out flat, grouped by their number of new tokens and :func:`width_bucket`
    of their block tables (each group attends as one padded batch); sets every segment's
    ``offset`` and ``logit_offset``."""
    def key(i: int) -> tuple[int, int]:
        return len(segments[i].tokens), width_bucket(len(blocks.table(segments[i].request_id).blocks))

    ordered = sorted(range(len(segments)), key=key)
    input_ids: list[int] = []
    positions, slots, groups = [], [], []
    for (q_len, _), members in groupby(ordered, key=key):
        members = [segments[i] for i in members]
        start = len(input_ids)
        for seg in members:
            seg.offset = len(input_ids)
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
            blocks.block_size, device, dtype, tree_mask=tree_mask, tree_depths=depths)
        groups.append(group)
        positions.append(group_positions)
        slots.append(group_slots)
    logit_indices: list[int] = []
    for seg in segments:
        seg.logit_offset = len(logit_indices)
        logit_indices.extend(seg.offset + row for row in seg.logit_rows)
    return ForwardBatch(
        input_ids=torch.tensor(input_ids, dtype=torch.long, device=device),
        positions=torch.cat(positions).to(device),
        write_slots=torch.cat(slots).to(device),
        groups=groups,
        logit_indices=torch.tensor(logit_indices, dtype=torch.long, device=device),
    )
