"""Every shipped model (``specgauge models``): its files match SHA256SUMS and stay small enough to
ship, the target loads in specgauge and in transformers with the same logits at its full context,
its head_dim is one real engines have kernels for, and its drafter drafts on it."""

from __future__ import annotations

import json

import pytest

from specgauge.shipped_models import SHIPPED, shipped_names
from specgauge.vllm_setup.layout import VLLM_CPU_HEAD_SIZES

TARGET_FILES = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "TRAINING.md"}
DRAFT_FILES = {"config.json", "model.safetensors", "TRAINING.md"}
MAX_SHIPPED_BYTES = 40 * 1024 * 1024  # weights small enough to ship
MAX_SETUP_MODEL_DRAFT_BYTES = 30 * 1024 * 1024  # a drafter shipped for a model obtained at set-up
# Targets in the repository; a model obtained at set-up (smollm2-135m) has its pinned digests and
# its transformers reference checked in tests/engine/test_smollm2_reference.py.
IN_REPOSITORY = [n for n in shipped_names() if not SHIPPED[n].obtained_at_setup]


def _sizes(directory, names) -> int:
    return sum((directory / name).stat().st_size for name in names)


@pytest.mark.parametrize("name", IN_REPOSITORY)
def test_files_match_their_checksums_and_fit_the_size_limit(name):
    from specgauge.train.assets import verify_checksums
    from specgauge.train.report import read_sha256sums

    model = SHIPPED[name]
    listed = set(read_sha256sums(model.target_dir))
    assert TARGET_FILES <= listed and verify_checksums(model.target_dir) == []
    total = _sizes(model.target_dir, listed)
    if model.draft_dir is not None:
        drafted = set(read_sha256sums(model.draft_dir))
        assert DRAFT_FILES <= drafted and verify_checksums(model.draft_dir) == []
        total += _sizes(model.draft_dir, drafted)
    assert total <= MAX_SHIPPED_BYTES


@pytest.mark.parametrize("name", [n for n in shipped_names() if SHIPPED[n].obtained_at_setup and SHIPPED[n].draft_dir])
def test_the_drafter_of_a_model_obtained_at_setup_matches_its_checksums_and_fits_30_mb(name):
    """Such a model's target comes from PyPI at set-up; its drafter is in the repository."""
    from specgauge.train.assets import verify_checksums
    from specgauge.train.report import read_sha256sums

    draft_dir = SHIPPED[name].draft_dir
    drafted = set(read_sha256sums(draft_dir))
    assert DRAFT_FILES <= drafted and verify_checksums(draft_dir) == []
    assert _sizes(draft_dir, drafted) <= MAX_SETUP_MODEL_DRAFT_BYTES


@pytest.mark.parametrize("name", [n for n in shipped_names() if SHIPPED[n].context > 512])
def test_a_long_context_model_has_a_head_dim_real_engines_serve(name):
    """The second-generation targets are served by vLLM's CPU build unchanged (the first one
    needed a re-laid copy: head_dim 40)."""
    config = json.loads((SHIPPED[name].target_dir / "config.json").read_text())
    assert config["head_dim"] in VLLM_CPU_HEAD_SIZES and "partial_rotary_factor" not in config
    if SHIPPED[name].draft_dir is not None:
        head = json.loads((SHIPPED[name].draft_dir / "config.json").read_text())
        assert head["head_dim"] == config["head_dim"] and head["rope_theta"] == config["rope_theta"]
        assert head["max_position_embeddings"] == config["max_position_embeddings"]


@pytest.mark.parametrize("name", IN_REPOSITORY)
def test_transformers_computes_the_same_logits_at_the_end_of_the_context(name):
    transformers = pytest.importorskip("transformers")
    import torch

    from specgauge.engine.models.llama import load_model

    directory = SHIPPED[name].target_dir
    ours = load_model(directory)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(str(directory), torch_dtype=torch.float32).eval()
    ids = torch.randint(5, ours.config.vocab_size, (1, SHIPPED[name].context), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = theirs(ids).logits[:, -64:]
        logits, _ = ours(ids)
    torch.testing.assert_close(logits[:, -64:], expected, atol=2e-4, rtol=2e-4)


@pytest.mark.parametrize("name", [n for n in shipped_names() if SHIPPED[n].draft_dir is not None])
def test_the_drafter_drafts_on_its_target(name):
    import torch

    from specgauge.engine.models.eagle3 import load_eagle3, target_features
    from specgauge.engine.models.llama import load_model

    target = load_model(SHIPPED[name].target_dir)
    head = load_eagle3(SHIPPED[name].draft_dir, target)
    assert head.embed_tokens.weight is target.model.embed_tokens.weight
    ids = torch.tensor([[target.config.bos_token_id, 3, 206, 1555, 302]])
    with torch.no_grad():
        _, aux = target_features(target, ids, head.config.aux_layers)
        out = head.step(ids, head.fuse(aux), torch.arange(5))
    assert torch.isfinite(out.logits).all() and head.t2d[head.draft_to_target(out.logits.argmax(-1))].all()
    text = (SHIPPED[name].draft_dir / "TRAINING.md").read_text()
    assert "specgauge train draft --" in text and "| code_stdlib |" in text
