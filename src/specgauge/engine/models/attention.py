"""Attention over the paged KV pool, and its batch-invariant variant.

:func:`paged_attention` writes a step's new K/V into one layer's slots and attends group by
group (see :mod:`specgauge.engine.core.kv_cache`). With ``invariant`` every SDPA call's shapes
follow from the row alone — prompt rows in position-aligned blocks, generated rows one by one,
the call a one-token decode makes — so a token's output bits do not depend on what shares its
step (docs/engine.md, "Batch invariance"); :func:`linear_is_batch_invariant` probes whether this
machine's matmuls allow that at all, :func:`attention_is_batch_invariant` whether its SDPA does.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from specgauge.engine.models import paged_kernel
from specgauge.engine.models.linear import PackedFP16, PackedOneDNN, linear

if TYPE_CHECKING:
    from specgauge.engine.core.kv_cache import AttentionGroup, ForwardBatch


def rowwise_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                      group: "AttentionGroup | None" = None) -> torch.Tensor:
    """Attention in which every query row is computed alone, so its bits do not depend on how
    many rows share the call (a 5-token verify gives each row what a 1-token decode gives it).

    q (B, Hq, Tq, D), k and v (B, Hkv, Tk, D), ``mask`` additive, broadcastable to (B, 1, Tq, Tk).
    CPU SDPA blocks the query rows of one head together, and the blocking changes the float
    arithmetic; folding the Tq rows into the head axis (head ``h * Tq + i`` is row ``i`` of head
    ``h``, still mapped to kv head ``h // group``) makes every (sequence, head) a one-row query,
    the same call a decode makes. The folded mask is built once per ``group`` (all layers share it).
    """
    b, n_q, t_q, d = q.shape
    if t_q == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    folded = group.folded_mask if group is not None else None
    if folded is None:
        folded = mask.expand(b, n_q, t_q, mask.shape[-1]).reshape(b, n_q * t_q, 1, mask.shape[-1])
        if group is not None:
            group.folded_mask = folded
    out = F.scaled_dot_product_attention(q.reshape(b, n_q * t_q, 1, d), k, v, attn_mask=folded, enable_gqa=True)
    return out.view(b, n_q, t_q, d)


KEY_ALIGN = 16  # row-wise attention keeps the key count a multiple of this (see ``aligned_keys``)
PROMPT_BLOCK = 32  # prompt rows attend in blocks of this many positions (``prompt_block_attention``)


def prompt_block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first: int,
                           masks: dict | None = None) -> torch.Tensor:
    """Batch-invariant causal attention for prompt rows, blocked instead of row by row.

    q (B, Hq, P, D) holds the rows of positions ``first .. first+P-1``; k and v (B, Hkv, Tk, D)
    the keys of positions ``0 ..`` (the cache's gathered blocks, or a fresh prompt's own tokens).
    The rows are cut at multiples of ``PROMPT_BLOCK``; block ``m`` is one SDPA call of exactly
    ``PROMPT_BLOCK`` query rows, each row at its own offset (rows this step lacks are zeros),
    against exactly the keys ``0 .. (m+1)·PROMPT_BLOCK - 1`` (zero-padded past Tk), masked
    causally. CPU SDPA's float arithmetic for a row depends on the call's row and key counts
    (its gemm shapes), not on the other rows, and both counts here follow from the row's position
    alone — so a prompt token's output is the same bits whether its prompt was prefilled whole or
    in any chunks, as with :func:`rowwise_attention`, but with the query rows of a block sharing
    each key load (a 3,072-token prefill 3.1x faster; docs/engine.md, "Batch invariance").
    ``masks`` (block index → mask) carries the masks to the forward's other layers.
    """
    b, n_q, p, d = q.shape
    outs = []
    for block in range(first // PROMPT_BLOCK, (first + p - 1) // PROMPT_BLOCK + 1):
        start = block * PROMPT_BLOCK
        lo, hi = max(start, first), min(start + PROMPT_BLOCK, first + p)  # this step's positions in the block
        width = start + PROMPT_BLOCK
        mask = masks.get(block) if masks is not None else None
        if mask is None:
            rows = torch.arange(start, width, device=q.device).view(-1, 1)
            mask = torch.zeros(PROMPT_BLOCK, width, dtype=q.dtype, device=q.device).masked_fill_(
                torch.arange(width, device=q.device) > rows, float("-inf")).view(1, 1, PROMPT_BLOCK, width)
            if masks is not None:
                masks[block] = mask
        rows_q = F.pad(q[:, :, lo - first:hi - first], (0, 0, lo - start, width - hi))
        keys, values = k[:, :, :width], v[:, :, :width]
        if keys.shape[2] < width:
            keys, values = (F.pad(t, (0, 0, 0, width - t.shape[2])) for t in (keys, values))
        out = F.scaled_dot_product_attention(rows_q, keys, values, attn_mask=mask, enable_gqa=True)
        outs.append(out[:, :, lo - start:hi - start])
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)


def causal_mask(length: int, dtype: torch.dtype, device: torch.device, width: int | None = None) -> torch.Tensor:
    """Additive causal mask (1, 1, T, width): 0 on and below the diagonal, -inf above and in the
    padding past T."""
    width = width or length
    future = torch.ones(length, width, dtype=torch.bool, device=device).triu(1)
    return torch.zeros(length, width, dtype=dtype, device=device).masked_fill_(future, float("-inf")).view(
        1, 1, length, width)


def aligned_keys(k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad k and v (B, Hkv, Tk, D) with masked keys up to ``mask``'s width.

    CPU SDPA's result for a row changes with the number of keys past its last visible one unless
    that number is a multiple of 16 (its vector tails); padding every call to a multiple of
    ``KEY_ALIGN`` keeps a row's bits the same whether its keys came from the cache (whole blocks)
    or from the step's own tokens.
    """
    pad = mask.shape[-1] - k.shape[2]
    if pad == 0:
        return k, v
    return F.pad(k, (0, 0, 0, pad)), F.pad(v, (0, 0, 0, pad))


def aligned_width(length: int) -> int:
    return -(-length // KEY_ALIGN) * KEY_ALIGN


def _invariant_group_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: "AttentionGroup") -> torch.Tensor:
    """One group's batch-invariant attention: its prompt rows in position-aligned blocks
    (:func:`prompt_block_attention`), any other rows (generated tokens: decodes, verifies, and
    the output part of a recomputed request) row-wise, keys padded to ``KEY_ALIGN`` (the group's
    mask is built or padded once, on the first layer: a fresh group's is causal over its own tokens)."""
    prompt = group.prompt_rows
    if prompt:
        if group.block_masks is None:
            group.block_masks = {}
        blocked = prompt_block_attention(q[:, :, :prompt], k, v, group.first_position, group.block_masks)
        if prompt == group.q_len:
            return blocked
        return torch.cat([blocked, _generated_rows_attention(q, k, v, group)], dim=2)
    if group.mask is None:
        group.mask = causal_mask(group.q_len, q.dtype, q.device, aligned_width(group.q_len))
    elif group.mask.shape[-1] % KEY_ALIGN:  # blocks smaller than 16 tokens
        group.mask = F.pad(group.mask, (0, -group.mask.shape[-1] % KEY_ALIGN), value=float("-inf"))
    k, v = aligned_keys(k, v, group.mask)
    return rowwise_attention(q, k, v, group.mask, group)


def _generated_rows_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group: "AttentionGroup") -> torch.Tensor:
    """Row-wise attention for the rows after a group's prompt rows (a recomputed request's output
    tokens, attended as their decode attended them)."""
    prompt = group.prompt_rows
    mask = group.mask if group.mask is not None else causal_mask(group.q_len, q.dtype, q.device)
    mask = mask[..., prompt:, :]
    if mask.shape[-1] % KEY_ALIGN:
        mask = F.pad(mask, (0, -mask.shape[-1] % KEY_ALIGN), value=float("-inf"))
    k, v = aligned_keys(k, v, mask)
    return rowwise_attention(q[:, :, prompt:], k, v, mask)


