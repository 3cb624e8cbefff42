"""A Llama-architecture decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU) in Hugging Face layout.

Parameter names match ``transformers``' ``LlamaForCausalLM`` so a checkpoint directory
(``config.json`` + ``model.safetensors``) loads either way. ``forward`` is the full-sequence
causal pass used by training and by reference tests; ``forward_cached`` is the engine's path:
a flat ragged batch of new tokens (prefill chunks, decodes, later verify runs) against the paged
KV cache of :mod:`specgauge.engine.core.kv_cache`, with q/k/v and gate/up fused into one matmul each
(:meth:`LlamaForCausalLM.prepare_for_inference`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from specgauge.engine.models import paged_kernel
from specgauge.engine.models.attention import attention_is_batch_invariant, linear_is_batch_invariant, paged_attention
from specgauge.engine.models.cpu_features import attention_dtype
from specgauge.engine.models.linear import choose_packing, linear, pack

if TYPE_CHECKING:
    from specgauge.engine.core.kv_cache import ForwardBatch, KVCache


@dataclass(frozen=True)
class LlamaConfig:
    """The subset of a Hugging Face Llama ``config.json`` that the architecture needs."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    head_dim: int | None = None
    rope_scaling: dict | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, raw: dict) -> "LlamaConfig":
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        raw = dict(raw)
        # transformers >= 5 writes RoPE settings as one ``rope_parameters`` dict (theta included).
        rope = raw.pop("rope_parameters", None)
        if isinstance(rope, dict):
            raw.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
            if rope.get("rope_type", rope.get("type", "default")) != "default":
                raw.setdefault("rope_scaling", {k: v for k, v in rope.items() if k != "rope_theta"})
        values = {k: raw[k] for k in known if k in raw}
        values.setdefault("num_key_value_heads", raw.get("num_attention_heads"))
        return cls(**values, extra={k: v for k, v in raw.items() if k not in known})

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "extra" and v is not None}
        out.update(self.extra)
        out.setdefault("architectures", ["LlamaForCausalLM"])
        out.setdefault("model_type", "llama")
        out.setdefault("hidden_act", "silu")
        out.setdefault("torch_dtype", "float32")
        return out


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rope_inv_freq(config: LlamaConfig) -> torch.Tensor:
    """Inverse frequencies, with Llama-3 style ``rope_scaling`` applied when the config has it."""
    dim = config.head_size
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    scaling = config.rope_scaling or {}
    if scaling.get("rope_type", scaling.get("type")) == "llama3":
        factor = scaling["factor"]
        low, high = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
        old_len = scaling.get("original_max_position_embeddings", 8192)
        wavelen = 2 * math.pi / inv_freq
        low_wavelen, high_wavelen = old_len / low, old_len / high
        smooth = (old_len / wavelen - low) / (high - low)
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        mid = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        is_mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
        inv_freq = torch.where(is_mid, mid, scaled)
    return inv_freq.float()


def rope_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin for integer ``positions`` of any shape → (*positions.shape, head_dim)."""
    angles = positions.to(inv_freq.dtype).unsqueeze(-1) * inv_freq  # (..., D/2)
    emb = torch.cat([angles, angles], dim=-1)  # (..., D)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` (..., D) by cos/sin broadcastable to it (half-split convention of HF Llama)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin (..., D) with its first half negated, for :func:`apply_rope_signed`."""
    half = sin.shape[-1] // 2
    return torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)


