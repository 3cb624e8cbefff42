"""A few training steps on a tiny model reduce the loss; a resumed run continues exactly where it stopped."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specgauge.errors import UserError
from specgauge.train.target import ModelShape, TrainConfig, Trainer, export_target, lr_at

TINY_SHAPE = ModelShape(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=64, max_position_embeddings=32)


def _trainer(corpus, run_dir, shape: ModelShape = TINY_SHAPE, **overrides) -> Trainer:
    settings = dict(seq_len=32, batch_size=4, lr=1e-2, warmup_steps=3, max_steps=40, bf16=False, eval_every=1000,
                    eval_windows=2, threads=1, seed=11)
    settings.update(overrides)
    return Trainer(corpus["dir"], run_dir, shape, TrainConfig(**settings), vocab_size=600)


def test_a_few_steps_reduce_the_loss(tiny_corpus, tmp_path):
    trainer = _trainer(tiny_corpus, tmp_path)
    before = trainer.evaluate()
    losses = [trainer.train_step() for _ in range(40)]
    after = trainer.evaluate()
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5
    assert all(after[source] < before[source] for source in before)


def test_resuming_with_another_model_shape_names_what_differs(tiny_corpus, tmp_path):
    first = _trainer(tiny_corpus, tmp_path, max_steps=2)
    first.run()
    other = _trainer(tiny_corpus, tmp_path, dataclasses.replace(TINY_SHAPE, num_hidden_layers=2), max_steps=2)
    with pytest.raises(UserError, match=r"--resume: .*checkpoint.pt was saved for another model shape "
                                        r"\(num_hidden_layers 1 there, 2 here\)"):
        other.load_checkpoint()


def test_resume_continues_at_the_same_step_with_the_same_state(tiny_corpus, tmp_path):
    straight = _trainer(tiny_corpus, tmp_path / "straight", max_steps=12)
    straight.run()

    first = _trainer(tiny_corpus, tmp_path / "resumed", max_steps=12)
    first.run(on_step=lambda step, loss, lr: first.request_stop() if step == 7 else None)
    resumed = _trainer(tiny_corpus, tmp_path / "resumed", max_steps=12)
    resumed.load_checkpoint()
    assert resumed.state.step == 7
    for name, value in first.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], value), name
    resumed.run()

    assert resumed.state.step == straight.state.step == 12
    for name, value in straight.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], value), name
    assert resumed.state.history[-1]["val"] == straight.state.history[-1]["val"]


def test_time_budget_stops_the_run_and_ends_the_decay(tiny_corpus, tmp_path):
    trainer = _trainer(tiny_corpus, tmp_path, max_steps=100_000, minutes=0.02)
    state = trainer.run()
    assert 0 < state.step < 100_000 and state.trained_seconds >= 0.02 * 60
    assert trainer.progress() >= 1.0
    config = trainer.config
    assert lr_at(state.step, trainer.progress(), config) == config.lr * config.min_lr_ratio


def test_warmup_then_cosine():
    config = TrainConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(0, 0.0, config) == 0.1 and lr_at(9, 0.0, config) == 1.0
    assert lr_at(50, 0.5, config) == 0.55
    assert lr_at(50, 1.0, config) == 0.1


def test_export_is_a_loadable_model_directory(tiny_corpus, tmp_path):
    import json

    from specgauge.engine.models.llama import load_model

    trainer = _trainer(tiny_corpus, tmp_path / "run", max_steps=3)
    trainer.run()
    out = tmp_path / "model"
    export_target(tmp_path / "run", tiny_corpus["tokenizer_dir"], out)
    config = json.loads((out / "config.json").read_text())
    assert config["torch_dtype"] == "bfloat16" and config["bos_token_id"] == 0
    assert config["eos_token_id"] == [6, 1]  # <|end|>, <|end_of_text|>
    model = load_model(out)
    best = torch.load(tmp_path / "run" / "best.pt", weights_only=False)["model"]
    expected = best["model.embed_tokens.weight"].to(torch.bfloat16).float()
    assert torch.equal(model.model.embed_tokens.weight, expected)
    assert (out / "tokenizer.json").is_file() and (out / "tokenizer_config.json").is_file()
