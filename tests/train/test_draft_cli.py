"""``specgauge train draft`` end to end on a tiny corpus and target, regeneration, and its one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from specgauge.train.regenerate import RegenerateConfig, pick_prompts, regenerate_source, response_starts
from cli_testkit import run_cli


@pytest.fixture(scope="module")
def tiny_target(tiny_corpus, tmp_path_factory) -> Path:
    """A random-weight target over the tiny corpus's tokenizer, in HF layout with the tokenizer."""
    from tokenizers import Tokenizer

    from specgauge.engine.models.llama import save_model
    from specgauge.train.target import ModelShape
    from specgauge.train.tokenizer import special_token_ids

    tokenizer_dir = Path(tiny_corpus["tokenizer_dir"])
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    shape = ModelShape(hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=64, max_position_embeddings=512)
    torch.manual_seed(0)
    from specgauge.engine.models.llama import LlamaForCausalLM

    model = LlamaForCausalLM(shape.llama_config(tokenizer.get_vocab_size(), special_token_ids(tokenizer)))
    out = tmp_path_factory.mktemp("target")
    save_model(model, out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir / name, out / name)
    return out


def test_response_starts_are_where_the_mask_turns_on():
    assert response_starts([0, 0, 1, 1, 0, 1, 0, 0, 1]) == [2, 5, 8]


def test_prompts_end_right_before_an_assistant_turn(tiny_corpus):
    from specgauge.train.dataset import iter_samples

    folder = Path(tiny_corpus["dir"]) / "train" / "agentic_tools"
    originals = [ids for ids, _ in iter_samples(folder)]
    starts = {tuple(ids[:s]) for ids, (_, mask) in zip(originals, iter_samples(folder)) for s in response_starts(mask)}
    prompts = list(pick_prompts(folder, 5, 400, seed=0))
    assert prompts and all(tuple(p) in starts and len(p) <= 400 for p in prompts)
    assert prompts == list(pick_prompts(folder, 5, 400, seed=0))  # seeded


def test_regenerated_responses_are_the_targets_greedy_continuations(tiny_corpus, tiny_target, tmp_path):
    from specgauge.engine.models.llama import load_model

    config = RegenerateConfig(samples_per_source=3, max_prompt_tokens=200, max_new_tokens=6, max_running=2, threads=1)
    folder = regenerate_source(Path(tiny_corpus["dir"]), tiny_target, tmp_path, "validation", "code_stdlib", config, "sha")
    records = [json.loads(line) for line in (folder / "shard-00000.jsonl").read_text().splitlines()]
    assert len(records) == 3
    model = load_model(tiny_target)
    eos = set(model.config.eos_token_id)
    for record in records:
        mask = record["loss_mask"]
        start = mask.index(1)
        assert all(mask[start:]) and not any(mask[:start])
        ids = list(record["input_ids"][:start])
        for token in record["input_ids"][start:]:  # replay greedy decoding with the full forward
            with torch.no_grad():
                expected = int(model(torch.tensor([ids]))[0][0, -1].argmax())
            assert token == expected
            ids.append(token)
        assert len(record["input_ids"]) - start == 6 or record["input_ids"][-1] in eos
    before = (folder / "shard-00000.jsonl").stat().st_mtime_ns
    regenerate_source(Path(tiny_corpus["dir"]), tiny_target, tmp_path, "validation", "code_stdlib", config, "sha")
    assert (folder / "shard-00000.jsonl").stat().st_mtime_ns == before  # same request: reused


