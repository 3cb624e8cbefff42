"""The vLLM copy of the shipped target (head_dim 64, partial rotary 40/64, q scaled by sqrt(64/40))
computes the same function as the shipped target; the drafter copy keeps all other tensors."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from specgauge.engine.models.llama import load_model
from specgauge.vllm_setup.layout import VLLM_CPU_HEAD_SIZES, VLLM_HEAD_DIM, lay_out_draft, lay_out_target

ASSETS = Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets"


def reference_logits(path: Path, input_ids: torch.Tensor) -> torch.Tensor:
    """A plain Llama forward as vLLM computes it: head_dim and the rotary width from the config
    (``partial_rotary_factor``), neox-style RoPE over the first rotary dims, scale head_dim**-0.5."""
    config = json.loads((path / "config.json").read_text())
    w = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rotary = int(head_dim * config.get("partial_rotary_factor", 1.0))
    eps, T = config["rms_norm_eps"], input_ids.shape[0]
    inv_freq = 1.0 / (config["rope_theta"] ** (torch.arange(0, rotary, 2, dtype=torch.float64) / rotary))
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq
    cos, sin = torch.cat([angles, angles], -1).cos().float(), torch.cat([angles, angles], -1).sin().float()

    def rope(x):  # (T, H, D): rotate the first `rotary` dims, pairs (i, i + rotary/2)
        r, rest = x[..., :rotary], x[..., rotary:]
        half = rotary // 2
        rotated = torch.cat([-r[..., half:], r[..., :half]], -1)
        return torch.cat([r * cos[:, None] + rotated * sin[:, None], rest], -1)

    def norm(x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    x = w["model.embed_tokens.weight"][input_ids]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = norm(x, w[p + "input_layernorm.weight"])
        q = rope((h @ w[p + "self_attn.q_proj.weight"].T).view(T, heads, head_dim))
        k = rope((h @ w[p + "self_attn.k_proj.weight"].T).view(T, kv_heads, head_dim))
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(T, kv_heads, head_dim)
        k, v = (t.repeat_interleave(heads // kv_heads, dim=1) for t in (k, v))
        scores = torch.einsum("thd,shd->hts", q, k) * head_dim ** -0.5
        attn = torch.einsum("hts,shd->thd", scores.masked_fill(~causal, -math.inf).softmax(-1), v)
        x = x + attn.reshape(T, heads * head_dim) @ w[p + "self_attn.o_proj.weight"].T
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    return norm(x, w["model.norm.weight"]) @ w["model.embed_tokens.weight"].T


@pytest.fixture(scope="module")
def relaid(tmp_path_factory) -> Path:
    return lay_out_target(ASSETS / "target", tmp_path_factory.mktemp("vllm-models") / "target")


def test_reference_forward_is_the_engine_forward():
    """The reference above agrees with specgauge's own model on the shipped target (so it can judge the copy)."""
    ids = torch.randint(8, 4096, (40,), generator=torch.Generator().manual_seed(0))
    model = load_model(ASSETS / "target")
    with torch.no_grad():
        engine_logits = model(ids[None])[0][0]
    torch.testing.assert_close(reference_logits(ASSETS / "target", ids), engine_logits, atol=2e-4, rtol=1e-4)


def test_relaid_target_is_the_same_function(relaid):
    config = json.loads((relaid / "config.json").read_text())
    assert config["head_dim"] == VLLM_HEAD_DIM in VLLM_CPU_HEAD_SIZES
    assert int(config["head_dim"] * config["partial_rotary_factor"]) == 40
    ids = torch.randint(8, 4096, (64,), generator=torch.Generator().manual_seed(1))
    original, copy = reference_logits(ASSETS / "target", ids), reference_logits(relaid, ids)
    torch.testing.assert_close(copy, original, atol=1e-4, rtol=1e-5)
    assert torch.equal(copy.argmax(-1), original.argmax(-1))
    assert (relaid / "tokenizer.json").read_bytes() == (ASSETS / "target" / "tokenizer.json").read_bytes()


def test_relaid_draft_keeps_everything_but_attention(tmp_path):
    copy_dir = lay_out_draft(ASSETS / "draft", tmp_path / "draft")
    original = load_file(str(ASSETS / "draft" / "model.safetensors"))
    copy = load_file(str(copy_dir / "model.safetensors"))
    assert original.keys() == copy.keys()
    for name, tensor in original.items():
        if ".self_attn." in name:
            continue
        assert torch.equal(copy[name], tensor.float() if tensor.is_floating_point() else tensor), name
    q = copy["midlayer.self_attn.q_proj.weight"].view(8, VLLM_HEAD_DIM, 640)
    assert q.shape[1] == VLLM_HEAD_DIM and not q[:, 40:].any()
    torch.testing.assert_close(q[:, :40].reshape(320, 640),
                               original["midlayer.self_attn.q_proj.weight"].float() * math.sqrt(64 / 40))
    o = copy["midlayer.self_attn.o_proj.weight"].view(320, 8, VLLM_HEAD_DIM)
    assert not o[..., 40:].any()
    config = json.loads((copy_dir / "config.json").read_text())
    assert config["eagle_config"] == json.loads((ASSETS / "draft" / "config.json").read_text())["eagle_config"]
