"""Evaluation metrics on a tiny exported model."""

from __future__ import annotations

import math

import torch

from specgauge.train.corpus import TARGET_SOURCES
from specgauge.train.evaluate import distinct_trigram_share, evaluate_model, greedy_continuation, prompt_ids


def test_distinct_trigram_share():
    assert distinct_trigram_share([1, 2, 3, 4, 5]) == 1.0
    assert distinct_trigram_share([7, 7, 7, 7, 7, 7]) == 1 / 4  # one distinct trigram out of four
    assert distinct_trigram_share([1, 2, 1, 2, 1, 2]) == 2 / 4
    assert distinct_trigram_share([1, 2]) is None


def test_evaluate_reports_loss_and_repetition_per_source(tiny_corpus, tiny_model_dir):
    report = evaluate_model(tiny_model_dir / "model", tiny_corpus["dir"], prompts_per_source=2, max_new_tokens=12,
                            threads=1, eval_windows=2, ignore_eos=True)
    assert set(report["sources"]) == set(TARGET_SOURCES)
    for row in report["sources"].values():
        assert math.isfinite(row["val_loss"]) and 0 < row["val_loss"] < math.log(600) + 1
        assert 0 < row["distinct_trigram_share"] <= 1
        assert row["mean_generated_tokens"] == 12  # EOS ignored: always the full length
        assert len(row["samples"]) == 2 and row["samples"][0]["continuation"]


def test_cached_greedy_continuation_is_the_argmax_chain_of_the_full_forward(tiny_corpus, tiny_model_dir, tiny_tokenizer):
    from specgauge.engine.models.llama import load_model

    model = load_model(tiny_model_dir / "model")
    prompt = prompt_ids(tiny_tokenizer, [{"role": "user", "content": "Explain lists."}])
    assert prompt[-2:] == [tiny_tokenizer.token_to_id("<|assistant|>"), tiny_tokenizer.encode("\n").ids[0]]
    tokens = greedy_continuation(model, prompt, 6, stop_ids=set())  # KV-cached decoding
    assert len(tokens) == 6
    ids = prompt + tokens
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids[:-1]]))  # (1, T, V)
    assert logits[0, len(prompt) - 1 :].argmax(-1).tolist() == tokens
