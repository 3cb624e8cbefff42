"""Copies of the shipped target and drafter laid out so that vLLM's CPU build serves them.

vLLM's CPU attention has kernels for a few head sizes only (32, 64, 80, 96, 112, 128, 160,
192, 224, 256, 512: ``CPUAttentionBackend.get_supported_head_sizes`` in
``vllm/v1/attention/backends/cpu_attn.py`` of 0.32.0); the shipped target
and drafter have head_dim 40 (hidden 320, 8 heads). The copies are re-laid to head_dim 64, the
same function:

* each head of q_proj / k_proj / v_proj gets 24 zero rows after its 40 real ones, and o_proj
  24 zero columns per head, so the padded q·k products and the padded values add nothing;
* RoPE: ``partial_rotary_factor`` 40/64 makes vLLM rotate the first 40 dims of each head with
  the frequencies of a 40-dim head (``get_rope`` in
  ``vllm/model_executor/layers/rotary_embedding/__init__.py``: ``rotary_dim = int(head_size *
  partial_rotary_factor)``; neox style, pairs (i, i+20)), exactly what the 40-dim model does,
  and leaves the zero dims alone;
* scale: vLLM's Llama multiplies q·k by ``head_dim ** -0.5`` (``LlamaAttention.scaling`` in
  ``vllm/model_executor/models/llama.py``), 1/8 instead of 1/sqrt(40), so q_proj is multiplied
  by sqrt(64/40). That factor is not a power of two: the copy is stored in float32 and matches
  the original up to float32 rounding (about 1e-7 relative), not bit for bit.

The drafter's one decoder layer is re-laid the same way; its fc, norms, lm_head, d2t and t2d
are copied as they are.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

VLLM_HEAD_DIM = 64
# Head sizes vLLM 0.32.0's CPU attention has kernels for (vllm/v1/attention/backends/cpu_attn.py).
VLLM_CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def pad_heads(weight: torch.Tensor, heads: int, head_dim: int, new_head_dim: int) -> torch.Tensor:
    """(heads*head_dim, in) → (heads*new_head_dim, in): each head's rows followed by zero rows."""
    rows = weight.reshape(heads, head_dim, weight.shape[-1])
    padded = torch.zeros(heads, new_head_dim, weight.shape[-1], dtype=weight.dtype)
    padded[:, :head_dim] = rows
    return padded.reshape(heads * new_head_dim, weight.shape[-1])


def pad_head_columns(weight: torch.Tensor, heads: int, head_dim: int, new_head_dim: int) -> torch.Tensor:
    """o_proj (out, heads*head_dim) → (out, heads*new_head_dim) with zero columns per head."""
    return pad_heads(weight.t().contiguous(), heads, head_dim, new_head_dim).t().contiguous()


def relay_attention(state: dict[str, torch.Tensor], prefix: str, heads: int, kv_heads: int,
                    head_dim: int, new_head_dim: int) -> None:
    """Re-lay one attention block's q/k/v/o (names ``{prefix}q_proj.weight`` …) in place, in float32."""
    scale = math.sqrt(new_head_dim / head_dim)
    q = state[prefix + "q_proj.weight"].float() * scale
    state[prefix + "q_proj.weight"] = pad_heads(q, heads, head_dim, new_head_dim)
    for name in ("k_proj", "v_proj"):
        key = f"{prefix}{name}.weight"
        state[key] = pad_heads(state[key].float(), kv_heads, head_dim, new_head_dim)
    key = prefix + "o_proj.weight"
    state[key] = pad_head_columns(state[key].float(), heads, head_dim, new_head_dim)


def relaid_config(config: dict, new_head_dim: int) -> dict:
    """``config.json`` of the re-laid copy: head_dim, the partial-rotary factor that keeps the
    original rotary width, float32."""
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    out = dict(config)
    out["head_dim"] = new_head_dim
    out["partial_rotary_factor"] = head_dim / new_head_dim
    out["torch_dtype"] = "float32"
    return out


def _relay_checkpoint(src: Path, dst: Path, attention_prefixes: list[str], new_head_dim: int) -> None:
    config = json.loads((src / "config.json").read_text())
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    state = load_file(str(src / "model.safetensors"))
    for prefix in attention_prefixes:
        relay_attention(state, prefix, config["num_attention_heads"], config["num_key_value_heads"],
                        head_dim, new_head_dim)
    state = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
    dst.mkdir(parents=True, exist_ok=True)
    save_file(state, str(dst / "model.safetensors"), metadata={"format": "pt"})
    (dst / "config.json").write_text(json.dumps(relaid_config(config, new_head_dim), indent=2) + "\n")


def lay_out_target(src: Path, dst: Path, new_head_dim: int = VLLM_HEAD_DIM) -> Path:
    """Write the vLLM-servable copy of the target at ``src`` (a Llama checkpoint directory with
    its tokenizer) into ``dst``; returns ``dst``."""
    config = json.loads((src / "config.json").read_text())
    prefixes = [f"model.layers.{i}.self_attn." for i in range(config["num_hidden_layers"])]
    _relay_checkpoint(src, dst, prefixes, new_head_dim)
    for name in TOKENIZER_FILES:
        shutil.copyfile(src / name, dst / name)
    return dst


def lay_out_draft(src: Path, dst: Path, new_head_dim: int = VLLM_HEAD_DIM) -> Path:
    """Write the vLLM-servable copy of the EAGLE-3 drafter at ``src`` into ``dst``; returns ``dst``."""
    _relay_checkpoint(src, dst, ["midlayer.self_attn."], new_head_dim)
    return dst