def test_a_request_for_more_prompts_regenerates_only_the_ones_missing(tiny_corpus, tiny_target, tmp_path):
    corpus = Path(tiny_corpus["dir"])
    config = RegenerateConfig(samples_per_source=2, max_prompt_tokens=200, max_new_tokens=5, max_running=2, threads=1)
    folder = regenerate_source(corpus, tiny_target, tmp_path, "validation", "code_stdlib", config, "sha")
    two = (folder / "shard-00000.jsonl").read_text().splitlines()
    started: list[tuple[str, int]] = []
    more = RegenerateConfig(**{**config.__dict__, "samples_per_source": 3})
    regenerate_source(corpus, tiny_target, tmp_path, "validation", "code_stdlib", more, "sha",
                      on_start=lambda name, count: started.append((name, count)))
    three = (folder / "shard-00000.jsonl").read_text().splitlines()
    meta = json.loads((folder / "meta.json").read_text())
    assert started == [("validation/code_stdlib", 1)]  # one prompt generated, two kept
    assert three[:2] == two and len(three) == 3
    assert meta["samples_per_source"] == 3 and meta["num_samples"] == 3
    assert meta["num_response_tokens"] == sum(sum(json.loads(line)["loss_mask"]) for line in three)
    # fewer: the first ones, nothing generated; other settings: nothing kept
    started.clear()
    regenerate_source(corpus, tiny_target, tmp_path, "validation", "code_stdlib", config, "sha",
                      on_start=lambda name, count: started.append((name, count)))
    assert started == [] and (folder / "shard-00000.jsonl").read_text().splitlines() == two
    longer = RegenerateConfig(**{**config.__dict__, "max_new_tokens": 6})
    regenerate_source(corpus, tiny_target, tmp_path, "validation", "code_stdlib", longer, "sha",
                      on_start=lambda name, count: started.append((name, count)))
    assert started == [("validation/code_stdlib", 2)]


