"""The shipped drafter reads the layers it was trained on in every engine and exports for SGLang (its files
and drafting: test_every_shipped_model.py)."""

from __future__ import annotations

import pytest

from specgauge.engine.models.eagle3 import SHIPPED_DRAFT_DIR

shipped = pytest.mark.skipif(not (SHIPPED_DRAFT_DIR / "SHA256SUMS").is_file(), reason="drafter not shipped yet")


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
