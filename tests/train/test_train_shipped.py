"""The shipped target loads and knows its special tokens; a changed file fails its checksum (every shipped
model's files: test_every_shipped_model.py)."""

from __future__ import annotations

import json

import pytest

from specgauge.train.assets import TARGET_DIR, verify_checksums

shipped = pytest.mark.skipif(not (TARGET_DIR / "SHA256SUMS").is_file(), reason="target weights not shipped yet")


@shipped
def test_shipped_model_loads_and_knows_its_special_tokens():
    import torch
    from tokenizers import Tokenizer

    from specgauge.engine.models.llama import load_model

    model = load_model(TARGET_DIR)
    tokenizer = Tokenizer.from_file(str(TARGET_DIR / "tokenizer.json"))
    config = json.loads((TARGET_DIR / "config.json").read_text())
    assert config["eos_token_id"] == [tokenizer.token_to_id("<|end|>"), tokenizer.token_to_id("<|end_of_text|>")]
    assert config["bos_token_id"] == tokenizer.token_to_id("<|begin_of_text|>")
    assert model.config.vocab_size == tokenizer.get_vocab_size()
    with torch.no_grad():
        logits, _ = model(torch.tensor([[config["bos_token_id"], tokenizer.token_to_id("<|user|>")]]))
    assert logits.shape == (1, 2, model.config.vocab_size) and torch.isfinite(logits).all()


def test_checksum_mismatch_is_reported(tmp_path):
    from specgauge.train.report import write_sha256sums

    (tmp_path / "a.txt").write_text("one")
    write_sha256sums(tmp_path, ("a.txt",))
    assert verify_checksums(tmp_path) == []
    (tmp_path / "a.txt").write_text("two")
    assert verify_checksums(tmp_path) == ["a.txt"]
