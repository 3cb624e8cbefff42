"""Crossover of the throughput ratio in log-concurrency, with an interval from replicates."""

import math

import numpy as np
import pytest

from specgauge.analysis.crossover import find_crossover
from specgauge.analysis.verdict import disable_threshold, recommend, verdict_lines

LEVELS = [1, 2, 4, 8, 16, 32, 64]


def curve(crossover: float, slope: float = 0.3) -> list[float]:
    """A ratio linear in log2(concurrency), equal to 1 at ``crossover``."""
    return [1.0 - slope * (math.log2(c) - math.log2(crossover)) for c in LEVELS]


@pytest.mark.parametrize("truth", [3.0, 5.5, 12.0, 40.0])
def test_linear_curve_crossover_is_exact(truth):
    found = find_crossover(LEVELS, curve(truth))
    assert found.kind == "crosses"
    assert found.concurrency == pytest.approx(truth, rel=1e-9)
    assert found.between[0] <= truth <= found.between[1]


def test_interval_from_noisy_replicates_contains_the_truth():
    rng = np.random.default_rng(5)
    measured = curve(10.0)
    replicates = np.array(measured)[None, :] * rng.lognormal(0, 0.03, (1000, len(LEVELS)))   # (B, points)
    found = find_crossover(LEVELS, measured, replicates)
    assert found.ci_low < 10.0 < found.ci_high
    assert 6 < found.ci_low and found.ci_high < 16


def test_no_crossover_when_speculation_always_pays_or_never_pays():
    assert find_crossover(LEVELS, [2.0, 1.8, 1.5, 1.3, 1.2, 1.1, 1.05]).kind == "never"
    assert find_crossover(LEVELS, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]).kind == "always_below"
    assert find_crossover([1], [1.5]).kind == "insufficient"
    assert find_crossover(LEVELS, [2.0, 1.8, 1.5, 1.3, 1.2, 1.1, 1.05]).concurrency is None


def test_replicates_that_never_cross_leave_the_upper_bound_open():
    measured = curve(48.0, slope=0.05)
    replicates = np.tile(measured, (200, 1))
    replicates[:100] += 0.2        # half of the replicates never fall below 1
    found = find_crossover(LEVELS, measured, replicates)
    assert found.kind == "crosses" and found.ci_high is None


def test_threshold_rule():
    assert disable_threshold(find_crossover(LEVELS, curve(13.7))) == 13
    assert disable_threshold(find_crossover(LEVELS, curve(1.4))) == 1
    assert disable_threshold(find_crossover(LEVELS, [2.0] * 7)) is None
    assert disable_threshold(find_crossover(LEVELS, [0.5] * 7)) == 0


def test_recommendation_settings_name_each_server():
    recommendation = recommend(find_crossover(LEVELS, curve(13.7)))
    by_server = {s.server: s.setting for s in recommendation.settings}
    assert by_server["specgauge"] == "--speculative-disable-above 13"
    assert '"num_speculative_tokens_per_batch_size": [[1, 13, K], [14, MAX_NUM_SEQS, 0]]' in by_server["vllm"]
    assert "--max-running-requests 13" in by_server["sglang"]
    vllm_note = next(s.note for s in recommendation.settings if s.server == "vllm")
    assert "--speculative-disable-by-batch-size 13" in vllm_note
    assert recommend(find_crossover(LEVELS, [2.0] * 7)).settings == ()


def test_verdict_lines_say_it_in_words():
    from specgauge.analysis.results import SingleStreamDomain, SweepPoint

    single = [SingleStreamDomain(domain="coding", baseline_tok_s=10, speculative_tok_s=18, speedup=1.8, ci_low=1.7,
                                 ci_high=1.9, accept_length=3.1),
              SingleStreamDomain(domain="encyclopedic", baseline_tok_s=10, speculative_tok_s=12, speedup=1.2,
                                 ci_low=1.1, ci_high=1.3, accept_length=1.9)]
    ratios = curve(14.0)
    sweep = [SweepPoint(concurrency=c, baseline_tok_s=1, speculative_tok_s=r, ratio=r, ci_low=r - 0.05,
                        ci_high=r + 0.05) for c, r in zip(LEVELS, ratios)]
    lines = verdict_lines("EAGLE-3", single, sweep, find_crossover(LEVELS, ratios))
    assert lines[0] == "EAGLE-3 speeds up single-stream coding 1.80x [1.70, 1.90] and encyclopedic 1.20x [1.10, 1.30]."
    assert "overtakes EAGLE-3 at ≈ 14.0 concurrent requests" in lines[1]
    assert lines[2].startswith(f"At 64 concurrent requests speculation costs {1 / ratios[-1]:.2f}x throughput")