def apply_rope_signed(x: torch.Tensor, cos: torch.Tensor, signed: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rope` with the same bits in 4 ops instead of 7 (the cached paths' form):
    ``cat(-x2, x1) * sin == roll(x, D/2) * signed_sin(sin)``, as negation is exact."""
    return x * cos + x.roll(x.shape[-1] // 2, -1) * signed


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_size
        h = config.hidden_size
        self.q_proj = nn.Linear(h, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)

    def project_qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """x (B, T, h) → q (B, Hq, T, D), k and v (B, Hkv, T, D), RoPE applied to q and k."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (B, 1, T, D)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Full causal self-attention over x (B, T, h)."""
        b, t, _ = x.shape
        q, k, v = self.project_qkv(x, cos, sin)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.num_kv_heads != self.num_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class LlamaMLP(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    """Llama decoder with an LM head; parameter names as in ``transformers``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.register_buffer("inv_freq", rope_inv_freq(config), persistent=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        aux_layers: tuple[int, ...] = (),
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Causal pass over input_ids (B, T) → logits (B, T, V) and the *inputs* of the layers
        listed in ``aux_layers`` (each (B, T, h); EAGLE-3 reads three of them)."""
        _, t = input_ids.shape
        positions = torch.arange(t, device=input_ids.device).unsqueeze(0)  # (1, T)
        cos, sin = rope_cos_sin(self.inv_freq, positions)  # (1, T, D)
        x = self.model.embed_tokens(input_ids)  # (B, T, h)
        aux: list[torch.Tensor] = []
        for index, layer in enumerate(self.model.layers):
            if index in aux_layers:
                aux.append(x)
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x)), aux

    # -- the engine's cached path -----------------------------------------------------------
    def prepare_for_inference(self, max_positions: int, packing: str = "none") -> None:
        """Fuse q/k/v and gate/up weights into one matrix each and precompute RoPE tables.

        The original ``*_proj.weight`` parameters become views into the fused tensors, so
        memory is not doubled and the parameter names (and ``state_dict``) stay those of HF.
        ``packing`` ("auto", "none", "fp16", "onednn"; :mod:`specgauge.engine.models.linear`) is how the cached
        path's matmuls hold their weights; the chosen one is ``self.weight_packing``.
        """
        cfg = self.config
        for layer in self.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            if not hasattr(attn, "qkv_weight"):
                fused = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach()
                nq, nk = attn.q_proj.weight.shape[0], attn.k_proj.weight.shape[0]
                attn.qkv_weight = fused  # ((Hq + 2 Hkv) D, h)
                attn.q_proj.weight.data = fused[:nq]
                attn.k_proj.weight.data = fused[nq:nq + nk]
                attn.v_proj.weight.data = fused[nq + nk:]
            if not hasattr(mlp, "gate_up_weight"):
                fused = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach()
                ni = mlp.gate_proj.weight.shape[0]
                mlp.gate_up_weight = fused  # (2 I, h)
                mlp.gate_proj.weight.data = fused[:ni]
                mlp.up_proj.weight.data = fused[ni:]
        positions = torch.arange(max_positions, device=self.inv_freq.device)
        cos, sin = rope_cos_sin(self.inv_freq, positions)  # (P, D) each, fp32
        dtype = self.model.embed_tokens.weight.dtype
        self._rope_cos, self._rope_signed_sin = cos.to(dtype), signed_sin(sin).to(dtype)
        device = self.model.embed_tokens.weight.device
        on_cpu = device.type == "cpu"
        self.attention_dtype = attention_dtype(device, dtype)  # of K/V too (bf16 on CPU only with AMX)
        layers = self.model.layers
        matrices = [(layer.self_attn.qkv_weight, layer.self_attn.o_proj.weight, layer.mlp.gate_up_weight,
                     layer.mlp.down_proj.weight) for layer in layers]
        self.weight_packing = choose_packing(packing, self.inv_freq.device, dtype,
                                             [m for four in matrices for m in four] + [self.lm_head.weight])
        self._lm_head_w = pack(self.lm_head.weight, self.weight_packing)
        self._head_split = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_size)
        # Plain tuples: the step reads no nn.Module attribute (each costs ~1 µs).
        self._layer_weights = [
            (layer.input_layernorm.weight, pack(qkv, self.weight_packing), pack(o, self.weight_packing),
             layer.post_attention_layernorm.weight, pack(gate_up, self.weight_packing), pack(down, self.weight_packing))
            for layer, (qkv, o, gate_up, down) in zip(layers, matrices)
        ]
        # Where matmuls give each row the same bits at any batch size (bf16 on CPUs with native
        # bf16, its weights reordered for oneDNN), attention is made row-wise too, and the whole
        # forward is batch-invariant. Probed for every matrix shape: whether a plain bf16 matmul is
        # depends on its inner dimension (engine/models/linear.py, PackedOneDNN) — and where SDPA
        # gives a one-row query the same bits at any place in a batch (fp32 K/V: only in MKL's
        # reproducible mode, which specgauge.engine sets).
        _, qkv_w, o_w, _, gate_up_w, down_w = self._layer_weights[0]
        self.batch_invariant = on_cpu and all(linear_is_batch_invariant(w)
                                              for w in (qkv_w, o_w, gate_up_w, down_w, self._lm_head_w)
                                              ) and attention_is_batch_invariant(self.attention_dtype)
        # how decode/verify attention reads the KV pool (builds the in-place kernel on first use)
        self.attention_path = paged_kernel.attention_path(self.attention_dtype, device)

    def _rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm as HF computes it (in fp32, then back to the input dtype)."""
        eps = self.config.rms_norm_eps
        if x.dtype == torch.float32:
            return F.rms_norm(x, weight.shape, weight, eps)
        return weight * F.rms_norm(x.float(), weight.shape, None, eps).to(x.dtype)

    def forward_cached(
        self,
        batch: "ForwardBatch",
        cache: "KVCache",
        aux_layers: tuple[int, ...] = (),
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Run the step's new tokens against the paged cache, writing their K/V into it.

        Returns logits (M, V) for ``batch.logit_indices`` and the inputs of ``aux_layers``,
        each (N, h) over all new tokens. Call :meth:`prepare_for_inference` first.
        """
        n_q, n_kv, d = self._head_split
        attn_dtype = self.attention_dtype
        cos = self._rope_cos[batch.positions].unsqueeze(1)  # (N, 1, D)
        sin = self._rope_signed_sin[batch.positions].unsqueeze(1)  # (N, 1, D), signed
        x = F.embedding(batch.input_ids, self.model.embed_tokens.weight)  # (N, h)
        n = x.shape[0]
        aux: list[torch.Tensor] = []
        for index, (in_norm, qkv_w, o_w, post_norm, gate_up_w, down_w) in enumerate(self._layer_weights):
            if index in aux_layers:
                aux.append(x)
            qkv = linear(self._rms(x, in_norm), qkv_w)  # (N, (Hq+2Hkv) D)
            qk = apply_rope_signed(qkv[:, : (n_q + n_kv) * d].view(n, n_q + n_kv, d), cos, sin)  # (N, Hq+Hkv, D)
            q, k = qk[:, :n_q], qk[:, n_q:]  # (N, Hq, D), (N, Hkv, D)
            v = qkv[:, (n_q + n_kv) * d:].view(n, n_kv, d)  # (N, Hkv, D)
            o = paged_attention(q, k, v, cache.k[index], cache.v[index], batch, cache.block_size, attn_dtype,
                                self.batch_invariant)
            x = x + linear(o.to(x.dtype), o_w)
            gate, up = linear(self._rms(x, post_norm), gate_up_w).chunk(2, -1)  # (N, I) each
            x = x + linear(F.silu(gate) * up, down_w)
        last = x.index_select(0, batch.logit_indices)  # (M, h)
        return linear(self._rms(last, self.model.norm.weight), self._lm_head_w), aux

    def num_parameters(self) -> int:
        return sum(p.numel() for p in {id(p): p for p in self.parameters()}.values())


def load_model(path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> LlamaForCausalLM:
    """Load ``config.json`` + ``model.safetensors`` (or sharded ``model-*.safetensors``) from a directory."""
    from safetensors.torch import load_file

    path = Path(path)
    config = LlamaConfig.from_dict(json.loads((path / "config.json").read_text()))
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    shards = sorted(path.glob("model*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"no model*.safetensors in {path}")
    state: dict[str, torch.Tensor] = {}
    for shard in shards:
        state.update(load_file(str(shard), device="cpu"))
    state = {k: v.to(dtype) for k, v in state.items() if not k.endswith("rotary_emb.inv_freq")}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    model.load_state_dict(state, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    missing = [n for n, p in model.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"checkpoint {path} lacks parameters: {missing[:5]}")
    model.inv_freq = rope_inv_freq(config)
    return model.to(device).eval()


def save_model(model: LlamaForCausalLM, path: str | Path, dtype: torch.dtype | None = None) -> None:
    """Write ``config.json`` and ``model.safetensors`` (tied lm_head omitted, as HF does)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    # clone(): after prepare_for_inference the q/k/v weights share one storage, which safetensors refuses.
    state = {k: v.detach().to("cpu").clone().contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    if dtype is not None:
        state = {k: v.to(dtype) for k, v in state.items()}
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    if dtype is not None:
        config["torch_dtype"] = str(dtype).removeprefix("torch.")
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
