"""A Llama GGUF file → a Hugging Face directory the engine (and transformers, vLLM) loads.

Weights: every tensor dequantized with the ``gguf`` package (``gguf.quants.dequantize``, the
reference dequantizers of llama.cpp's Python side) to float32. Q4_1 and Q8_0 values are
``scale * q (+ min)`` with float16 scales, so float32 holds them exactly: the directory computes
exactly what the quantized file computes. llama.cpp's converter permutes the rows of
``attn_q``/``attn_k`` for its interleaved RoPE (``LlamaModel.permute`` in llama.cpp's
``convert_hf_to_gguf.py``: ``w.reshape(n_head, 2, rows // n_head // 2, ...).swapaxes(1, 2)``);
``unpermute`` is its inverse (HF's half-split RoPE). GGUF shapes are written fastest dimension
first (``ne``), so a GGUF ``[576, 1536]`` tensor is a (1536, 576) PyTorch weight.

Tokenizer: a byte-level BPE (``tokenizer.ggml.model == "gpt2"``) rebuilt with ``tokenizers``
from the file's vocabulary and merges. The ``smollm`` pre-tokenizer (llama.cpp
``LLAMA_VOCAB_PRE_TYPE_SMOLLM``, the same regex as GPT-2's) splits every digit on its own first,
as the upstream ``tokenizer.json`` does (``Digits(individual_digits=True)`` then ``ByteLevel``);
transformers' GGUF tokenizer conversion drops that split, so it is restored here. Tokens of
type CONTROL (3) or USER_DEFINED (4) are added as special tokens, matched before BPE.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# gguf token types (gguf/constants.py, ``TokenType``).
CONTROL, USER_DEFINED = 3, 4
# llama.cpp's tensor names → HF Llama's, per block (gguf/tensor_mapping.py, MODEL_TENSOR.*).
BLOCK_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


class ConversionError(RuntimeError):
    """The GGUF file is not a Llama this converter understands (one line)."""


def unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: (heads*D, in) interleaved-pair rows → half-split rows."""
    rows = weight.shape[0]
    return weight.reshape(heads, rows // heads // 2, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def field(reader, key: str, default=None):
    """A metadata value of ``reader`` (a ``gguf.GGUFReader``), or ``default`` when absent."""
    entry = reader.fields.get(key)
    return default if entry is None else entry.contents()


def hf_config(reader) -> dict:
    """A transformers ``LlamaConfig`` dict from the file's ``llama.*`` metadata."""
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise ConversionError(f"general.architecture is {arch!r}, not 'llama'")
    heads = int(field(reader, "llama.attention.head_count"))
    hidden = int(field(reader, "llama.embedding_length"))
    names = {t.name for t in reader.tensors}
    eos = int(field(reader, "tokenizer.ggml.eos_token_id"))
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "vocab_size": int(field(reader, "llama.vocab_size", len(field(reader, "tokenizer.ggml.tokens")))),
        "hidden_size": hidden, "intermediate_size": int(field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(field(reader, "llama.block_count")),
        "num_attention_heads": heads, "num_key_value_heads": int(field(reader, "llama.attention.head_count_kv", heads)),
        "head_dim": int(field(reader, "llama.rope.dimension_count", hidden // heads)),
        "max_position_embeddings": int(field(reader, "llama.context_length")),
        # float32 metadata: 9.999999747378752e-06 is 1e-5 stored in float32; HF's config says 1e-5.
        "rms_norm_eps": float(str(np.float32(field(reader, "llama.attention.layer_norm_rms_epsilon")))),
        "rope_theta": float(field(reader, "llama.rope.freq_base", 10000.0)),
        "tie_word_embeddings": "output.weight" not in names,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")), "eos_token_id": eos,
        "pad_token_id": int(field(reader, "tokenizer.ggml.padding_token_id", eos)),
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
    }


def hf_tensors(reader, config: dict) -> dict[str, np.ndarray]:
    """Every tensor, dequantized to float32 and renamed to HF Llama's names."""
    from gguf.quants import dequantize

    out: dict[str, np.ndarray] = {}
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32, copy=False)
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))  # ne is fastest-first
        values = values.reshape(shape)
        name = tensor.name
        if name == "token_embd.weight":
            out["model.embed_tokens.weight"] = values
        elif name == "output_norm.weight":
            out["model.norm.weight"] = values
        elif name == "output.weight":
            out["lm_head.weight"] = values
        elif name.startswith("blk."):
            _, layer, kind, _ = name.split(".")
            if kind not in BLOCK_NAMES:
                raise ConversionError(f"tensor {name} has no Llama counterpart")
            if kind == "attn_q":
                values = unpermute(values, config["num_attention_heads"])
            elif kind == "attn_k":
                values = unpermute(values, config["num_key_value_heads"])
            out[f"model.layers.{layer}.{BLOCK_NAMES[kind]}.weight"] = values
        elif name != "rope_freqs.weight":
            raise ConversionError(f"tensor {name} has no Llama counterpart")
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


def build_tokenizer(reader):
    """The file's byte-level BPE as a ``tokenizers.Tokenizer`` (digits split one by one)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    if field(reader, "tokenizer.ggml.model") != "gpt2":
        raise ConversionError(f"tokenizer.ggml.model is {field(reader, 'tokenizer.ggml.model')!r}, not 'gpt2'")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    vocab = {token: i for i, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    pre = field(reader, "tokenizer.ggml.pre", "default")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre in ("gpt2", "default"):
        tokenizer.pre_tokenizer = byte_level
    else:
        raise ConversionError(f"tokenizer.ggml.pre {pre!r} is not supported (smollm, gpt2)")
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    special = [AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types)
               if int(t) in (CONTROL, USER_DEFINED)]
    tokenizer.add_special_tokens(special)
    return tokenizer


def tokenizer_config(reader, config: dict) -> dict:
    """``tokenizer_config.json``: the chat template and the special tokens by name."""
    tokens = field(reader, "tokenizer.ggml.tokens")
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": field(reader, "tokenizer.chat_template"),
        "bos_token": tokens[config["bos_token_id"]], "eos_token": tokens[config["eos_token_id"]],
        "pad_token": tokens[config["pad_token_id"]],
        "unk_token": tokens[int(field(reader, "tokenizer.ggml.unknown_token_id", 0))],
        "add_bos_token": bool(field(reader, "tokenizer.ggml.add_bos_token", False)),
        "model_max_length": config["max_position_embeddings"],
        "clean_up_tokenization_spaces": False,
    }


def convert(gguf_path: Path, out_dir: Path) -> dict:
    """Write ``config.json``, ``model.safetensors`` (float32), ``tokenizer.json``,
    ``tokenizer_config.json`` and ``generation_config.json`` of ``gguf_path`` into ``out_dir``;
    returns the config."""
    import torch
    from gguf import GGUFReader
    from safetensors.torch import save_file

    reader = GGUFReader(str(gguf_path))
    config = hf_config(reader)
    tensors = {k: torch.from_numpy(v.copy()) for k, v in hf_tensors(reader, config).items()}
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    build_tokenizer(reader).save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(reader, config), indent=2) + "\n")
    generation = {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
                  "pad_token_id": config["pad_token_id"]}
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    return config
