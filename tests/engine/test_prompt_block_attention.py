"""Prompt rows attended in position-aligned blocks (``prompt_block_attention``): the causal
attention of plain SDPA, and the same bits for a row however its prompt was cut into steps."""

import torch
import torch.nn.functional as F

from specgauge.engine.models.attention import PROMPT_BLOCK, prompt_block_attention


def reference(q, k, v, first):
    """Plain causal SDPA of rows ``first ..`` over keys ``0 ..`` (GQA expanded)."""
    p, keys = q.shape[2], k.shape[2]
    visible = torch.arange(keys).view(1, -1) <= torch.arange(first, first + p).view(-1, 1)
    mask = torch.zeros(p, keys).masked_fill_(~visible, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def test_blocked_prompt_attention_is_causal_attention():
    torch.manual_seed(0)
    k, v = torch.randn(2, 2, 300, 16), torch.randn(2, 2, 300, 16)  # two sequences, 2 kv heads
    q = torch.randn(2, 4, 300, 16)
    whole = prompt_block_attention(q, k, v, 0)
    torch.testing.assert_close(whole, reference(q, k, v, 0))
    # a chunk after a cached context, its keys the context's and its own (plus masked padding)
    chunk = prompt_block_attention(q[:, :, 45:190], k[:, :, :200], v[:, :, :200], 45)
    torch.testing.assert_close(chunk, reference(q[:, :, 45:190], k[:, :, :190], v[:, :, :190], 45))


def test_a_prompt_rows_bits_do_not_depend_on_the_chunking():
    torch.manual_seed(1)
    k, v = torch.randn(1, 2, 700, 32), torch.randn(1, 2, 700, 32)
    q = torch.randn(1, 8, 700, 32)
    whole = prompt_block_attention(q, k, v, 0)
    for cuts in ([0, 1, 2, 33, 97, 512, 700], [0, 5, PROMPT_BLOCK * 3, 300, 301, 650, 700], list(range(0, 701, 100))):
        parts = []
        masks: dict = {}
        for a, b in zip(cuts, cuts[1:]):
            # the keys a step sees: its context and its own rows, rounded up as the cache's blocks are
            width = -(-b // 16) * 16
            parts.append(prompt_block_attention(q[:, :, a:b], k[:, :, :width], v[:, :, :width], a, masks))
        assert torch.equal(torch.cat(parts, dim=2), whole), cuts
