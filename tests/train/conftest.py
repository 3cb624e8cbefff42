"""A tiny corpus, tokenizer and model built once per test session (a few seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specgauge.train.corpus import CorpusConfig, build_samples, write_text, write_tokenized
from specgauge.train.stdlib_material import iter_stdlib_files

TINY_VOCAB = 600


@pytest.fixture(scope="session")
def stdlib_files():
    files = iter_stdlib_files()
    # A fixed, small but varied subset: every 25th file by path.
    return files[::25]


@pytest.fixture(scope="session")
def tiny_config() -> CorpusConfig:
    return CorpusConfig(seed=3, validation_fraction=0.2, agentic_samples=60, max_code_files=40, chunk_chars=1200,
                        long_chunk_chars=5000, session_samples=24)


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory, stdlib_files, tiny_config) -> dict:
    """``{"dir", "tokenizer_dir", "samples"}`` for a small corpus, text and tokenized."""
    from specgauge.train.tokenizer import corpus_texts, save_tokenizer, train_tokenizer

    root = tmp_path_factory.mktemp("corpus")
    samples = build_samples(tiny_config, files=stdlib_files)
    write_text(samples, root)
    tokenizer_dir = root / "tokenizer"
    save_tokenizer(train_tokenizer(corpus_texts(root), TINY_VOCAB), tokenizer_dir)
    write_tokenized(root, tokenizer_dir, tiny_config)
    return {"dir": root, "tokenizer_dir": tokenizer_dir, "samples": samples}


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_corpus):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(tiny_corpus["tokenizer_dir"]) / "tokenizer.json"))


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_corpus, tmp_path_factory):
    """A one-layer target trained 15 steps on the tiny corpus, exported to ``<dir>/model``."""
    from specgauge.train.target import ModelShape, TrainConfig, Trainer, export_target

    root = tmp_path_factory.mktemp("tiny-model")
    shape = ModelShape(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=64, max_position_embeddings=48)
    config = TrainConfig(seq_len=48, batch_size=4, lr=1e-2, warmup_steps=2, max_steps=15, bf16=False, eval_every=1000,
                         eval_windows=2, threads=1)
    Trainer(tiny_corpus["dir"], root / "run", shape, config, vocab_size=TINY_VOCAB).run()
    export_target(root / "run", tiny_corpus["tokenizer_dir"], root / "model")
    return root
