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
(``tests/train/test_widen.py``). The EAGLE-3 head trained against the original target is widened
the same way (:func:`warm_start_head`, its one attention block), so ``train draft --init-from``
starts the new target's drafter from the old one's function.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from specgauge.engine.models.eagle3 import Eagle3Head
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


def widen_attention(state: dict[str, torch.Tensor], prefix: str, heads: int, kv_heads: int, old: int, new: int,
                    generator: torch.Generator) -> None:
    """Widen one attention block's ``{prefix}q_proj/k_proj/v_proj/o_proj.weight`` in ``state``
    (float32, in place) from head_dim ``old`` to ``new`` as the module doc says."""
    q_rows, k_rows = _rotary_rows(heads, old, new), _rotary_rows(kv_heads, old, new)
    v_rows, o_cols = _value_rows(kv_heads, old, new), _value_rows(heads, old, new)
    q, k, v, o = (state[f"{prefix}{name}.weight"].detach().float() for name in ("q_proj", "k_proj", "v_proj", "o_proj"))
    inputs = q.shape[1]
    wide_q = torch.zeros(heads * new, inputs)
    wide_q[q_rows] = q * math.sqrt(new / old)
    wide_k = torch.randn(kv_heads * new, inputs, generator=generator) * NEW_ROW_STD
    wide_k[k_rows] = k
    wide_v = torch.randn(kv_heads * new, inputs, generator=generator) * NEW_ROW_STD
    wide_v[v_rows] = v
    wide_o = torch.zeros(o.shape[0], heads * new)
    wide_o[:, o_cols] = o
    for name, value in (("q_proj", wide_q), ("k_proj", wide_k), ("v_proj", wide_v), ("o_proj", wide_o)):
        state[f"{prefix}{name}.weight"] = value


def widen_head_dim(model: LlamaForCausalLM, new_head_dim: int, seed: int = 0) -> LlamaForCausalLM:
    """A new :class:`LlamaForCausalLM` with head_dim ``new_head_dim`` computing ``model``'s function."""
    config = model.config
    wide = LlamaForCausalLM(widened_config(config, new_head_dim))
    generator = torch.Generator().manual_seed(seed)
    state = {name: value.detach().float() for name, value in model.state_dict().items()}
    for layer in range(config.num_hidden_layers):
        widen_attention(state, f"model.layers.{layer}.self_attn.", config.num_attention_heads,
                        config.num_key_value_heads, config.head_size, new_head_dim, generator)
    wide.load_state_dict(state)
    return wide


def widen_mlp(state: dict[str, torch.Tensor], prefix: str, width: int, generator: torch.Generator) -> None:
    """Widen a SwiGLU MLP in ``state`` to ``width`` hidden units with the same function: the new
    gate and up rows are small random values (so the new units' activations, and down's gradient
    for them, are not zero) and down's new columns are zero (so the output is unchanged)."""
    gate, up, down = (state[prefix + name + ".weight"] for name in ("gate_proj", "up_proj", "down_proj"))
    extra = width - gate.shape[0]
    state[prefix + "gate_proj.weight"] = torch.cat([gate, torch.randn(extra, gate.shape[1], generator=generator) * NEW_ROW_STD])
    state[prefix + "up_proj.weight"] = torch.cat([up, torch.randn(extra, up.shape[1], generator=generator) * NEW_ROW_STD])
    state[prefix + "down_proj.weight"] = torch.cat([down, torch.zeros(down.shape[0], extra)], dim=1)


def warm_start_head(head: Eagle3Head, start: Eagle3Head, seed: int = 0,
                    vocab_map: tuple[torch.Tensor, torch.Tensor] | None = None,
                    fresh_rows: torch.Tensor | None = None) -> None:
    """Load a trained EAGLE-3 head ``start`` into ``head`` (built for a widened target): the same
    vocabulary map, fc, MLP, norms and lm_head; its one attention block widened to ``head``'s
    head_dim (the same function when ``head``'s RoPE base is ``start``'s raised to ``D/d``, as
    :func:`widened_config` makes the target's). The shapes must otherwise agree.

    With ``vocab_map`` (d2t, t2d of ``head``'s own draft vocabulary, of any size), the lm_head is
    laid out for it instead: a token in both vocabularies keeps ``start``'s row, any other takes
    its row of ``fresh_rows`` (target vocabulary × hidden: the target's output head, as a new
    head's lm_head starts). A ``head`` with a wider MLP gets ``start``'s widened with the same
    function (:func:`widen_mlp`)."""
    old, new = start.config.head_size, head.config.head_size
    if new < old:
        raise ValueError(f"the head to start from has head_dim {old}, more than the new head's {new}")
    skipped = ("embed_tokens.weight", "d2t", "t2d") + (("lm_head.weight",) if vocab_map is not None else ())
    state = {name: value.detach().float() for name, value in start.state_dict().items() if name not in skipped}
    if new > old:
        widen_attention(state, "midlayer.self_attn.", start.config.num_attention_heads,
                        start.config.num_key_value_heads, old, new, torch.Generator().manual_seed(seed))
    old_width, new_width = start.config.intermediate_size, head.config.intermediate_size
    if new_width < old_width:
        raise ValueError(f"the head to start from has an MLP of {old_width}, wider than the new head's {new_width}")
    if new_width > old_width:
        widen_mlp(state, "midlayer.mlp.", new_width, torch.Generator().manual_seed(seed + 1))
    expected = {name: tuple(value.shape) for name, value in head.state_dict().items()}
    for name, value in state.items():
        if expected.get(name) != tuple(value.shape):
            raise ValueError(f"the head to start from does not fit: {name} is {tuple(value.shape)}, "
                             f"the new head's is {expected.get(name)}")
    with torch.no_grad():
        head.load_state_dict(state, strict=False)
    if vocab_map is None:
        head.set_vocab_map(start.d2t.clone(), start.t2d.clone())
        return
    if fresh_rows is None:
        raise ValueError("a new vocabulary map needs fresh_rows for the tokens the start head lacks")
    head.set_vocab_map(*vocab_map)
    ids = head.draft_to_target(torch.arange(head.config.draft_vocab_size))
    start_ids = start.draft_to_target(torch.arange(start.config.draft_vocab_size))
    start_row = torch.full((head.config.vocab_size,), -1, dtype=torch.long)
    start_row[start_ids] = torch.arange(start.config.draft_vocab_size)
    rows = fresh_rows.detach().float()[ids].clone()
    kept = start_row[ids] >= 0
    rows[kept] = start.lm_head.weight.detach().float()[start_row[ids][kept]]
    with torch.no_grad():
        head.lm_head.weight.copy_(rows)
