"""The shipped drafter's files match SHA256SUMS, stay small, and load onto the shipped target."""

from __future__ import annotations

import pytest

from specgauge.engine.eagle3 import SHIPPED_DRAFT_DIR

shipped = pytest.mark.skipif(not (SHIPPED_DRAFT_DIR / "SHA256SUMS").is_file(), reason="drafter not shipped yet")


@shipped
def test_shipped_drafter_matches_its_checksums_and_size():
    from specgauge.train.assets import verify_checksums
    from specgauge.train.report import read_sha256sums

    names = set(read_sha256sums(SHIPPED_DRAFT_DIR))
    assert {"config.json", "model.safetensors", "TRAINING.md"} <= names
    assert verify_checksums(SHIPPED_DRAFT_DIR) == []
    assert (SHIPPED_DRAFT_DIR / "model.safetensors").stat().st_size <= 10 * 1024 * 1024


@shipped
def test_shipped_drafter_loads_onto_the_shipped_target_and_drafts():
    import torch

    from specgauge.engine.eagle3 import load_eagle3, shipped_draft_dir, target_features
    from specgauge.engine.model import load_model
    from specgauge.train.assets import shipped_target_dir

    target = load_model(shipped_target_dir())
    head = load_eagle3(shipped_draft_dir(), target)
    assert head.embed_tokens.weight is target.model.embed_tokens.weight
    ids = torch.tensor([[target.config.bos_token_id, 3, 206, 1555, 302]])
    with torch.no_grad():
        _, aux = target_features(target, ids, head.config.aux_layers)
        out = head.step(ids, head.fuse(aux), torch.arange(5))
    drafted = head.draft_to_target(out.logits.argmax(-1))
    assert torch.isfinite(out.logits).all() and head.t2d[drafted].all()
    text = (SHIPPED_DRAFT_DIR / "TRAINING.md").read_text()
    assert "python -m specgauge train draft" in text and "| code_stdlib |" in text
