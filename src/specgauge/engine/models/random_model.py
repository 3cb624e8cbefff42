"""Random-weight model directories in HF layout, for tests and for benchmarks without a trained model.

The tokenizer is a byte-level BPE trained on the given text (so any UTF-8 text encodes, and
multi-byte characters span several tokens), with the special tokens and chat template of the
project's target model.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIAL_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|system|>", "<|user|>", "<|assistant|>",
                  "<|tool|>", "<|end|>", "<|pad|>"]

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>\n"
    "{{ message['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

SAMPLE_TEXT = (
    "def add(a, b):\n    return a + b\n\nclass Stack:\n    def push(self, item):\n"
    "        self.items.append(item)\n"
    "The quick brown fox jumps over the lazy dog. Speculative decoding drafts tokens and "
    "verifies them in one forward pass. Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u65e5\u672c\u8a9e "
    "\u00fcber stra\u00dfe \u2014 \u20ac5. {\"tool\": \"search\", \"result\": [1, 2, 3]}\n"
) * 20


def write_tokenizer(path: Path, vocab_size: int = 320, text: str = SAMPLE_TEXT) -> int:
    """Train and save ``tokenizer.json`` + ``tokenizer_config.json``; returns the vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator([text], trainer=trainer)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path / "tokenizer.json"))
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end|>", "pad_token": "<|pad|>",
              "chat_template": CHAT_TEMPLATE, "model_max_length": 4096,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return tokenizer.get_vocab_size()


def write_random_model(path: str | Path, *, hidden_size: int = 64, num_layers: int = 3, num_heads: int = 4,
                       num_kv_heads: int = 2, intermediate_size: int = 128, vocab_size: int = 320,
                       max_position_embeddings: int = 512, tie_word_embeddings: bool = False,
                       seed: int = 0, std: float = 0.08, tokenizer_text: str = SAMPLE_TEXT,
                       dtype: str | None = None) -> Path:
    """Write a complete random-weight model directory (config, weights, tokenizer) and return it,
    its weights stored in ``dtype`` ("bfloat16", ...; default float32).

    The model's vocabulary is the tokenizer's, which is at most ``vocab_size`` (fewer when
    ``tokenizer_text`` is too small to learn that many merges).
    """
    import torch

    from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM, save_model

    path = Path(path)
    actual_vocab = write_tokenizer(path, vocab_size, tokenizer_text)
    added = {t: i for i, t in enumerate(SPECIAL_TOKENS)}  # the trainer puts special tokens first
    config = LlamaConfig(vocab_size=actual_vocab, hidden_size=hidden_size, intermediate_size=intermediate_size,
                         num_hidden_layers=num_layers, num_attention_heads=num_heads,
                         num_key_value_heads=num_kv_heads, max_position_embeddings=max_position_embeddings,
                         tie_word_embeddings=tie_word_embeddings, bos_token_id=added["<|begin_of_text|>"],
                         eos_token_id=[added["<|end|>"], added["<|end_of_text|>"]])
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, std)
    save_model(model, path, getattr(torch, dtype) if dtype else None)
    return path


def stdlib_text(max_bytes: int = 2_000_000) -> str:
    """Source text of the standard library (present on every machine with Python)."""
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    pieces, size = [], 0
    for file in sorted(root.glob("*.py")):
        text = file.read_text(encoding="utf-8", errors="ignore")
        pieces.append(text)
        size += len(text)
        if size >= max_bytes:
            break
    return "\n".join(pieces)
