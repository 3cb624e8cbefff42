"""The EAGLE-3 draft head: one decoder layer over fused target features, a reduced draft vocabulary.

Layout (parameter names as published EAGLE-3 drafters — SpecForge, SGLang's
``LlamaForCausalLMEagle3`` — write them, so :func:`load_eagle3` reads a real head for a real
Llama target)::

    aux = [input of target layer i for i in aux_layers]         3 × (…, H_target)
    feature = fc(cat(aux))                                      fc.weight (h, 3 H_target)
    x = cat(input_layernorm(embed(token)), hidden_norm(feature))  (…, 2h)
    feature' = feature + o_proj(attn(q_proj(x), k_proj(x), v_proj(x)))   q/k/v read 2h
    feature' = feature' + mlp(post_attention_layernorm(feature'))        SwiGLU
    draft_logits = lm_head(norm(feature'))                      (…, draft_vocab_size)
    target_id = draft_id + d2t[draft_id];  t2d[target_id] = target_id is in the draft vocab

``feature'`` (before ``norm``) is what the next draft step reads as its feature. Token
embeddings are the target's (shared, frozen); a checkpoint may carry its own copy.

The head runs three ways:

* over a whole sequence (training, reference): :meth:`Eagle3Head.step` — causal attention over
  the first step's keys, plus, for unrolled training-time-test steps, each row's own keys of the
  earlier steps (the "diagonal" of SpecForge's cached hidden states);
* in pieces with an attention of the caller's (packed training, ``train/ttt.py``):
  :meth:`Eagle3Head.fuse`, :meth:`Eagle3Head.embed`, :meth:`Eagle3DecoderLayer.attention_input`,
  :meth:`Eagle3DecoderLayer.project_qkv`, the attention, :meth:`Eagle3DecoderLayer.finish`,
  :meth:`Eagle3Head.draft_logits`;
* cached (the engine's drafting, :mod:`specgauge.engine.speculative.eagle3_drafter`), after
  :meth:`Eagle3Head.prepare_for_inference`: :meth:`Eagle3Head.forward_cached` over a flat ragged
  batch against the head's one-layer paged KV pool, and :meth:`Eagle3Head.forward_gathered` for
  one token per sequence against K/V gathered per sequence (a chain's steps). Same layer, with
  q/k/v and gate/up fused into one matmul each, the token half of the attention input looked up
  from a normed-embedding table, and fp32 RMSNorm in a cheaper form (:meth:`Eagle3Head._norm`).

Positions: the pair (feature of position t, token t+1) uses RoPE position t, and unrolled
step s of that row uses position t + s — the position of the token that the target's
feature came from, as SGLang's draft extend does.

``config.json`` follows SGLang/SpecForge: ``architectures: ["LlamaForCausalLMEagle3"]``,
``num_hidden_layers: 1``, ``draft_vocab_size``, and
``eagle_config.eagle_aux_hidden_state_layer_ids`` read as vLLM reads them: id j = the *input*
of target layer j (the hidden state after j layers; vLLM's ``_maybe_add_hidden_state(aux, idx + 1,
…)`` after layer idx in ``vllm/model_executor/models/llama.py``, ids taken as they are by
``_get_eagle3_aux_layers_from_config`` in ``vllm/v1/worker/gpu_model_runner.py``).
:attr:`Eagle3Config.aux_layers` holds the same input indices, which
:meth:`LlamaForCausalLM.forward` takes as ``aux_layers``. SGLang reads an id as one layer
earlier (``set_eagle3_layers_to_capture`` captures the input of layer ``id + 1``,
``python/sglang/srt/models/llama.py``): :func:`config_for_engine` writes a config for it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from specgauge.engine.models.attention import paged_attention
from specgauge.engine.models.cpu_features import attention_dtype
from specgauge.engine.models.linear import choose_packing, linear, pack
from specgauge.engine.models.llama import (LlamaConfig, LlamaForCausalLM, LlamaMLP, RMSNorm, apply_rope, apply_rope_signed,
                                           rope_cos_sin, rope_inv_freq, signed_sin)
from specgauge.shipped_models import DIRECTORY_DRAFT_DIR

if TYPE_CHECKING:
    from specgauge.engine.core.kv_cache import ForwardBatch, KVCache

ARCHITECTURE = "LlamaForCausalLMEagle3"
# Passes of up to this many rows run on the fp32 set when it is packed for FBGEMM: with the
# weights out of cache (the target's step runs between the head's), FBGEMM's fp16 products took
# 0.54x of oneDNN's bf16 ones on reordered weights for a whole one-row pass, 0.70x at 5 rows, 0.82x
# at 8, 0.88x at 12, and more from 16 rows on (specgauge-9m-4k's drafter, Intel Xeon with AMX, 1
# thread; PYTHONPATH=src python benchmarks/head_weight_sets.py --model specgauge-9m-4k).
FBGEMM_ROWS_MAX = 12


def default_aux_layers(num_layers: int) -> tuple[int, int, int]:
    """SGLang's default capture points — the inputs of layers 2, L//2 and L−3 — clamped to
    ``1..L−1`` for shallow targets and pushed apart where they collide (L=6 → 2, 3, 4), so the
    three features differ whenever the target has layers 1..3 to take them from (L=2 → 1, 1, 1)."""
    if num_layers < 1:
        raise ValueError("the target needs at least one layer")
    low, top = (1, num_layers - 1) if num_layers > 1 else (0, 0)
    raw = sorted(min(max(i, low), top) for i in (2, num_layers // 2, num_layers - 3))
    out: list[int] = []
    for index in raw:
        if out and index <= out[-1]:
            index = min(out[-1] + 1, top)
        out.append(index)
    return tuple(out)  # type: ignore[return-value]


@dataclass(frozen=True)
class Eagle3Config:
    """Shape of the head; ``aux_layers`` are *input* indices of target layers (see module doc)."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    draft_vocab_size: int
    aux_layers: tuple[int, ...]
    target_hidden_size: int | None = None
    head_dim: int | None = None
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    extra: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if len(self.aux_layers) != 3:
            raise ValueError(f"EAGLE-3 reads three target layers, got aux_layers={self.aux_layers}")
        if min(self.aux_layers) < 0:
            raise ValueError(f"aux_layers must be ≥ 0, got {self.aux_layers}")
        if not 0 < self.draft_vocab_size <= self.vocab_size:
            raise ValueError(f"draft_vocab_size {self.draft_vocab_size} must be in 1..vocab_size ({self.vocab_size})")
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("hidden_size must divide by num_attention_heads, and heads by num_key_value_heads")

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def feature_size(self) -> int:
        """Width of one target feature (the target's hidden size)."""
        return self.target_hidden_size or self.hidden_size

    @classmethod
    def for_target(cls, target: LlamaConfig, draft_vocab_size: int, aux_layers: Sequence[int] | None = None,
                   intermediate_size: int | None = None) -> "Eagle3Config":
        """A head matched to ``target`` (same width, heads, RoPE), as drafters are built."""
        layers = tuple(aux_layers) if aux_layers is not None else default_aux_layers(target.num_hidden_layers)
        if max(layers) >= target.num_hidden_layers:
            raise ValueError(f"aux_layers {layers} reach past the target's {target.num_hidden_layers} layers")
        return cls(
            hidden_size=target.hidden_size, intermediate_size=intermediate_size or target.intermediate_size,
            num_attention_heads=target.num_attention_heads, num_key_value_heads=target.num_key_value_heads,
            vocab_size=target.vocab_size, draft_vocab_size=draft_vocab_size, aux_layers=layers,
            head_dim=target.head_dim, rms_norm_eps=target.rms_norm_eps, rope_theta=target.rope_theta,
            rope_scaling=target.rope_scaling, max_position_embeddings=target.max_position_embeddings,
        )

    @classmethod
    def from_dict(cls, raw: dict, target_num_layers: int | None = None) -> "Eagle3Config":
        """Read a published-style ``config.json``. Without aux ids in it, SGLang's default for a
        target of ``target_num_layers`` layers applies (an error if that is not known either)."""
        raw = dict(raw)
        eagle = raw.pop("eagle_config", None) or {}
        input_ids = eagle.get("eagle_aux_hidden_state_layer_ids")
        if input_ids is not None:
            aux = tuple(int(i) for i in input_ids)   # vLLM's meaning (module doc)
        elif target_num_layers is not None:
            aux = default_aux_layers(target_num_layers)
        else:
            raise ValueError("config.json has no eagle_config.eagle_aux_hidden_state_layer_ids; pass the target")
        rope = raw.pop("rope_parameters", None)
        if isinstance(rope, dict):
            raw.setdefault("rope_theta", rope.get("rope_theta", 10000.0))
        known = {f for f in cls.__dataclass_fields__ if f not in ("extra", "aux_layers")}
        values = {k: raw[k] for k in known if k in raw}
        values.setdefault("num_key_value_heads", raw.get("num_attention_heads"))
        values.setdefault("draft_vocab_size", raw["vocab_size"])
        extra = {k: v for k, v in raw.items() if k not in known}
        if eagle:
            extra["eagle_config"] = {k: v for k, v in eagle.items() if k != "eagle_aux_hidden_state_layer_ids"}
        return cls(**values, aux_layers=aux, extra=extra)

    def to_dict(self) -> dict:
        """The ``config.json`` of a published EAGLE-3 head for this config."""
        out = {k: v for k, v in asdict(self).items() if k not in ("extra", "aux_layers") and v is not None}
        out.update({k: v for k, v in self.extra.items() if k != "eagle_config"})
        eagle = dict(self.extra.get("eagle_config", {}))
        eagle.update({"eagle_aux_hidden_state_layer_ids": list(self.aux_layers), "use_aux_hidden_state": True})
        out.update({"architectures": [ARCHITECTURE], "model_type": "llama", "num_hidden_layers": 1,
                    "hidden_act": "silu", "tie_word_embeddings": False, "eagle_config": eagle})
        out.setdefault("torch_dtype", "float32")
        return out

    def rope_config(self) -> LlamaConfig:
        """A one-layer LlamaConfig carrying this head's RoPE settings (for the RoPE helpers)."""
        return LlamaConfig(vocab_size=self.vocab_size, hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
                           num_hidden_layers=1, num_attention_heads=self.num_attention_heads,
                           num_key_value_heads=self.num_key_value_heads, head_dim=self.head_dim,
                           rope_theta=self.rope_theta, rope_scaling=self.rope_scaling,
                           max_position_embeddings=self.max_position_embeddings)


