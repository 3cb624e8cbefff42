"""Widen a trained Llama target's attention heads to a larger head_dim with the same function, as
the starting point of long-context continued training.

Real engines serve head sizes 64 and 128 (vLLM's CPU attention has no kernel for 40); a model
trained with head_dim ``d`` becomes one with head_dim ``D`` > ``d`` that computes the same logits,
in a plain Llama config (full rotary, no ``partial_rotary_factor``), so any Llama loader takes it:

* RoPE pairs dim ``j`` with ``j + D/2`` (the half-split convention). Each head's first rotary
  half (``d/2`` rows of q and k) moves to rows ``0..d/2``, its second half to ``D/2..D/2+d/2``;
  with ``rope_theta' = rope_theta ** (D / d)`` pair ``i < d/2`` turns at
  ``theta'^(-2i/D) = theta^(-2i/d)``, the frequency it was trained with. The new pairs
  ``d/2..D/2`` turn slower still (wavelengths up to ``2π·theta'^((D-2)/D)``): position
  channels for long distances that training can put to use.
* Scale: attention divides q·k by ``sqrt(D)`` instead of ``sqrt(d)``, so q_proj is multiplied by
  ``sqrt(D/d)``.
* The new rows: q's new rows are zero and k's are small random values, so q·k is unchanged and
  the gradient of q's new rows (proportional to k's) is not zero — the new dims can learn. Values
  likewise: v's new rows random, o_proj's matching columns zero.

At initialisation the widened model's logits equal the original's up to float32 rounding
(``tests/train/test_widen.py``).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM

NEW_ROW_STD = 0.02  # the init scale of every other matrix of a fresh target (train/target.py)


def widened_config(config: LlamaConfig, new_head_dim: int) -> LlamaConfig:
    """``config`` with ``head_dim`` ``new_head_dim`` and the RoPE base that keeps the old frequencies."""
    old = config.head_size
    if new_head_dim <= old or new_head_dim % 2 or old % 2:
        raise ValueError(f"head_dim {new_head_dim} must be even and larger than the model's {old}")
    if config.rope_scaling:
        raise ValueError("widening a model with rope_scaling is not supported")
    return dataclasses.replace(config, head_dim=new_head_dim, rope_theta=config.rope_theta ** (new_head_dim / old))


def _rotary_rows(heads: int, old: int, new: int) -> torch.Tensor:
    """Row index in the widened q/k projection of each old row (heads*old,)."""
    index = []
    for head in range(heads):
        base = head * new
        index += [base + j for j in range(old // 2)]  # first rotary half
        index += [base + new // 2 + j for j in range(old // 2)]  # second rotary half
    return torch.tensor(index)


def _value_rows(heads: int, old: int, new: int) -> torch.Tensor:
    return torch.tensor([head * new + j for head in range(heads) for j in range(old)])


def widen_head_dim(model: LlamaForCausalLM, new_head_dim: int, seed: int = 0) -> LlamaForCausalLM:
    """A new :class:`LlamaForCausalLM` with head_dim ``new_head_dim`` computing ``model``'s function."""
    config = model.config
    old = config.head_size
    wide = LlamaForCausalLM(widened_config(config, new_head_dim))
    generator = torch.Generator().manual_seed(seed)
    hq, hkv = config.num_attention_heads, config.num_key_value_heads
    q_rows, k_rows = _rotary_rows(hq, old, new_head_dim), _rotary_rows(hkv, old, new_head_dim)
    v_rows = _value_rows(hkv, old, new_head_dim)
    o_cols = _value_rows(hq, old, new_head_dim)
    source = model.state_dict()
    state = {}
    for name, target in wide.state_dict().items():
        weight = source[name].detach().float()
        if name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight")):
            new = torch.zeros(target.shape)
            if name.endswith("q_proj.weight"):
                new[q_rows] = weight * math.sqrt(new_head_dim / old)
            elif name.endswith("k_proj.weight"):
                new = torch.randn(target.shape, generator=generator) * NEW_ROW_STD
                new[k_rows] = weight
            elif name.endswith("v_proj.weight"):
                new = torch.randn(target.shape, generator=generator) * NEW_ROW_STD
                new[v_rows] = weight
            else:
                new[:, o_cols] = weight
            state[name] = new
        else:
            state[name] = weight
    wide.load_state_dict(state)
    return wide