# Without batch invariance, cached groups of up to this many rows read the pool in place: decodes
# and verifies; longer prefill chunks keep SDPA's blocked form.
INPLACE_MAX_ROWS = 16


def inplace_rows(group: "AttentionGroup", invariant: bool) -> int:
    """How many of ``group``'s trailing rows per member the in-place kernel attends (0: none).

    Batch-invariant: every generated row (all rows past the prompt rows, which stay in
    position-aligned SDPA blocks), so a decode, a verify row and a recomputed output token all
    get the kernel's bits. Otherwise: the rows of a cached group of at most ``INPLACE_MAX_ROWS``
    rows (decodes and verifies; longer prefill chunks keep SDPA).
    """
    if invariant:
        return group.q_len - group.prompt_rows
    return group.q_len if not group.fresh and group.q_len <= INPLACE_MAX_ROWS else 0


def _inplace_mask(group: "AttentionGroup", rows: int) -> torch.Tensor:
    """The fp32 additive mask (B, rows, Tk) of a group's last ``rows`` rows, built once a forward."""
    if group.inplace_mask is None:
        if group.mask is not None:
            mask = group.mask[:, 0, group.q_len - rows:]  # (B, rows, Tk)
        else:  # fresh: causal over the group's own tokens
            mask = causal_mask(group.q_len, torch.float32, group.pool_table.device)[:, 0, group.q_len - rows:]
            mask = mask.expand(group.batch, rows, group.q_len)
        group.inplace_mask = mask.to(torch.float32)
    return group.inplace_mask


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_layer: torch.Tensor,
                    v_layer: torch.Tensor, batch: "ForwardBatch", block_size: int,
                    attn_dtype: torch.dtype, invariant: bool = False) -> torch.Tensor:
    """Write the step's new K/V into one layer's pool and attend, group by group.

    q (N, Hq, D), k and v (N, Hkv, D) for the step's new tokens; ``k_layer``/``v_layer``
    (Hkv, S, D) are the layer's slots. Returns the attention output (N, Hq * D) in ``attn_dtype``.
    Shared by the target's cached forward and the EAGLE-3 head's (one layer of its own).
    ``invariant``: attend so that a token's output is the same bits whatever else is in the
    step — prefill chunking, verify length, batch: prompt rows in position-aligned blocks
    (:func:`prompt_block_attention`), generated rows one by one (:func:`rowwise_attention`).

    In fp32 on CPU, decode and verify rows (:func:`inplace_rows`) are attended by the in-place
    kernel (:mod:`specgauge.engine.models.paged_kernel`, which states why its rows are batch
    invariant): it reads each row's blocks where they lie in the pool, so those rows need no
    gather; other rows, other dtypes, or a process on the gather path use ``index_select`` + SDPA.
    """
    n, n_q, d = q.shape
    n_kv = k.shape[1]
    gqa = n_q != n_kv
    k_layer.index_copy_(1, batch.write_slots, k.transpose(0, 1).to(k_layer.dtype))
    v_layer.index_copy_(1, batch.write_slots, v.transpose(0, 1).to(v_layer.dtype))
    kernel = paged_kernel.kernel() if attn_dtype == torch.float32 and paged_kernel.can_run(q, k_layer) else None
    num_blocks = k_layer.shape[1] // block_size
    k_blocks = k_layer.view(n_kv, num_blocks, block_size, d)  # (Hkv, blocks, bs, D)
    v_blocks = v_layer.view(n_kv, num_blocks, block_size, d)
    outs = []
    for g in batch.groups:
        rows = inplace_rows(g, invariant) if kernel is not None else 0
        inplace = None
        if rows:
            table = g.block_table if g.block_table is not None else g.pool_table  # (B, nb)
            q_rows = q[g.token_start:g.token_stop].view(g.batch, g.q_len, n_q, d)[:, g.q_len - rows:]
            inplace = kernel.paged_attention(q_rows.reshape(g.batch * rows, n_q, d).to(torch.float32), k_layer,
                                             v_layer, table, _inplace_mask(g, rows), block_size,
                                             d ** -0.5)  # (B*rows, Hq*D)
            if rows == g.q_len:
                outs.append(inplace)
                continue
        qg = q[g.token_start:g.token_stop].view(g.batch, g.q_len, n_q, d).transpose(1, 2)  # (B, Hq, Tq, D)
        if g.fresh:  # keys are the step's own tokens
            kg = k[g.token_start:g.token_stop].view(g.batch, g.q_len, n_kv, d).transpose(1, 2)
            vg = v[g.token_start:g.token_stop].view(g.batch, g.q_len, n_kv, d).transpose(1, 2)
        elif g.first_block is not None:  # one sequence on consecutive blocks: a view, no gather
            first, stop = g.first_block * block_size, (g.first_block + g.block_table.shape[1]) * block_size
            kg, vg = k_layer[:, first:stop].unsqueeze(0), v_layer[:, first:stop].unsqueeze(0)  # (1, Hkv, Tk, D)
        else:  # gather whole blocks (index_select: ~3x faster than advanced indexing on CPU)
            blocks = g.block_table.reshape(-1)  # (B*nb,)
            kg = k_blocks.index_select(1, blocks).view(n_kv, g.batch, -1, d).transpose(0, 1)  # (B, Hkv, Tk, D)
            vg = v_blocks.index_select(1, blocks).view(n_kv, g.batch, -1, d).transpose(0, 1)
        qg, kg, vg = qg.to(attn_dtype), kg.to(attn_dtype), vg.to(attn_dtype)
        if inplace is not None:  # the prompt rows in blocks, the generated ones from the kernel
            if g.block_masks is None:
                g.block_masks = {}
            prompt = prompt_block_attention(qg[:, :, :g.prompt_rows], kg, vg, g.first_position, g.block_masks)
            prompt = prompt.transpose(1, 2).reshape(g.batch, g.prompt_rows, n_q * d)
            outs.append(torch.cat([prompt, inplace.view(g.batch, rows, n_q * d)], dim=1).view(-1, n_q * d))
            continue
        if invariant:
            o = _invariant_group_attention(qg, kg, vg, g)
        else:
            o = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=g.mask, is_causal=g.fresh and g.q_len > 1,
                                               enable_gqa=gqa)
        outs.append(o.transpose(1, 2).reshape(g.batch * g.q_len, n_q * d))  # (B*Tq, Hq*D)
    return outs[0] if len(outs) == 1 else torch.cat(outs)


