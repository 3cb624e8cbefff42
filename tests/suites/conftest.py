"""Fixtures: a tiny BPE tokenizer trained here, and a synthetic three-source training-data directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from synthetic import train_tiny_tokenizer, write_token_jsonl_dir  # noqa: E402

SOURCE_COUNTS = {"code_stdlib": 30, "agentic_tools": 20, "prose_docs": 10}
DUPLICATES_PER_SOURCE = 3


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


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m specgauge`` with a timeout."""
    return subprocess.run([sys.executable, "-m", "specgauge", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)