def test_train_draft_end_to_end_then_resume(tiny_corpus, tiny_target, tmp_path):
    from specgauge.engine.models.eagle3 import load_eagle3
    from specgauge.engine.models.llama import load_model
    from specgauge.train.assets import verify_checksums

    common = ["--target", str(tiny_target), "--corpus", str(tiny_corpus["dir"]), "--run-dir", str(tmp_path / "run"),
              "--regen-samples", "4", "--regen-validation-samples", "2", "--max-new-tokens", "8",
              "--max-prompt-tokens", "200", "--eval-every", "1", "--eval-samples", "2", "--batch-size", "2",
              "--ttt-steps", "3", "--draft-vocab-size", "200", "--threads", "1", "--fp32"]
    done = run_cli("train", "draft", *common, "--max-steps", "2", "--output", str(tmp_path / "head"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "eval step 2" in done.stdout and "code_stdlib acc" in done.stdout
    head_dir = tmp_path / "head"
    assert verify_checksums(head_dir) == []
    training = (head_dir / "TRAINING.md").read_text()
    assert "| code_stdlib |" in training and "train draft" in training and "--max-steps 2" in training
    head = load_eagle3(head_dir, load_model(tiny_target))
    assert head.config.draft_vocab_size == 200 and head.config.aux_layers == (1, 2, 3)
    resumed = run_cli("train", "draft", *common, "--max-steps", "3", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed at step 2" in resumed.stdout and "stopped at step 3" in resumed.stdout

    # A new run started from that head keeps its vocabulary map and shape.
    shutil.copytree(tmp_path / "run" / "regenerated", tmp_path / "warm" / "regenerated")
    warm = [*common[:4], "--run-dir", str(tmp_path / "warm"), *common[6:]]
    refused = run_cli("train", "draft", *warm, "--init-from", str(head_dir), "--intermediate-size", "16", "--max-steps", "1", timeout=60)
    assert refused.returncode == 2 and "--intermediate-size 16: the head in" in refused.stderr
    assert "can widen its MLP, not narrow it" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    # ... and reads the target layers --aux-layers names instead of its own (the fc keeps its shape),
    # with its MLP widened when a wider --intermediate-size is given
    mlp_width = head.config.intermediate_size + 32
    started = run_cli("train", "draft", *warm, "--init-from", str(head_dir), "--aux-layers", "0,2,3", "--max-steps", "1",
                      "--intermediate-size", str(mlp_width), "--output", str(tmp_path / "warm_head"))
    assert started.returncode == 0, started.stderr[-2000:]
    warm_head = load_eagle3(tmp_path / "warm_head", load_model(tiny_target))
    assert torch.equal(warm_head.d2t, head.d2t) and warm_head.config.intermediate_size == mlp_width
    assert f"its MLP widened from {head.config.intermediate_size} to {mlp_width} units" in (
        tmp_path / "warm_head" / "TRAINING.md").read_text()
    assert warm_head.config.aux_layers == (0, 2, 3)
    warm_training = (tmp_path / "warm_head" / "TRAINING.md").read_text()
    assert f"started from the head in `{head_dir}`" in warm_training and "--aux-layers 0,2,3" in warm_training
    assert "(inputs of target layers) [0, 2, 3]" in warm_training
    # resumed without those flags, the run keeps its checkpoint head's layers and MLP width
    resumed_warm = run_cli("train", "draft", *warm, "--max-steps", "2", "--resume", "--output", str(tmp_path / "warm_head"))
    assert resumed_warm.returncode == 0, resumed_warm.stderr[-2000:]
    assert "aux layers (0, 2, 3)" in resumed_warm.stdout and "resumed at step 1" in resumed_warm.stdout
    assert load_eagle3(tmp_path / "warm_head", load_model(tiny_target)).config.intermediate_size == mlp_width
    # ... and a width given that is not the checkpoint's is refused in one line naming both
    other = run_cli("train", "draft", *warm, "--max-steps", "3", "--resume", "--intermediate-size", str(mlp_width + 8), timeout=120)
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1, other.stderr[-2000:]
    assert f"intermediate_size {mlp_width} there, {mlp_width + 8} here" in other.stderr
    # A --draft-vocab-size given asks for a new map of that size, built from the responses.
    wider = [*common[:4], "--run-dir", str(tmp_path / "wider"), *common[6:-5], "--threads", "1", "--fp32"]
    shutil.copytree(tmp_path / "run" / "regenerated", tmp_path / "wider" / "regenerated")
    grown = run_cli("train", "draft", *wider, "--draft-vocab-size", "300", "--init-from", str(head_dir), "--max-steps", "1",
                    "--output", str(tmp_path / "wider_head"))
    assert grown.returncode == 0, grown.stderr[-2000:]
    wider_head = load_eagle3(tmp_path / "wider_head", load_model(tiny_target))
    # both maps rank the same responses' tokens: the 300 most frequent hold the 200 most frequent
    assert wider_head.config.draft_vocab_size == 300 and set(head.draft_to_target(torch.arange(200)).tolist()) < set(
        wider_head.draft_to_target(torch.arange(300)).tolist())
    assert "lm_head rows for the tokens of the new vocabulary map" in (tmp_path / "wider_head" / "TRAINING.md").read_text()


@pytest.mark.parametrize("extra, message", [
    (["--weights", "code_stdlib=1,poetry=2"], "--weights: unknown source 'poetry'"),
    (["--weights", "code_stdlib=0"], "--weights: at least one source needs a positive weight"),
    (["--max-prompt-tokens", "500", "--max-new-tokens", "100"], "exceed the target's context of 512"),
    (["--resume"], "--resume: no draft_checkpoint.pt"),
    (["--init-from", "/nonexistent/head"], "--init-from: /nonexistent/head has no config.json"),
    (["--aux-layers", "1,2"], "--aux-layers 1,2: EAGLE-3 reads three distinct target layers"),
    (["--aux-layers", "1,2,x"], "--aux-layers 1,2,x: not comma-separated layer ids"),
    (["--aux-layers", "1,2,4"], "--aux-layers 1,2,4: the target has 4 layers"),
])
def test_bad_input_is_one_line_and_exit_2(tiny_corpus, tiny_target, tmp_path, extra, message):
    done = run_cli("train", "draft", "--target", str(tiny_target), "--corpus", str(tiny_corpus["dir"]), "--run-dir", str(tmp_path), *extra,
                   timeout=60)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_missing_corpus_and_target_are_named(tmp_path, tiny_target):
    done = run_cli("train", "draft", "--target", str(tiny_target), "--corpus", str(tmp_path / "nope"), "--run-dir", str(tmp_path), timeout=60)
    assert done.returncode == 2 and "--corpus:" in done.stderr
    done = run_cli("train", "draft", "--target", str(tmp_path), "--corpus", str(tmp_path), "--run-dir", str(tmp_path), timeout=60)
    assert done.returncode == 2 and "--target: no config.json" in done.stderr