def linear_is_batch_invariant(weight: torch.Tensor | PackedFP16 | PackedOneDNN) -> bool:
    """Probe: does the step's matmul with ``weight`` (dense or packed) give a row the same bits
    alone as among 2 to 300 rows (each of the first 64 alone)? True for bf16 weights reordered for oneDNN on CPUs
    with native bf16 and for plain bf16 ones of inner dimension below 512; false for plain bf16
    ones of 512 and more (oneDNN sums 33-319 rows differently), for fp32 (MKL switches kernels
    with the row count) and for FBGEMM's fp16-packed weights."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, weight.shape[1], generator=generator)
    if isinstance(weight, PackedOneDNN):
        x = x.bfloat16()
    elif not isinstance(weight, PackedFP16):
        x = x.to(weight.device, weight.dtype)
    with torch.no_grad():
        full = linear(x, weight)
        # every one of the first 64 rows alone: a one-row kernel that sums differently may do so
        # for a few rows in 64 only (oneDNN's bf16 576 x 1,536 product on AVX512-BF16 without AMX)
        rows = (*range(64), 150, 299)
        single = torch.cat([linear(x[i:i + 1], weight) for i in rows])
        return torch.equal(single, full[list(rows)]) and all(
            torch.equal(linear(x[:count], weight), full[:count]) for count in (2, 5, 40, 64, 65, 100, 140))


def attention_is_batch_invariant(dtype: torch.dtype) -> bool:
    """Probe: does SDPA give a one-row query (the call every row-wise row makes) the same bits
    alone as at every place in a batch of 15, at this process's thread count? Without MKL's
    reproducible mode fp32 SDPA on 2 threads did not (AMD EPYC, torch 2.13: a (sequence, head)
    got one of three results by which thread computed it); bf16 did (specgauge.engine sets
    MKL_CBWR, see its ``__init__``). Probed once per (dtype, threads); shapes, not values, pick
    the kernel's path."""
    return _attention_probe(dtype, torch.get_num_threads())


@functools.cache
def _attention_probe(dtype: torch.dtype, threads: int) -> bool:
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for keys, visible in ((64, 50), (144, 131), (1040, 1000)):
            q, k, v = (torch.randn(15, heads, rows, 64, generator=generator).to(dtype)
                       for heads, rows in ((9, 1), (3, keys), (3, keys)))
            mask = torch.zeros(15, 1, 1, keys, dtype=dtype)
            mask[..., visible:] = float("-inf")
            batch = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            for i in range(15):
                alone = F.scaled_dot_product_attention(q[i:i + 1], k[i:i + 1], v[i:i + 1], attn_mask=mask[i:i + 1],
                                                       enable_gqa=True)
                if not torch.equal(alone, batch[i:i + 1]):
                    return False
    return True
