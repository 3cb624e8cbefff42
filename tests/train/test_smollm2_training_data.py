"""The SmolLM2 head's regenerated responses kept in the repository (training-data/smollm2-135m):
each source is complete and says what made it — SmolLM2's converted weights, the settings — and
``unpack.sh`` lays them out as ``train draft`` reuses them (docs/eagle3.md, "Training")."""

from __future__ import annotations

import json
import lzma
import subprocess
from pathlib import Path

import pytest

from specgauge.model_setup.smollm2 import SMOLLM2
from specgauge.train.corpus import SOURCES

DATA = Path(__file__).resolve().parents[2] / "training-data" / "smollm2-135m"
FOLDERS = sorted(meta.parent for meta in (DATA / "regenerated").glob("*/*/meta.json"))


def records(folder: Path) -> list[dict]:
    with lzma.open(folder / "shard-00000.jsonl.xz", "rt") as handle:
        return [json.loads(line) for line in handle]


def test_every_split_holds_sources_of_the_corpus():
    assert {f.parent.name for f in FOLDERS} == {"train", "validation"}
    assert {f.name for f in FOLDERS} <= set(SOURCES)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_a_source_is_whole_and_made_by_smollm2(folder):
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["split"], meta["source"]) == (folder.parent.name, folder.name)
    assert meta["target_sha256"] == SMOLLM2.converted_sha256["model.safetensors"]
    rows = records(folder)
    assert len(rows) == meta["num_samples"]
    assert sum(sum(r["loss_mask"]) for r in rows) == meta["num_response_tokens"]
    for row in rows:  # a prompt, then one response the loss is on
        mask = row["loss_mask"]
        start = mask.index(1)
        assert len(mask) == len(row["input_ids"]) and all(mask[start:]) and not any(mask[:start])
        assert 0 < len(mask) - start <= meta["max_new_tokens"] + 1 and start <= meta["max_prompt_tokens"]


def test_unpack_lays_them_out_for_train_draft(tmp_path):
    done = subprocess.run([str(DATA / "unpack.sh"), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for folder in FOLDERS:
        out = tmp_path / "regenerated" / folder.parent.name / folder.name
        assert (out / "meta.json").read_text() == (folder / "meta.json").read_text()
        assert [json.loads(line) for line in (out / "shard-00000.jsonl").read_text().splitlines()] == records(folder)
    assert subprocess.run([str(DATA / "unpack.sh")], capture_output=True, timeout=60).returncode == 2


def test_the_shipped_head_was_trained_against_these_weights():
    """``--init-from src/specgauge/assets/draft-smollm2`` continues from the shipped head (its
    checksums and size: tests/train/test_every_shipped_model.py): an EAGLE-3 head's config, trained
    against SmolLM2's converted weights, whose responses are the ones kept here."""
    from specgauge.shipped_models import ASSETS_DIR

    head = ASSETS_DIR / "draft-smollm2"
    config = json.loads((head / "config.json").read_text())
    assert config["draft_vocab_size"] <= config["vocab_size"]
    assert len(config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]) == 3
    assert SMOLLM2.converted_sha256["model.safetensors"] in (head / "TRAINING.md").read_text()
