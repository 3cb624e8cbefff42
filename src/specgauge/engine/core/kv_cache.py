"""The preallocated KV pool and the per-step attention layout that addresses it.

Layout: one key tensor and one value tensor of shape ``(L, Hkv, num_slots, D)`` with
``num_slots = num_blocks * block_size``; slot ``b * block_size + i`` is token ``i`` of block ``b``.
Heads come before slots, so a sequence's keys for one head lie together: a gather of its blocks is
one contiguous run per head, and a sequence whose blocks are consecutive in the pool needs no
gather at all (a view; :attr:`AttentionGroup.first_block`).
Which blocks belong to which request is decided by :class:`~specgauge.engine.core.block_manager.BlockManager`
(pure Python); this module only turns block tables into index tensors, once per step.

Attention reads whole blocks: ``k[layer].view(Hkv, num_blocks, block_size, D)[:, block_table]``.

A step's tokens are laid out flat, ``(N,)``, sequence after sequence. Sequences with the same
number of new tokens (all decodes; a verify of k+1 tokens; equal prefill chunks) form one
:class:`AttentionGroup` that attends as one padded batch, so a layer loops over groups, never
over requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


class KVCache:
    """Key/value storage for every layer, allocated once."""

    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int,
                 head_dim: int, dtype: torch.dtype, device: torch.device | str) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        shape = (num_layers, num_kv_heads, num_blocks * block_size, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (L, Hkv, S, D)
        self.v = torch.zeros(shape, dtype=dtype, device=device)  # (L, Hkv, S, D)

    def copy_slots(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """Copy K/V of slots ``src`` to slots ``dst`` in every layer (compacting an accepted tree path)."""
        self.k[:, :, dst] = self.k[:, :, src]
        self.v[:, :, dst] = self.v[:, :, src]


@dataclass
class AttentionGroup:
    """Sequences of one step that attend together: ``batch`` sequences of ``q_len`` new tokens each.

    ``block_table`` (B, nb) lists each sequence's cache blocks (padded with block 0), so a layer
    gathers whole blocks — keys ``Tk = nb * block_size`` — and ``mask`` (B, 1, Tq, Tk), additive
    (0 or -inf, in the model's dtype), hides the padding and the future. A *fresh* group (no cached
    context, so its keys are its own new tokens) uses a causal mask and needs neither tensor.
    """

    token_start: int
    token_stop: int
    batch: int
    q_len: int
    block_table: torch.Tensor | None
    mask: torch.Tensor | None
    folded_mask: "torch.Tensor | list | None" = None  # the mask per (head, row), built once a forward (row-wise attention)
    # Batch-invariant attention: the first ``prompt_rows`` new tokens of every member are prompt
    # tokens at positions ``first_position`` on (the members share it), attended in
    # position-aligned blocks (attention.prompt_block_attention); ``block_masks`` keeps those
    # blocks' masks for the forward's other layers.
    prompt_rows: int = 0
    first_position: int = 0
    block_masks: dict | None = None
    # One member whose blocks are consecutive in the pool: the first of them (its keys are then a
    # view of the pool, not a gather); None otherwise.
    first_block: int | None = None
    # A fresh group's block table (B, nb): its keys are its own tokens, but they are in the pool by
    # the time it attends, so the in-place kernel (attention.paged_attention) can read them there.
    pool_table: torch.Tensor | None = None
    # The (B, Tq', Tk) fp32 mask of the rows the in-place kernel attends, built on the first layer.
    inplace_mask: torch.Tensor | None = None

    @property
    def fresh(self) -> bool:
        return self.block_table is None


@dataclass
class ForwardBatch:
    """Everything one cached forward needs, as tensors on the model's device."""

    input_ids: torch.Tensor      # (N,)
    positions: torch.Tensor      # (N,)
    write_slots: torch.Tensor    # (N,) cache slot of each new token's K/V
    groups: list[AttentionGroup]
    logit_indices: torch.Tensor  # (M,) flat token indices whose logits are wanted

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])


def consecutive_from(block_tables: list[list[int]]) -> int | None:
    """The first block of a lone block table whose blocks are consecutive (``b, b+1, …``), else None."""
    if len(block_tables) != 1:
        return None
    table = block_tables[0]
    first = table[0]
    return first if table[-1] - first == len(table) - 1 and table == list(range(first, first + len(table))) else None


