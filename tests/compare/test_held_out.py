"""The demo's held-out suite (compare/held_out.py): unpacking a drafter's validation split, its
training mix, and the verdict line on whether representative prompts change the answer."""

import json
import lzma
from pathlib import Path

import pytest

from specgauge.analysis.results import SingleStreamDomain
from specgauge.compare.held_out import (HELD_OUT_DOMAIN, held_out_suite, representative_verdict, training_mix,
                                        unpack_validation)
from specgauge.shipped_models import ShippedModel


def _row(domain, speedup, low, high, accept=2.0):
    return SingleStreamDomain(domain=domain, baseline_tok_s=10.0, speculative_tok_s=10.0 * speedup, speedup=speedup,
                              ci_low=low, ci_high=high, accept_length=accept)


def test_overlapping_intervals_with_the_same_answer_do_not_change_it():
    line = representative_verdict([_row("coding", 1.5, 1.3, 1.7), _row(HELD_OUT_DOMAIN, 1.6, 1.4, 1.8, 2.2)], "EAGLE-3")
    assert line.startswith("Representative prompts: EAGLE-3 on the drafter's held-out training mix 1.60x [1.40, 1.80]")
    assert "coding 1.50x [1.30, 1.70] at 2.00 tokens per verify" in line
    assert line.endswith("Same answer (pays off) and the intervals overlap: at this size, representative prompts "
                         "do not change the answer.")


def test_a_different_answer_is_named_per_generic_suite():
    line = representative_verdict([_row("coding", 1.5, 1.3, 1.7), _row("encyclopedic", 0.98, 0.9, 1.05),
                                   _row(HELD_OUT_DOMAIN, 1.6, 1.4, 1.8)], "EAGLE-3")
    assert ("They change the answer: single stream pays off on the held-out mix, "
            "against unclear on encyclopedic.") in line


def test_separated_intervals_with_the_same_answer_say_which_way():
    line = representative_verdict([_row("coding", 1.2, 1.1, 1.3), _row(HELD_OUT_DOMAIN, 1.8, 1.6, 2.0)], "EAGLE-3")
    assert "Same answer (pays off), but the held-out speedup lies above coding beyond the intervals" in line


def test_no_line_without_a_held_out_row_or_a_generic_one():
    assert representative_verdict([_row("coding", 1.5, 1.3, 1.7)], "EAGLE-3") is None
    assert representative_verdict([_row(HELD_OUT_DOMAIN, 1.5, 1.3, 1.7)], "EAGLE-3") is None


def _split(root: Path, split: str, source: str, samples: list[tuple[list[int], list[int]]]) -> None:
    folder = root / split / source
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"source": source, "split": split, "num_samples": len(samples)}))
    with lzma.open(folder / "shard-00000.jsonl.xz", "wt") as f:
        for ids, mask in samples:
            f.write(json.dumps({"input_ids": ids, "loss_mask": mask}) + "\n")


def test_the_mix_is_the_train_splits_counts_and_the_validation_split_unpacks(tmp_path):
    _split(tmp_path, "train", "code_a", [([1, 2], [0, 1])] * 3)
    _split(tmp_path, "train", "prose_b", [([1, 2], [0, 1])])
    _split(tmp_path, "validation", "code_a", [([5, 6, 7], [0, 1, 1])])
    assert training_mix(tmp_path) == {"code_a": 3.0, "prose_b": 1.0}
    out = unpack_validation(tmp_path, tmp_path / "out", ["code_a"])
    lines = (out / "code_a" / "shard-00000.jsonl").read_text().splitlines()
    assert [json.loads(line)["input_ids"] for line in lines] == [[5, 6, 7]]
    assert json.loads((out / "code_a" / "meta.json").read_text())["split"] == "validation"


def test_a_model_without_kept_training_data_gets_a_note_and_no_suite(tmp_path):
    model = ShippedModel("no-data", tmp_path / "t", None, 512, "no training data kept")
    path, note = held_out_suite(model, tmp_path, 4, 32)
    assert path is None and "no training data" in note and not (tmp_path / "suites").exists()


def test_the_shipped_smollm2_drafters_held_out_suite_is_drawn_in_its_training_mix(tmp_path):
    from specgauge.shipped_models import DEFAULT

    if not DEFAULT.tokenizer_path.is_file():
        pytest.skip("smollm2-135m is not set up (make model)")
    path, note = held_out_suite(DEFAULT, tmp_path, 12, 48)
    lines = path.read_text().splitlines()
    header, requests = json.loads(lines[0])["suite"], [json.loads(line) for line in lines[1:]]
    assert len(requests) == 12 and all(r["max_tokens"] == 48 for r in requests)
    sampled = header["build_info"]["sampled"]
    assert sampled["code_requests"] >= sampled["code_stdlib"] >= sampled["code_questions"] > 0
    assert sampled.get("prose_long", 0) == 0 and sampled.get("code_files", 0) == 0   # not in the training mix
    assert all(r["messages"][0]["role"] == "system" for r in requests)   # SmolLM2's template's own system turn
    assert "12 prompts" in note
