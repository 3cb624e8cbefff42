"""Verdict rules: every sentence is backed by its interval and its sample size (docs/compare.md)."""

import json
import math
import shlex

import pytest

from specgauge.analysis.crossover import find_crossover
from specgauge.analysis.verdict import (MIN_PAIRS, assess_sweep, crossover_sentence, recommend,
                                        recommendation_sentence, supported_crossover, verdict_lines)
from specgauge.analysis.results import SingleStreamDomain, SpeculationSetup, SweepPoint

LEVELS = [1, 2, 4, 8, 16, 32, 64]


def curve(crossover: float, slope: float = 0.3) -> list[float]:
    return [1.0 - slope * (math.log2(c) - math.log2(crossover)) for c in LEVELS]


def sweep_of(points, pairs=16):
    """``points``: (concurrency, ratio, low, high)."""
    return [SweepPoint(concurrency=c, baseline_tok_s=100.0, speculative_tok_s=100.0 * r, ratio=r, ci_low=lo,
                       ci_high=hi, pairs=pairs) for c, r, lo, hi in points]


def judged(points, pairs=16, **kwargs):
    sweep = sweep_of(points, pairs)
    crossover = supported_crossover(find_crossover([p.concurrency for p in sweep], [p.ratio for p in sweep]),
                                    assess_sweep(sweep))
    return sweep, crossover, recommend(crossover, sweep, **kwargs)


def domain(name, speedup, low, high, pairs=12):
    return SingleStreamDomain(domain=name, baseline_tok_s=100.0, speculative_tok_s=100.0 * speedup, speedup=speedup,
                              ci_low=low, ci_high=high, accept_length=2.0, pairs=pairs)


def test_pays_everywhere_is_not_said_when_an_interval_spans_one():
    # an n-gram compare once measured: c=1 1.14x [0.97, 1.36], c=8 1.15x [0.98, 1.36]
    sweep, crossover, recommendation = judged([(1, 1.14, 0.97, 1.36), (8, 1.15, 0.98, 1.36)])
    lines = verdict_lines("n-gram", [], sweep, crossover)
    assert not any("pays at every tested concurrency" in line for line in lines)
    assert not recommendation.confident and recommendation.disable_above is None and recommendation.settings == ()
    sentence = recommendation_sentence(recommendation)
    assert sentence.startswith("Uncertain") and "Keep speculation on" not in sentence and "--rounds 3" in sentence


def test_one_point_spanning_one_breaks_pays_everywhere():
    # a demo once printed "pays at every tested concurrency (up to 64)" beside 1.02x [0.97, 1.06]
    sweep, crossover, recommendation = judged([(1, 1.6, 1.4, 1.8), (4, 1.3, 1.2, 1.4), (64, 1.02, 0.97, 1.06)])
    lines = verdict_lines("EAGLE-3", [], sweep, crossover)
    assert not any("pays at every" in line for line in lines)
    assert any("no clear difference at 64 (ratio 1.02 [0.97, 1.06])" in line for line in lines)
    assert not recommendation.confident


def test_pays_everywhere_when_every_interval_is_above_one():
    sweep, crossover, recommendation = judged([(1, 1.6, 1.4, 1.8), (64, 1.1, 1.05, 1.15)])
    assert "pays at every tested concurrency (up to 64)" in verdict_lines("EAGLE-3", [], sweep, crossover)[0]
    assert recommendation.confident and recommendation.disable_above is None
    assert recommendation_sentence(recommendation) == "Keep speculation on: it pays at every tested concurrency."


def test_never_pays_when_every_interval_is_below_one():
    sweep, crossover, recommendation = judged([(1, 0.8, 0.7, 0.9), (8, 0.6, 0.5, 0.7)])
    assert "does not raise throughput at any tested concurrency" in verdict_lines("x", [], sweep, crossover)[0]
    assert recommendation.confident and recommendation.disable_above == 0


def test_crossover_needs_a_point_clearly_above_and_one_clearly_below():
    unclear = [(c, r, r - 0.3, r + 0.3) for c, r in zip(LEVELS, curve(13.7, slope=0.05))]
    sweep, crossover, recommendation = judged(unclear)
    assert crossover.kind == "crosses" and not crossover.supported
    assert not any("overtakes" in line for line in verdict_lines("x", [], sweep, crossover))

    clear = [(c, r, r - 0.05, r + 0.05) for c, r in zip(LEVELS, curve(13.7))]
    sweep, crossover, recommendation = judged(clear)
    assert crossover.supported and recommendation.confident and recommendation.disable_above == 13
    assert "overtakes x at ≈ 13.7 concurrent requests" in crossover_sentence("x", sweep, crossover)


def test_crossover_threshold_stays_between_the_clear_points():
    # above at 1 and 2, unclear at 4, clearly below from 8: N within [2, 7]
    sweep, _, recommendation = judged([(1, 1.5, 1.3, 1.7), (2, 1.2, 1.1, 1.3), (4, 1.02, 0.9, 1.1),
                                       (8, 0.7, 0.6, 0.8)])
    assert recommendation.confident and 2 <= recommendation.disable_above <= 7


def test_a_clear_loss_without_a_clear_gain_is_an_uncertain_threshold():
    sweep, _, recommendation = judged([(1, 1.05, 0.9, 1.2), (4, 1.0, 0.9, 1.1), (16, 0.7, 0.6, 0.8)])
    assert not recommendation.confident and recommendation.disable_above == 4
    assert "Tentatively" in recommendation_sentence(recommendation)


