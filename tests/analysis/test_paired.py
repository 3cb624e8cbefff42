"""Bootstrap ratios: the 95% intervals cover a known true ratio at about the stated rate."""

import numpy as np
import pytest

from specgauge.analysis.paired import ratio_of_statistic, ratio_of_sums, significant_change
from specgauge.analysis.results import RatioCI

DRAWS = 200
RESAMPLES = 400


def coverage(make_interval) -> float:
    rng = np.random.default_rng(1234)
    hits = 0
    for _ in range(DRAWS):
        low, high, truth = make_interval(rng)
        hits += low <= truth <= high
    return hits / DRAWS


@pytest.mark.parametrize("paired", [True, False])
def test_ratio_of_means_covers_the_truth(paired):
    """Per-request tok/s; paired: a prompt effect shared by both arms, unpaired: independent
    requests. The lognormal factors have the same mean in both arms: the true ratio of means is 1.5."""
    def draw(rng):
        n = 40
        prompt_effect = rng.lognormal(0.0, 0.4, n)           # long and short answers, same in both arms
        base = 100 * prompt_effect * rng.lognormal(0, 0.1, n)
        spec_effect = prompt_effect if paired else rng.lognormal(0.0, 0.4, n)
        spec = 150 * spec_effect * rng.lognormal(0, 0.1, n)
        ci = ratio_of_statistic(base, spec, paired=paired, rng=rng, resamples=RESAMPLES).ci
        return ci.ci_low, ci.ci_high, 1.5
    assert 0.88 <= coverage(draw) <= 0.99


def test_paired_interval_is_narrower_when_prompts_vary():
    rng = np.random.default_rng(7)
    prompt_effect = rng.lognormal(0.0, 0.6, 60)
    base = 100 * prompt_effect * rng.lognormal(0, 0.05, 60)
    spec = 130 * prompt_effect * rng.lognormal(0, 0.05, 60)
    paired = ratio_of_statistic(base, spec, paired=True, rng=rng, resamples=RESAMPLES).ci
    unpaired = ratio_of_statistic(base, spec, paired=False, rng=rng, resamples=RESAMPLES).ci
    assert (paired.ci_high - paired.ci_low) < 0.5 * (unpaired.ci_high - unpaired.ci_low)
    assert paired.method == "paired_requests" and unpaired.method == "within_arm"


def test_ratio_of_sums_covers_the_truth():
    """Aggregate throughput as Σ tokens / Σ seconds; the speculative arm takes 0.8x the time."""
    def draw(rng):
        n = 48
        tokens = rng.integers(20, 200, n).astype(float)
        base_s = tokens * 0.01 * rng.lognormal(0, 0.15, n)
        spec_s = tokens * 0.008 * rng.lognormal(0, 0.15, n)
        ci = ratio_of_sums(tokens, base_s, tokens, spec_s, paired=True, rng=rng, resamples=RESAMPLES).ci
        return ci.ci_low, ci.ci_high, 1.25
    assert 0.88 <= coverage(draw) <= 0.99


def test_point_ratio_sets_the_estimate_and_scales_the_interval():
    rng = np.random.default_rng(3)
    tokens = np.full(20, 50.0)
    seconds = rng.uniform(0.9, 1.1, 20)
    estimate = ratio_of_sums(tokens, seconds, tokens, seconds / 2 * rng.uniform(0.9, 1.1, 20), paired=True, rng=rng,
                             resamples=RESAMPLES,
                             point_ratio=1.9)
    assert estimate.ci.ratio == 1.9
    assert estimate.ci.ci_low < 1.9 < estimate.ci.ci_high
    assert estimate.replicates.shape == (RESAMPLES,)


def test_too_few_samples_give_a_ratio_without_interval():
    rng = np.random.default_rng(0)
    ci = ratio_of_statistic(np.array([1.0, 2.0]), np.array([2.0, 4.0]), paired=True, rng=rng).ci
    assert ci.ratio == pytest.approx(2.0) and ci.ci_low is None and ci.method == "none"
    assert ratio_of_statistic(np.array([]), np.array([1.0]), paired=False, rng=rng).ci.ratio is None


def test_significant_change_reads_the_interval():
    assert significant_change(RatioCI(ratio=0.8, ci_low=0.7, ci_high=0.9)) == -1
    assert significant_change(RatioCI(ratio=1.2, ci_low=1.1, ci_high=1.3)) == 1
    assert significant_change(RatioCI(ratio=1.0, ci_low=0.9, ci_high=1.1)) == 0
    assert significant_change(RatioCI(ratio=1.0)) == 0