class KV(NamedTuple):
    """Keys and values of one draft step: each (B, Hkv, T, D)."""

    k: torch.Tensor
    v: torch.Tensor


class StepOutput(NamedTuple):
    """What one draft step over a sequence gives back."""

    features: torch.Tensor  # (B, T, h): the feature the next step reads (before ``norm``)
    logits: torch.Tensor | None  # (B, T, draft_vocab_size); None when not asked for
    kv: KV  # this step's keys/values, (B, Hkv, T, D) each


class Eagle3Attention(nn.Module):
    """Grouped-query attention whose q/k/v read the 2h-wide concat of token and feature."""

    def __init__(self, config: Eagle3Config) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = config.num_attention_heads, config.num_key_value_heads, config.head_size
        h = config.hidden_size
        self.q_proj = nn.Linear(2 * h, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(2 * h, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(2 * h, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)


class Eagle3DecoderLayer(nn.Module):
    """The head's one decoder layer (``midlayer``), split into the pieces a cached path needs."""

    def __init__(self, config: Eagle3Config) -> None:
        super().__init__()
        h = config.hidden_size
        self.input_layernorm = RMSNorm(h, config.rms_norm_eps)
        self.hidden_norm = RMSNorm(h, config.rms_norm_eps)
        self.self_attn = Eagle3Attention(config)
        self.post_attention_layernorm = RMSNorm(h, config.rms_norm_eps)
        self.mlp = LlamaMLP(LlamaConfig(vocab_size=1, hidden_size=h, intermediate_size=config.intermediate_size,
                                        num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1))

    def attention_input(self, token_embeds: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """cat(input_layernorm(embeds), hidden_norm(features)): (…, h) twice → (…, 2h)."""
        return torch.cat([self.input_layernorm(token_embeds), self.hidden_norm(features)], dim=-1)

    def project_qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (…, T, 2h) with cos/sin (…, T, D) → q (…, Hq, T, D), k and v (…, Hkv, T, D), RoPE on q and k.

        Works for a batch (B, T, 2h) and for a flat ragged batch seen as (1, N, 2h)."""
        return (self.project_q(x, cos, sin), *self.project_kv(x, cos, sin))

    def project_q(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """The queries of :meth:`project_qkv` alone (training asks them of the rows it scores only)."""
        attn = self.self_attn
        lead, t = x.shape[:-2], x.shape[-2]
        q = attn.q_proj(x).view(*lead, t, attn.num_heads, attn.head_dim).transpose(-2, -3)
        return apply_rope(q, cos.unsqueeze(-3), sin.unsqueeze(-3))

    def project_kv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values of :meth:`project_qkv` alone."""
        attn = self.self_attn
        lead, t = x.shape[:-2], x.shape[-2]
        k = attn.k_proj(x).view(*lead, t, attn.num_kv_heads, attn.head_dim).transpose(-2, -3)
        v = attn.v_proj(x).view(*lead, t, attn.num_kv_heads, attn.head_dim).transpose(-2, -3)
        return apply_rope(k, cos.unsqueeze(-3), sin.unsqueeze(-3)), v

    def finish(self, features: torch.Tensor, attn_out: torch.Tensor) -> torch.Tensor:
        """Residual on the input feature, then the MLP: features (…, h), attn_out (…, Hq·D) → (…, h)."""
        x = features + self.self_attn.o_proj(attn_out)
        return x + self.mlp(self.post_attention_layernorm(x))


def chain_attention(q: torch.Tensor, base: KV, chain: Sequence[KV], scale: float) -> torch.Tensor:
    """Each row t attends causally to ``base`` rows 0..t and to row t of every KV in ``chain``.

    q (B, Hq, T, D); base and chain entries (B, Hkv, T, D) → (B, Hq, T, D), softmax in fp32.
    """
    groups = q.shape[1] // base.k.shape[1]

    def expand(x: torch.Tensor) -> torch.Tensor:
        return x.repeat_interleave(groups, dim=1) if groups > 1 else x  # (B, Hq, T, D)

    qf = q.float()
    t = q.shape[2]
    scores = qf @ expand(base.k).float().transpose(-1, -2) * scale  # (B, Hq, T, T)
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    diag = [(qf * expand(kv.k).float()).sum(-1, keepdim=True) * scale for kv in chain]  # each (B, Hq, T, 1)
    weights = torch.softmax(torch.cat([scores, *diag], dim=-1), dim=-1)  # (B, Hq, T, T + len(chain))
    out = weights[..., :t] @ expand(base.v).float()  # (B, Hq, T, D)
    for index, kv in enumerate(chain):
        out = out + weights[..., t + index:t + index + 1] * expand(kv.v).float()
    return out.to(q.dtype)


class Eagle3Head(nn.Module):
    """EAGLE-3 draft head; see the module docstring for layout, positions and the two attention paths."""

    def __init__(self, config: Eagle3Config) -> None:
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, h)
        self.embed_tokens.weight.requires_grad_(False)
        self.fc = nn.Linear(3 * config.feature_size, h, bias=False)
        self.midlayer = Eagle3DecoderLayer(config)
        self.norm = RMSNorm(h, config.rms_norm_eps)
        self.lm_head = nn.Linear(h, config.draft_vocab_size, bias=False)
        d2t, t2d = identity_vocab_map(config.vocab_size, config.draft_vocab_size)
        self.register_buffer("d2t", d2t)  # (draft_vocab,) int64 offsets
        self.register_buffer("t2d", t2d)  # (vocab,) bool
        self.register_buffer("inv_freq", rope_inv_freq(config.rope_config()), persistent=False)

    # -- pieces -------------------------------------------------------------------------------
    def share_embeddings(self, target: LlamaForCausalLM) -> None:
        """Use the target's token embeddings (shared storage, frozen here)."""
        weight = target.model.embed_tokens.weight
        if tuple(weight.shape) != (self.config.vocab_size, self.config.hidden_size):
            raise ValueError(f"target embeddings {tuple(weight.shape)} do not fit the head "
                             f"({self.config.vocab_size}, {self.config.hidden_size})")
        self.embed_tokens.weight = weight

    def set_vocab_map(self, d2t: torch.Tensor, t2d: torch.Tensor) -> None:
        """Install a draft↔target vocabulary map (see :func:`build_vocab_map`)."""
        check_vocab_map(d2t, t2d, self.config.vocab_size, self.config.draft_vocab_size)
        self.d2t = d2t.to(self.lm_head.weight.device, torch.long)
        self.t2d = t2d.to(self.lm_head.weight.device, torch.bool)

    def fuse(self, aux: Sequence[torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """Three target features, each (…, H) — or already concatenated (…, 3H) — → fc → (…, h)."""
        x = aux if isinstance(aux, torch.Tensor) else torch.cat(list(aux), dim=-1)
        return self.fc(x.to(self.fc.weight.dtype))

    def embed(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings (…,) → (…, h), never trained here."""
        return F.embedding(token_ids, self.embed_tokens.weight).to(self.fc.weight.dtype)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin for integer positions of any shape → (*positions.shape, D), in the head's dtype."""
        cos, sin = rope_cos_sin(self.inv_freq, positions)
        return cos.to(self.fc.weight.dtype), sin.to(self.fc.weight.dtype)

    def draft_logits(self, features: torch.Tensor) -> torch.Tensor:
        """lm_head(norm(features)): (…, h) → (…, draft_vocab_size)."""
        return self.lm_head(self.norm(features))

    def draft_to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids → target ids (``draft_id + d2t[draft_id]``), any shape."""
        return draft_ids + self.d2t[draft_ids]

    def target_to_draft_logits(self, target_logits: torch.Tensor) -> torch.Tensor:
        """The target's logits (…, V) restricted to the draft vocabulary, in draft-id order → (…, draft_vocab)."""
        return target_logits.index_select(-1, self.draft_to_target(torch.arange(self.config.draft_vocab_size,
                                                                                device=target_logits.device)))

    # -- whole-sequence path (training, reference) --------------------------------------------
    def step(self, token_ids: torch.Tensor, features: torch.Tensor, positions: torch.Tensor,
             base: KV | None = None, chain: Sequence[KV] = (), logits: bool = True) -> StepOutput:
        """One draft step over a whole sequence.

        token_ids (B, T) target ids; features (B, T, h) (``fuse`` output on the first step, the
        previous step's ``features`` after); positions (B, T) or (T,). Without ``base`` the
        attention is causal over this step's own keys (the first step). With ``base`` (the first
        step's ``kv``) row t attends to base rows 0..t, to row t of each KV in ``chain`` (the
        steps in between) and to its own new key — training-time test as SpecForge unrolls it.
        ``logits=False`` leaves the logits out (training scores a subset of rows itself).
        """
        residual = features
        x = self.midlayer.attention_input(self.embed(token_ids), features)  # (B, T, 2h)
        cos, sin = self.rope(positions if positions.dim() == 2 else positions.unsqueeze(0))  # (B|1, T, D)
        q, k, v = self.midlayer.project_qkv(x, cos, sin)  # (B, Hq, T, D), (B, Hkv, T, D) ×2
        own = KV(k, v)
        attn = self.midlayer.self_attn
        if base is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=attn.num_kv_heads != attn.num_heads)
        else:
            out = chain_attention(q, base, [*chain, own], 1.0 / math.sqrt(attn.head_dim))
        b, _, t, _ = out.shape
        new_features = self.midlayer.finish(residual, out.transpose(1, 2).reshape(b, t, -1))  # (B, T, h)
        return StepOutput(new_features, self.draft_logits(new_features) if logits else None, own)

    def trainable_parameters(self) -> list[nn.Parameter]:
        """Every parameter but the (shared, frozen) token embeddings."""
        return [p for name, p in self.named_parameters() if name != "embed_tokens.weight"]

    # -- the engine's cached path ---------------------------------------------------------------
    def prepare_for_inference(self, max_positions: int, batch_dtype: torch.dtype, packing: str = "none") -> None:
        """Plain weight tensors for the cached path (q/k/v and gate/up fused: fewer, larger
        matmuls; no module attribute is read in a pass), RoPE tables for ``max_positions``
        positions and the normed token-embedding table.

        One-row passes (a chain step of a single request) run in the head's dtype (fp32 on CPU:
        its matrix-vector kernels are the fastest there); passes of several rows in
        ``batch_dtype`` (the target's) when that is bf16/fp16 (bf16 matmuls of 2+ rows are 2-4x
        faster than dense fp32 on CPU). Where the fp32 set is packed for FBGEMM, passes of up to
        ``FBGEMM_ROWS_MAX`` rows (a catch-up over a step's accepted tokens, the chain steps of a
        few requests) take it too (``self.fp32_rows_max``). Each set's matrices are packed as
        ``packing`` resolves for its dtype (:func:`~specgauge.engine.models.linear.choose_packing`);
        the fp32 set's is ``self.weight_packing``, the many-row set's ``self.many_rows_packing``.
        The parameters (and ``state_dict``) are left as they are.
        """
        mid = self.midlayer
        attn, mlp = mid.self_attn, mid.mlp
        with torch.no_grad():
            qkv_w = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach()
            gate_up_w = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach()
        matrices = (self.fc.weight, qkv_w, attn.o_proj.weight, gate_up_w, mlp.down_proj.weight, self.lm_head.weight)
        norms = tuple(n.weight for n in (mid.input_layernorm, mid.hidden_norm, mid.post_attention_layernorm,
                                         self.norm))
        self._split = (attn.num_heads, attn.num_kv_heads, attn.head_dim)
        self._eps = self.config.rms_norm_eps
        self._few_rows_dtype = self.fc.weight.dtype
        self._many_rows_dtype = batch_dtype if batch_dtype in (torch.bfloat16, torch.float16) else self._few_rows_dtype
        # attention (and the head's K/V pool) on CPU in the dtype the target attends in (bf16 with
        # AMX), whatever the head's own; fp32 elsewhere
        device = self.fc.weight.device
        self.attention_dtype = attention_dtype(device, batch_dtype) if device.type == "cpu" else torch.float32
        # fp32 norm weights are stored times sqrt(h) for ``_norm``'s cheaper form
        scale = {dtype: self.config.hidden_size ** 0.5 if dtype == torch.float32 else 1.0
                 for dtype in {self._few_rows_dtype, self._many_rows_dtype}}
        packings = {dtype: choose_packing(packing, self.fc.weight.device, dtype, matrices) for dtype in scale}
        self.weight_packing = packings.get(torch.float32, "none")
        self.many_rows_packing = packings[self._many_rows_dtype]
        self.fp32_rows_max = FBGEMM_ROWS_MAX if self.weight_packing == "fp16" else 1
        self._weight_sets = {
            dtype: (tuple(pack(w.to(dtype), packings[dtype]) for w in matrices),
                    tuple(w.to(dtype) * scale[dtype] for w in norms))
            for dtype in scale}
        self._norm_floor = (self.config.hidden_size * self._eps) ** 0.5
        # The token half of the attention input, norm(embed(token)), depends on the token alone:
        # one table row per token (the embeddings are frozen), looked up instead of normed each pass.
        with torch.no_grad():
            self._normed_embeds = {dtype: self._norm(self.embed_tokens.weight.to(dtype), set_norms[0])
                                   for dtype, (_, set_norms) in self._weight_sets.items()}
        # cos and sin of every position (P, 1, D) each, sin signed for ``apply_rope_signed``:
        # lookups, no bound check.
        cos, sin = self.rope(torch.arange(max_positions, device=self.fc.weight.device))
        self._rope_cos, self._rope_signed_sin = cos.unsqueeze(1), signed_sin(sin).unsqueeze(1)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm. fp32: ``weight`` (stored times sqrt(h)) · x / max(‖x‖, sqrt(h·eps)) — 3 ops
        instead of ``F.rms_norm``'s ~8 on CPU, and equal to it but for where eps matters
        (mean(x²) near eps); drafts need not be bit-exact. Otherwise HF's fp32-then-cast order."""
        if x.dtype == torch.float32:
            return x * (weight / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min_(self._norm_floor))
        return weight * F.rms_norm(x.float(), weight.shape, None, self._eps).to(x.dtype)

    def rope_cached(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin (…, 1, D) of ``positions`` (any shape) from the tables."""
        flat = positions.reshape(-1)
        shape = (*positions.shape, 1, self._rope_cos.shape[-1])
        return self._rope_cos.index_select(0, flat).view(shape), self._rope_signed_sin.index_select(0, flat).view(shape)

    def rope_span(self, first: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin (count, 1, D) of positions ``first`` … ``first + count − 1``: views of the tables."""
        return self._rope_cos[first:first + count], self._rope_signed_sin[first:first + count]

    def _weights(self, rows: int):
        """The weight set a pass of ``rows`` rows runs in, and its dtype."""
        dtype = self._few_rows_dtype if rows <= self.fp32_rows_max else self._many_rows_dtype
        return dtype, self._weight_sets[dtype]

    def _project(self, input_ids: torch.Tensor, features: torch.Tensor, fused: bool, cos: torch.Tensor,
                 sin: torch.Tensor, dtype: torch.dtype, weights) -> tuple[torch.Tensor, ...]:
        """The pass up to attention (``sin`` signed): feature (N, h), q (N, Hq, D), k and v (N, Hkv, D)."""
        (fc_w, qkv_w, *_), (_, hidden_norm, *_) = weights
        n_q, n_kv, d = self._split
        feat = features.to(dtype) if fused else linear(features.to(dtype), fc_w)  # (N, h)
        embeds = F.embedding(input_ids, self._normed_embeds[dtype])  # (N, h), normed
        x = torch.cat([embeds, self._norm(feat, hidden_norm)], dim=-1)  # (N, 2h)
        n = x.shape[0]
        qkv = linear(x, qkv_w)  # (N, (Hq + 2 Hkv) D)
        qk = apply_rope_signed(qkv[:, :(n_q + n_kv) * d].view(n, n_q + n_kv, d), cos, sin)
        v = qkv[:, (n_q + n_kv) * d:].reshape(n, n_kv, d)  # (N, Hkv, D)
        return feat, qk[:, :n_q], qk[:, n_q:], v

    def _finish(self, feat: torch.Tensor, out: torch.Tensor, rows: torch.Tensor | None,
                weights) -> tuple[torch.Tensor, torch.Tensor]:
        """The pass after attention (``out`` (N, Hq·D)): output features (N, h) and draft logits
        for ``rows`` (None: every row)."""
        (_, _, o_w, gate_up_w, down_w, lm_w), (_, _, post_norm, final_norm) = weights
        hidden = feat + linear(out.to(feat.dtype), o_w)  # (N, h)
        gate, up = linear(self._norm(hidden, post_norm), gate_up_w).chunk(2, -1)  # (N, I) each
        hidden = hidden + linear(F.silu(gate) * up, down_w)  # (N, h)
        last = hidden if rows is None else hidden.index_select(0, rows)  # (M, h)
        return hidden, linear(self._norm(last, final_norm), lm_w)  # (M, draft_vocab)

    def forward_cached(self, batch: "ForwardBatch", cache: "KVCache", features: torch.Tensor, fused: bool,
                       all_rows: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """One pass over ``batch`` against the head's one-layer paged ``cache``, writing the new K/V.

        ``features`` (N, 3H) target features (``fused=False``: fc applies) or (N, h) features
        the head produced itself. Returns its output features (N, h) and draft logits
        (M, draft_vocab) for ``batch.logit_indices`` (every row when ``all_rows``).
        Call :meth:`prepare_for_inference` first.
        """
        dtype, weights = self._weights(batch.input_ids.shape[0])
        cos, sin = self.rope_cached(batch.positions)  # (N, 1, D)
        feat, q, k, v = self._project(batch.input_ids, features, fused, cos, sin, dtype, weights)
        out = paged_attention(q, k, v, cache.k[0], cache.v[0], batch, cache.block_size,
                              self.attention_dtype)  # (N, Hq*D)
        return self._finish(feat, out, None if all_rows else batch.logit_indices, weights)

    def forward_gathered(self, tokens: torch.Tensor, features: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                         keys: torch.Tensor, values: torch.Tensor, slots: tuple[torch.Tensor, torch.Tensor],
                         mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One pass over one new token per sequence against K/V gathered per sequence.

        tokens (B,) with ``features`` (B, h) the head produced itself; cos and signed sin
        (B, 1, D); ``keys``/``values`` (B, Tk, Hkv, D) in the attention dtype, into which this pass first writes its
        own K/V at ``slots`` (row indices (B,), key indices (B,)); ``mask`` (B, 1, 1, Tk) additive.
        Returns output features (B, h) and draft logits (B, draft_vocab). No paged pool is written.
        """
        dtype, weights = self._weights(tokens.shape[0])
        n_q, n_kv, _ = self._split
        feat, q, k, v = self._project(tokens, features, True, cos, sin, dtype, weights)
        keys.index_put_(slots, k.to(keys.dtype))
        values.index_put_(slots, v.to(values.dtype))
        out = F.scaled_dot_product_attention(q.unsqueeze(2).to(keys.dtype), keys.transpose(1, 2),
                                             values.transpose(1, 2), attn_mask=mask,
                                             enable_gqa=n_q != n_kv)  # (B, Hq, 1, D)
        return self._finish(feat, out.reshape(tokens.shape[0], -1), None, weights)


# -- vocabulary map ---------------------------------------------------------------------------
def identity_vocab_map(vocab_size: int, draft_vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The map of a draft vocabulary made of the first ``draft_vocab_size`` target ids."""
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[:draft_vocab_size] = True
    return torch.zeros(draft_vocab_size, dtype=torch.long), t2d


def build_vocab_map(token_counts: torch.Tensor, draft_vocab_size: int,
                    always: Sequence[int] = ()) -> tuple[torch.Tensor, torch.Tensor]:
    """d2t (draft_vocab,) int64 offsets and t2d (V,) bool from target-token counts (V,).

    The draft vocabulary is the ``always`` ids (e.g. EOS) plus the most frequent others (ties
    to the lower id), sorted by target id, as SpecForge builds it: ``d2t[i] = target_id[i] − i``.
    """
    vocab_size = token_counts.numel()
    if not 0 < draft_vocab_size <= vocab_size:
        raise ValueError(f"draft_vocab_size {draft_vocab_size} must be in 1..{vocab_size}")
    score = token_counts.double().clone()
    forced = torch.tensor(sorted(set(int(i) for i in always)), dtype=torch.long)
    if forced.numel() > draft_vocab_size:
        raise ValueError("more forced tokens than the draft vocabulary holds")
    score[forced] = float("inf")
    # Stable descending sort: equal counts keep ascending id order.
    order = torch.sort(score, descending=True, stable=True).indices
    chosen = torch.sort(order[:draft_vocab_size]).values  # (draft_vocab,) ascending target ids
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[chosen] = True
    return chosen - torch.arange(draft_vocab_size), t2d


def check_vocab_map(d2t: torch.Tensor, t2d: torch.Tensor, vocab_size: int, draft_vocab_size: int) -> None:
    """Raise ValueError unless d2t/t2d have the right shapes and describe the same id set."""
    if tuple(d2t.shape) != (draft_vocab_size,) or tuple(t2d.shape) != (vocab_size,):
        raise ValueError(f"d2t {tuple(d2t.shape)} / t2d {tuple(t2d.shape)} do not fit draft vocab {draft_vocab_size} "
                         f"and vocab {vocab_size}")
    target_ids = d2t.long() + torch.arange(draft_vocab_size)
    if target_ids.min() < 0 or target_ids.max() >= vocab_size:
        raise ValueError("d2t maps draft ids outside the target vocabulary")
    if not torch.equal(torch.nonzero(t2d.bool()).flatten(), torch.sort(target_ids).values):
        raise ValueError("t2d and d2t describe different draft vocabularies")


# -- target features -----------------------------------------------------------------------------
def target_features(target: LlamaForCausalLM, input_ids: torch.Tensor,
                    aux_layers: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Full target pass over input_ids (B, T) → logits (B, T, V) and the concatenated inputs of
    ``aux_layers`` (B, T, 3H), in that order (a layer may repeat)."""
    distinct = tuple(sorted(set(aux_layers)))
    logits, aux = target(input_ids, aux_layers=distinct)
    by_layer = dict(zip(distinct, aux))
    return logits, torch.cat([by_layer[i] for i in aux_layers], dim=-1)


# -- files -----------------------------------------------------------------------------------------
WEIGHTS_FILE = "model.safetensors"
SHIPPED_DRAFT_DIR = DIRECTORY_DRAFT_DIR   # the specgauge-8m drafter (shipped_models.py)


def shipped_draft_dir() -> Path:
    """The directory of the shipped drafter (trained for the shipped target); FileNotFoundError if absent."""
    if not (SHIPPED_DRAFT_DIR / WEIGHTS_FILE).is_file():
        raise FileNotFoundError(f"the shipped EAGLE-3 drafter is missing from {SHIPPED_DRAFT_DIR}; see docs/eagle3.md")
    return SHIPPED_DRAFT_DIR


AUX_ID_OFFSET = {"vllm": 0, "specgauge": 0, "sglang": -1}   # engine's id = input index + offset (module doc)


def config_for_engine(config: dict, engine: str) -> dict:
    """A copy of a drafter ``config.json`` (ids in vLLM's and specgauge's meaning) whose
    ``eagle_aux_hidden_state_layer_ids`` mean the same target layers in ``engine``
    (``vllm``, ``specgauge``: as they are; ``sglang``: one less, as SGLang adds 1)."""
    if engine not in AUX_ID_OFFSET:
        raise ValueError(f"engine must be one of {sorted(AUX_ID_OFFSET)}, got {engine!r}")
    out = json.loads(json.dumps(config))
    eagle = out.get("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids")
    if ids is not None:
        eagle["eagle_aux_hidden_state_layer_ids"] = [int(i) + AUX_ID_OFFSET[engine] for i in ids]
    return out


def save_eagle3(head: Eagle3Head, path: str | Path, dtype: torch.dtype | None = torch.bfloat16,
                include_embeddings: bool = False) -> None:
    """Write ``config.json`` + ``model.safetensors`` in the published layout (``d2t`` int64,
    ``t2d`` bool, float weights in ``dtype``; ``embed_tokens.weight`` only if asked)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = {}
    for name, value in head.state_dict().items():
        if name == "embed_tokens.weight" and not include_embeddings:
            continue
        value = value.detach().to("cpu").clone().contiguous()
        if value.is_floating_point() and dtype is not None:
            value = value.to(dtype)
        state[name] = value
    save_file(state, str(path / WEIGHTS_FILE), metadata={"format": "pt"})
    config = head.config.to_dict()
    config["torch_dtype"] = str(dtype or head.fc.weight.dtype).removeprefix("torch.")
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def load_eagle3(path: str | Path, target: LlamaForCausalLM | None = None, device: str | torch.device = "cpu",
                dtype: torch.dtype = torch.float32) -> Eagle3Head:
    """Load a head from ``config.json`` + ``*.safetensors`` (or ``pytorch_model.bin``).

    With ``target``, the head shares the target's embeddings (a copy in the file is ignored
    after a shape check) and the config's vocabulary must match the target's. Without it the
    file must carry ``embed_tokens.weight``. A head without ``d2t``/``t2d`` uses the full vocabulary.
    """
    path = Path(path)
    raw = json.loads((path / "config.json").read_text())
    if ARCHITECTURE not in raw.get("architectures", [ARCHITECTURE]):
        raise ValueError(f"{path}/config.json is {raw.get('architectures')}, not an EAGLE-3 head ({ARCHITECTURE})")
    config = Eagle3Config.from_dict(raw, target.config.num_hidden_layers if target is not None else None)
    state = _read_state(path)
    # Some exports prefix the layer with "model." (SGLang's module path); accept both.
    state = {k.removeprefix("model."): v for k, v in state.items()}
    if target is not None:
        if target.config.vocab_size != config.vocab_size or target.config.hidden_size != config.feature_size:
            raise ValueError(f"head {path} (vocab {config.vocab_size}, features {config.feature_size}) does not fit the "
                             f"target (vocab {target.config.vocab_size}, hidden {target.config.hidden_size})")
        if max(config.aux_layers) >= target.config.num_hidden_layers:
            raise ValueError(f"head {path} reads layers {config.aux_layers}, the target has {target.config.num_hidden_layers}")
    with torch.device("meta"):
        head = Eagle3Head(config)
    embed = state.pop("embed_tokens.weight", None)
    d2t, t2d = state.pop("d2t", None), state.pop("t2d", None)
    floats = {k: v.to(dtype) for k, v in state.items()}
    missing, unexpected = head.load_state_dict(floats, strict=False, assign=True)
    missing = [m for m in missing if m not in ("embed_tokens.weight", "d2t", "t2d")]
    if missing or unexpected:
        raise ValueError(f"head {path}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if target is not None:
        if embed is not None and tuple(embed.shape) != (config.vocab_size, config.hidden_size):
            raise ValueError(f"head {path}: embed_tokens.weight {tuple(embed.shape)} does not fit the config")
        head.embed_tokens.weight = target.model.embed_tokens.weight
    elif embed is not None:
        head.embed_tokens.weight = nn.Parameter(embed.to(dtype), requires_grad=False)
    else:
        raise ValueError(f"head {path} has no embed_tokens.weight; load it with its target")
    if d2t is None:
        d2t, t2d = identity_vocab_map(config.vocab_size, config.draft_vocab_size)
    elif t2d is None:
        t2d = torch.zeros(config.vocab_size, dtype=torch.bool)
        t2d[d2t.long() + torch.arange(config.draft_vocab_size)] = True
    check_vocab_map(d2t, t2d, config.vocab_size, config.draft_vocab_size)
    head.d2t, head.t2d = d2t.long(), t2d.bool()
    head.inv_freq = rope_inv_freq(config.rope_config())
    return head.to(device).eval()


def _read_state(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    shards = sorted(path.glob("*.safetensors"))
    if shards:
        state: dict[str, torch.Tensor] = {}
        for shard in shards:
            state.update(load_file(str(shard), device="cpu"))
        return state
    if (path / "pytorch_model.bin").is_file():
        return torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"no *.safetensors or pytorch_model.bin in {path}")
