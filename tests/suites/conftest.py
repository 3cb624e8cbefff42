"""Fixtures: a tiny BPE tokenizer trained here, and a synthetic three-source training-data directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from suite_fixtures import (DUPLICATES_PER_SOURCE, SOURCE_COUNTS, train_tiny_tokenizer,  # noqa: E402
                            write_token_jsonl_dir)


@pytest.fixture(scope="session")
def tokenizer_path(tmp_path_factory) -> Path:
    return train_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


@pytest.fixture(scope="session")
def tokenizer(tokenizer_path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_path))


@pytest.fixture(scope="session")
def training_dir(tmp_path_factory, tokenizer_path) -> Path:
    """code_stdlib 30, agentic_tools 20, prose_docs 10 distinct samples, plus 3 duplicates of sample 0 in each."""
    return write_token_jsonl_dir(tmp_path_factory.mktemp("data"), tokenizer_path, SOURCE_COUNTS,
                                 duplicates=DUPLICATES_PER_SOURCE)