def test_too_few_requests_get_no_speedup_sentence():
    # a suite with 1-2 requests per domain printed "speeds up agentic 1.95x" without an interval
    lines = verdict_lines("EAGLE-3", [domain("agentic", 1.95, None, None, pairs=2),
                                      domain("reasoning", 2.21, 1.9, 2.5, pairs=MIN_PAIRS - 1),
                                      domain("coding", 1.8, 1.7, 1.9)], [], find_crossover([], []))
    assert "agentic 1.95" not in " ".join(lines) and "reasoning 2.21" not in " ".join(lines)
    assert "speeds up single-stream coding 1.80x [1.70, 1.90]" in lines[0]
    assert "agentic (too few requests: 2)" in lines[1] and "reasoning (too few requests: 4)" in lines[1]


def test_too_few_sweep_requests_are_no_verdict():
    sweep, crossover, recommendation = judged([(1, 1.6, 1.4, 1.8), (8, 1.5, 1.3, 1.7)], pairs=MIN_PAIRS - 1)
    lines = verdict_lines("x", [], sweep, crossover)
    assert not any("pays" in line for line in lines)
    assert not recommendation.confident and "1 (too few requests: 4)" in " ".join(lines)


def test_verdict_lines_say_it_in_words():
    single = [domain("coding", 1.8, 1.7, 1.9), domain("encyclopedic", 1.2, 1.1, 1.3)]
    sweep, crossover, _ = judged([(c, r, r - 0.05, r + 0.05) for c, r in zip(LEVELS, curve(14.0))])
    lines = verdict_lines("EAGLE-3", single, sweep, crossover)
    assert lines[0] == "EAGLE-3 speeds up single-stream coding 1.80x [1.70, 1.90] and encyclopedic 1.20x [1.10, 1.30]."
    assert "overtakes EAGLE-3 at ≈ 14.0 concurrent requests" in lines[1]
    assert lines[2].startswith(f"At 64 concurrent requests speculation costs {1 / curve(14.0)[-1]:.2f}x throughput")


# --- settings in each engine's own form ---------------------------------------------------------

def settings_of(recommendation):
    return {s.server: s for s in recommendation.settings}


def test_vllm_setting_is_pasteable_json_for_the_arms_own_method():
    setup = SpeculationSetup(engine="vllm", method="ngram", num_speculative_tokens=4, max_num_seqs=128)
    base = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
    _, _, recommendation = judged([(c, r, r - 0.05, r + 0.05) for c, r in zip(LEVELS, curve(13.7))],
                                  setup=setup, vllm_base_config=base)
    vllm = settings_of(recommendation)["vllm"]
    flag, text = shlex.split(vllm.setting)
    config = json.loads(text)
    assert flag == "--speculative-config"
    assert config == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                      "num_speculative_tokens_per_batch_size": [[1, 13, 4], [14, 128, 0]]}
    assert "K" not in text and "MAX_NUM_SEQS" not in text and "DRAFT" not in text


def test_vllm_setting_says_what_it_does_not_know():
    _, _, recommendation = judged([(c, r, r - 0.05, r + 0.05) for c, r in zip(LEVELS, curve(13.7))])
    vllm = settings_of(recommendation)["vllm"]
    config = json.loads(shlex.split(vllm.setting)[1])
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 13, 3], [14, 256, 0]]
    assert "method is unknown" in vllm.note and "draft depth unknown" in vllm.note and "--max-num-seqs" in vllm.note


def test_sglang_setting_is_its_adaptive_config_never_max_running_requests():
    setup = SpeculationSetup(engine="sglang", method="EAGLE3", num_speculative_tokens=5, eagle_topk=1)
    _, _, recommendation = judged([(c, r, r - 0.05, r + 0.05) for c, r in zip(LEVELS, curve(13.7))], setup=setup)
    sglang = settings_of(recommendation)["sglang"]
    assert "--max-running-requests" not in sglang.setting
    assert sglang.setting.startswith("--speculative-adaptive --speculative-adaptive-config speculative_adaptive.json")
    assert json.loads(sglang.config_text) == {"strategy": "ema", "1": {"candidate_steps": [5]},
                                              "14": {"candidate_steps": [0]}}
    assert settings_of(recommendation)["specgauge"].setting == "--speculative-disable-above 13"


def test_sglang_ngram_arm_is_told_adaptive_is_eagle_only():
    setup = SpeculationSetup(engine="sglang", method="NGRAM")
    _, _, recommendation = judged([(c, r, r - 0.05, r + 0.05) for c, r in zip(LEVELS, curve(13.7))], setup=setup)
    sglang = settings_of(recommendation)["sglang"]
    assert "--speculative-adaptive" not in sglang.setting and "EAGLE/EAGLE3" in sglang.note
    vllm = json.loads(shlex.split(settings_of(recommendation)["vllm"].setting)[1])
    assert vllm["method"] == "ngram" and "model" not in vllm


@pytest.mark.parametrize("points, threshold", [([(1, 0.8, 0.7, 0.9), (8, 0.6, 0.5, 0.7)], 0)])
def test_never_pays_settings_are_still_valid(points, threshold):
    _, _, recommendation = judged(points)
    config = json.loads(shlex.split(settings_of(recommendation)["vllm"].setting)[1])
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 256, 0]]
    assert settings_of(recommendation)["specgauge"].setting == "--speculative-algorithm NONE"
