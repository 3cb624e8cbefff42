"""Greedy decoding with a KV cache for the training code (the engine is not needed to evaluate or
fine-tune a model): a batch of equally long prompts, continued token by token."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specgauge.engine.models.llama import LlamaForCausalLM, rope_cos_sin


class BatchKVCache:
    """Keys and values per layer for a batch of equally long sequences, appended as decoding goes."""

    def __init__(self, layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * layers  # each (B, Hkv, T, D)
        self.values: list[torch.Tensor | None] = [None] * layers

    def extend(self, index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys[index] is not None:
            k = torch.cat([self.keys[index], k], dim=2)
            v = torch.cat([self.values[index], v], dim=2)
        self.keys[index], self.values[index] = k, v
        return k, v


def cached_forward(model: LlamaForCausalLM, ids: torch.Tensor, start: int, cache: BatchKVCache) -> torch.Tensor:
    """Logits (B, V) of the last of ``ids`` (B, t) at positions ``start..start+t-1``, extending ``cache``."""
    batch, t = ids.shape
    positions = torch.arange(start, start + t).unsqueeze(0)  # (1, t)
    cos, sin = rope_cos_sin(model.inv_freq, positions)  # (1, t, D)
    x = model.model.embed_tokens(ids)  # (B, t, h)
    for index, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        q, k, v = attn.project_qkv(layer.input_layernorm(x), cos, sin)  # q (B, Hq, t, D), k/v (B, Hkv, t, D)
        k, v = cache.extend(index, k, v)  # (B, Hkv, start + t, D)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=start == 0 and t > 1,
                                             enable_gqa=attn.num_kv_heads != attn.num_heads)  # (B, Hq, t, D)
        x = x + attn.o_proj(out.transpose(1, 2).reshape(batch, t, -1))
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return model.lm_head(model.model.norm(x[:, -1]))  # (B, V)


@torch.no_grad()
def greedy_batch(model: LlamaForCausalLM, prefixes: torch.Tensor, steps: int) -> torch.Tensor:
    """``steps`` greedy tokens (B, steps) after each of ``prefixes`` (B, P), with a KV cache."""
    cache = BatchKVCache(len(model.model.layers))
    logits = cached_forward(model, prefixes, 0, cache)
    out = []
    for step in range(steps):
        token = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
        out.append(token)
        if step + 1 < steps:
            logits = cached_forward(model, token, prefixes.shape[1] + step, cache)
    return torch.cat(out, dim=1)
