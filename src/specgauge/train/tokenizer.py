"""Byte-level BPE tokenizer trained on the corpus text, saved in Hugging Face layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

from specgauge.train.chat import BOS, CHAT_TEMPLATE, END, END_OF_TEXT, PAD, SPECIAL_TOKENS


def train_tokenizer(texts: Iterable[str], vocab_size: int):
    """Train a byte-level BPE (``tokenizers``) on ``texts``; special tokens get ids 0..7."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not 512 <= vocab_size <= 65536:
        raise ValueError(f"vocab_size must be in [512, 65536], got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def tokenizer_config() -> dict:
    """``tokenizer_config.json``: the special tokens and the chat template."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": END,
        "pad_token": PAD,
        "unk_token": None,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in (BOS, END, PAD)],
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 1024,
        "chat_template": CHAT_TEMPLATE,
    }


def save_tokenizer(tokenizer, out_dir: Path, model_max_length: int | None = None) -> None:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    config = tokenizer_config()
    if model_max_length:
        config["model_max_length"] = model_max_length
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def special_token_ids(tokenizer) -> dict[str, int]:
    """Ids the model config needs: ``bos_token_id``, ``eos_token_id`` (``<|end|>``, ``<|end_of_text|>``), pad."""
    return {
        "bos_token_id": tokenizer.token_to_id(BOS),
        "eos_token_id": [tokenizer.token_to_id(END), tokenizer.token_to_id(END_OF_TEXT)],
        "pad_token_id": tokenizer.token_to_id(PAD),
    }


def corpus_texts(corpus_dir: Path) -> Iterator[str]:
    """The rendered training-split conversations of every source (what the BPE is trained on)."""
    from specgauge.train.chat import render
    from specgauge.train.corpus import TARGET_SOURCES, read_text

    for source in TARGET_SOURCES:
        for record in read_text(corpus_dir, source, "train"):
            yield render(record["messages"])
