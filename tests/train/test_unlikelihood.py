"""Sequence-level unlikelihood training (train/unlikelihood.py) and the batched greedy decoder it uses."""

from __future__ import annotations

import pytest
import torch

from specgauge.train.evaluate import greedy_continuation
from specgauge.train.greedy import greedy_batch
from specgauge.train.target import ModelShape, TrainConfig, Trainer
from specgauge.train.unlikelihood import continue_and_mark, repeated_ngram_mask, stopped_mask, unlikelihood_of


def test_tokens_of_a_repeated_four_gram_are_marked_in_the_continuation_only():
    sequence = [1, 2, 3, 4, 5, 1, 2, 3, 4, 9]
    assert repeated_ngram_mask(sequence, start=5) == [True, True, True, True, False]
    # the repeat straddles the prefix/continuation boundary: only the continuation's part is returned
    assert repeated_ngram_mask([1, 2, 3, 4, 1, 2, 3, 4], start=6) == [True, True]
    # a trigram repeated is not a 4-gram repeated
    assert repeated_ngram_mask([1, 2, 3, 8, 1, 2, 3, 9], start=4) == [False] * 4
    assert repeated_ngram_mask([7] * 6, start=2) == [True] * 4  # 7 7 7 7 occurs at 0, then at 1 and 2


def test_tokens_after_the_first_stop_token_are_not_served():
    assert stopped_mask([5, 6, 7, 6], {6}) == [True, True, False, False]
    assert stopped_mask([5, 7], {6}) == [True, True]


def _model(tiny_model_dir):
    from specgauge.engine.models.llama import load_model

    return load_model(tiny_model_dir / "model", dtype=torch.float32)


def test_batched_greedy_decoding_equals_each_prompt_decoded_alone(tiny_model_dir):
    model = _model(tiny_model_dir)
    generator = torch.Generator().manual_seed(0)
    prefixes = torch.randint(10, 600, (3, 12), generator=generator)
    batched = greedy_batch(model, prefixes, 8)
    assert batched.shape == (3, 8)
    for row, prefix in zip(batched.tolist(), prefixes.tolist()):
        assert row == greedy_continuation(model, prefix, 8, stop_ids=set())


def test_unlikelihood_steps_lower_the_probability_of_the_repeated_tokens(tiny_model_dir):
    model = _model(tiny_model_dir)
    prefixes = torch.randint(10, 600, (4, 8), generator=torch.Generator().manual_seed(1))
    sequences, mask = continue_and_mark(model, prefixes, set(), 32)
    assert mask.shape == (4, 32) and mask.float().mean() > 0.5, "the 15-step model loops; the test needs repeats"

    def probabilities() -> torch.Tensor:  # (4, 32): p of each generated token
        with torch.no_grad():
            logits, _ = model(sequences[:, :-1])
        return torch.softmax(logits[:, 7:], dim=-1).gather(-1, sequences[:, 8:].unsqueeze(-1)).squeeze(-1)

    before = probabilities()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    for _ in range(5):
        loss = unlikelihood_of(model, sequences, 8, mask, bf16=False)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = probabilities()
    assert after[mask].mean() < before[mask].mean() / 2
    assert unlikelihood_of(model, sequences, 8, torch.zeros_like(mask), bf16=False).item() == 0.0


def test_the_trainer_alternates_next_token_and_unlikelihood_steps(tiny_corpus, tmp_path):
    shape = ModelShape(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                       intermediate_size=64, max_position_embeddings=48)
    config = TrainConfig(seq_len=48, batch_size=2, lr=1e-2, warmup_steps=2, max_steps=4, bf16=False, eval_every=1000,
                         eval_windows=1, threads=1, unlikelihood=1.0, ul_batch=3, ul_prefix=16, ul_tokens=8)
    trainer = Trainer(tiny_corpus["dir"], tmp_path / "run", shape, config, vocab_size=600)
    assert [trainer.is_unlikelihood_step(step) for step in range(4)] == [False, True, False, True]
    seen = []
    trainer.run(on_step=lambda step, loss, lr: seen.append((step, loss)))
    assert [step for step, _ in seen] == [1, 2, 3, 4]
    assert all(loss >= 0 for _, loss in seen)
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert saved["config"]["unlikelihood"] == 1.0 and saved["config"]["ul_tokens"] == 8
    plain = Trainer(tiny_corpus["dir"], tmp_path / "plain", shape, TrainConfig(seq_len=48, batch_size=2, bf16=False), 600)
    assert not any(plain.is_unlikelihood_step(step) for step in range(4))


@pytest.mark.parametrize("kwargs, message", [
    ({"unlikelihood": -1.0}, "unlikelihood must be >= 0"),
    ({"unlikelihood": 1.0, "ul_prefix": 40, "ul_tokens": 9}, r"ul_prefix \+ ul_tokens \(40 \+ 9\) must fit seq_len 48"),
    ({"ul_tokens": 0}, "ul_tokens must be positive"),
])
def test_bad_unlikelihood_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(seq_len=48, **kwargs)


def test_the_reproducing_command_names_the_unlikelihood_settings():
    from dataclasses import asdict

    from specgauge.train.report import target_command_line

    config = asdict(TrainConfig(seq_len=4096, unlikelihood=0.5, ul_batch=8, ul_prefix=256, ul_tokens=128,
                                init_from="src/specgauge/assets/target-4k"))
    shape = asdict(ModelShape(max_position_embeddings=4096))
    line = target_command_line(config, shape)
    assert "--unlikelihood 0.5 --ul-batch 8 --ul-prefix 256 --ul-tokens 128" in line
    assert "--unlikelihood" not in target_command_line(asdict(TrainConfig()), asdict(ModelShape()))
