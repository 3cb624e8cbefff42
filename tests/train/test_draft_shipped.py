"""The shipped drafter's files match SHA256SUMS, stay small, and load onto the shipped target."""

from __future__ import annotations

import pytest

from specgauge.engine.models.eagle3 import SHIPPED_DRAFT_DIR

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

    from specgauge.engine.models.eagle3 import load_eagle3, shipped_draft_dir, target_features
    from specgauge.engine.models.llama import load_model
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


@shipped
def test_shipped_drafter_reads_the_layers_it_was_trained_on_in_every_engine():
    """Trained on the inputs of target layers 2, 3, 4 (TRAINING.md); the config says so in vLLM's
    meaning (id = input of that layer), which specgauge's engine reads the same way; SGLang's
    config, one less, names the same layers."""
    import json
    import re

    from specgauge.engine.models.eagle3 import config_for_engine, load_eagle3, shipped_draft_dir
    from specgauge.engine.models.llama import load_model
    from specgauge.train.assets import shipped_target_dir

    trained = re.search(r"aux layers \(inputs of target layers\) \[([0-9, ]+)\]",
                        (SHIPPED_DRAFT_DIR / "TRAINING.md").read_text())
    trained_layers = tuple(int(i) for i in trained.group(1).split(","))
    config = json.loads((SHIPPED_DRAFT_DIR / "config.json").read_text())
    assert tuple(config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]) == trained_layers  # vLLM: as is
    target = load_model(shipped_target_dir())
    assert load_eagle3(shipped_draft_dir(), target).config.aux_layers == trained_layers  # specgauge: as is
    sglang_ids = config_for_engine(config, "sglang")["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert tuple(i + 1 for i in sglang_ids) == trained_layers   # SGLang captures the input of id + 1


@shipped
def test_export_draft_for_sglang_writes_ids_one_less_and_the_same_weights(cli_here, tmp_path):
    import json

    result = cli_here("train", "export-draft", str(SHIPPED_DRAFT_DIR), "--engine", "sglang", "--output", str(tmp_path / "sg"))
    assert result.returncode == 0, result.stderr
    ours = json.loads((SHIPPED_DRAFT_DIR / "config.json").read_text())
    theirs = json.loads((tmp_path / "sg" / "config.json").read_text())
    assert [i - 1 for i in ours["eagle_config"]["eagle_aux_hidden_state_layer_ids"]] == \
        theirs["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    assert {k: v for k, v in theirs.items() if k != "eagle_config"} == {k: v for k, v in ours.items() if k != "eagle_config"}
    assert (tmp_path / "sg" / "model.safetensors").read_bytes() == (SHIPPED_DRAFT_DIR / "model.safetensors").read_bytes()
    bad = cli_here("train", "export-draft", str(tmp_path / "none"), "--engine", "sglang", "--output", str(tmp_path / "x"))
    assert bad.returncode == 2 and "DRAFT_DIR" in bad.stderr and "Traceback" not in bad.stderr