def width_bucket(num_blocks: int) -> int:
    """The attention group a sequence with ``num_blocks`` KV blocks joins, among those with its
    number of new tokens: the next power of two. A group gathers and attends over every member's
    keys padded to its widest member, so one long context in a batch of short ones would
    multiply the whole batch's attention work (at 64 streams, one 460-token prompt among 80-token
    ones made decode attention 6x as big); within a bucket padding at most doubles it."""
    return 1 << max(0, num_blocks - 1).bit_length()


def build_group(token_start: int, q_len: int, context_lens: list[int], block_tables: list[list[int]],
                block_size: int, device: torch.device, dtype: torch.dtype = torch.float32,
                tree_mask: "list[list[bool]] | torch.Tensor | None" = None,
                tree_depths: "list[int] | torch.Tensor | None" = None, prompt_rows: int = 0,
                ) -> tuple[AttentionGroup, torch.Tensor, torch.Tensor]:
    """Index tensors for sequences with ``q_len`` new tokens after ``context_lens`` cached ones.

    New token ``j`` of a sequence is stored at position ``context + j``. By default the new
    tokens form a chain (causal). For a draft *tree* (verification of several branches in one
    forward), ``tree_mask`` (Tq x Tq, shared by the group) says which new tokens query ``i`` sees
    (its ancestors and itself) and ``tree_depths`` (Tq) gives each token's depth, so its RoPE
    position is ``context + depth`` while its storage position stays ``context + j``. Sequences
    of one group may have trees of different shapes: pass ``tree_mask`` as a (B, Tq, Tq) bool
    tensor and ``tree_depths`` as (B, Tq).

    ``prompt_rows``: how many leading new tokens of every member are prompt tokens (the members
    then share one context; see :class:`AttentionGroup`).

    Returns the group, the new tokens' RoPE positions (B*Tq,) and their write slots (B*Tq,).
    """
    if prompt_rows and len(set(context_lens)) > 1:
        raise ValueError("members with prompt rows must share one context")
    batch = len(context_lens)
    max_blocks = max(len(t) for t in block_tables)
    table = torch.tensor([t + [0] * (max_blocks - len(t)) for t in block_tables], dtype=torch.long)  # (B, nb)
    ctx = torch.tensor(context_lens, dtype=torch.long).unsqueeze(1)  # (B, 1)
    stored = ctx + torch.arange(q_len).unsqueeze(0)  # (B, Tq) storage positions
    write_slots = table.gather(1, stored // block_size) * block_size + stored % block_size  # (B, Tq)
    depths = torch.as_tensor(tree_depths, dtype=torch.long) if tree_depths is not None else torch.arange(q_len)
    positions = ctx + (depths if depths.dim() == 2 else depths.unsqueeze(0))  # (B, Tq) RoPE positions
    if max(context_lens) == 0 and tree_mask is None:
        group = AttentionGroup(token_start, token_start + batch * q_len, batch, q_len, None, None,
                               prompt_rows=prompt_rows, pool_table=table.to(device))
    else:
        keys = torch.arange(max_blocks * block_size).view(1, 1, -1)  # (1, 1, Tk) key storage positions
        visible = keys <= stored.unsqueeze(2)  # (B, Tq, Tk) causal; also hides padded blocks
        if tree_mask is not None:
            new = torch.as_tensor(tree_mask, dtype=torch.bool)  # (Tq, Tq) or (B, Tq, Tq): query i sees token j
            new = new.expand(batch, q_len, q_len) if new.dim() == 2 else new  # (B, Tq, Tq)
            offset = keys - ctx.unsqueeze(2)  # (B, 1, Tk) index among the new tokens (< 0: cached)
            among_new = (offset >= 0) & (offset < q_len)
            index = offset.clamp(0, q_len - 1).expand(batch, q_len, -1)  # (B, Tq, Tk)
            sees_new = new.gather(2, index)  # (B, Tq, Tk)
            visible = torch.where(among_new, sees_new, offset < 0)
        mask = torch.zeros(visible.shape, dtype=dtype).masked_fill_(~visible, float("-inf"))
        group = AttentionGroup(token_start, token_start + batch * q_len, batch, q_len,
                               table.to(device), mask.unsqueeze(1).to(device),
                               prompt_rows=prompt_rows, first_position=context_lens[0] if prompt_rows else 0,
                               first_block=consecutive_from(block_tables))
    return group, positions.reshape(-1), write_slots.reshape(-1)
