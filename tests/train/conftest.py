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
