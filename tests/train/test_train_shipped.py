"""The shipped target's files match SHA256SUMS and load (skipped only while nothing is shipped)."""

from __future__ import annotations

import json

import pytest

from specgauge.train.assets import TARGET_DIR, verify_checksums

shipped = pytest.mark.skipif(not (TARGET_DIR / "SHA256SUMS").is_file(), reason="target weights not shipped yet")


@shipped
def test_shipped_files_match_their_checksums():
    from specgauge.train.report import read_sha256sums

    names = set(read_sha256sums(TARGET_DIR))
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "TRAINING.md"} <= names
    assert verify_checksums(TARGET_DIR) == []
    assert sum((TARGET_DIR / n).stat().st_size for n in names) <= 25 * 1024 * 1024


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


@shipped
def test_transformers_loads_the_shipped_directory_with_the_same_logits():
    transformers = pytest.importorskip("transformers")
    import torch

    from specgauge.engine.models.llama import load_model

    ours = load_model(TARGET_DIR)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(TARGET_DIR), torch_dtype=torch.float32).eval()
    ids = torch.tensor([[0, 3, 200, 201, 202, 6, 4]])  # (1, T)
    with torch.no_grad():
        expected = theirs(ids).logits
        logits, _ = ours(ids)
    torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
