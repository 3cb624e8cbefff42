"""Crossover of the throughput ratio in log-concurrency, with an interval from replicates."""

import math

import numpy as np
import pytest

from specgauge.analysis.crossover import find_crossover

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
