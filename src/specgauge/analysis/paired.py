"""Paired speculative/baseline ratios with 95% bootstrap confidence intervals (numpy).

Every ratio is speculative / baseline. Two resampling schemes (docs/compare.md):

- ``paired_requests``: the two arms sent the same request indices with the same seed, hence the
  same prompt for each index; pairs (baseline request i, speculative request i) are resampled
  together, so prompt-to-prompt variation (long vs short answers) cancels.
- ``within_arm``: when the arms' requests cannot be matched, each arm's requests are resampled
  on their own.

Aggregate tok/s uses the measured point figure (output tokens / window) as the estimate; its
interval comes from resampling requests: a replicate's throughput is the ratio of sums
Σ tokens / Σ E2E (Little's law at fixed concurrency: aggregate tok/s = concurrency × Σ tokens / Σ E2E),
and the interval is the measured ratio times the 2.5% and 97.5% quantiles of replicate / point
ratio-of-sums. Rounds are pooled as more requests (the replicates do not resample rounds).
Per-request tok/s is a ratio of means, TPOT and TTFT ratios of medians.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from specgauge.analysis.results import RatioCI

CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
MIN_SAMPLES = 3   # fewer per arm: a ratio but no interval


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio with its interval and the bootstrap replicates (used for the crossover's interval)."""

    ci: RatioCI
    replicates: np.ndarray | None   # (resamples,) replicate ratios, on the same scale as ``ci.ratio``


def _quantiles(replicates: np.ndarray) -> tuple[float, float]:
    tail = (1.0 - CONFIDENCE) / 2.0
    finite = replicates[np.isfinite(replicates)]
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)


def _indices(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    return rng.integers(0, n, size=(resamples, n))   # (B, n)


def mean_interval(values: np.ndarray, *, rng: np.random.Generator,
                  resamples: int = DEFAULT_RESAMPLES) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the mean of ``values`` (None below ``MIN_SAMPLES``)."""
    if len(values) < MIN_SAMPLES:
        return None
    return _quantiles(values[_indices(rng, len(values), resamples)].mean(axis=1))


def ratio_of_sums(base_num: np.ndarray, base_den: np.ndarray, spec_num: np.ndarray, spec_den: np.ndarray, *,
                  paired: bool, rng: np.random.Generator, resamples: int = DEFAULT_RESAMPLES,
                  point_ratio: float | None = None) -> RatioEstimate:
    """(Σ spec_num / Σ spec_den) / (Σ base_num / Σ base_den) with a bootstrap interval.

    ``paired``: the arrays are aligned pairs (same length), resampled with one index set.
    ``point_ratio``: the estimate to report (e.g. the measured aggregate tok/s ratio); the interval
    is scaled to it. Default: the ratio of sums itself.
    """
    base_num, base_den, spec_num, spec_den = (np.asarray(a, dtype=float)
                                              for a in (base_num, base_den, spec_num, spec_den))
    if len(base_num) == 0 or len(spec_num) == 0 or base_num.sum() <= 0 or spec_den.sum() <= 0:
        return RatioEstimate(RatioCI(ratio=point_ratio), None)
    raw = (spec_num.sum() / spec_den.sum()) / (base_num.sum() / base_den.sum())
    ratio = raw if point_ratio is None else point_ratio
    method = "paired_requests" if paired else "within_arm"
    pairs = len(base_num) if paired else min(len(base_num), len(spec_num))
    if min(len(base_num), len(spec_num)) < MIN_SAMPLES:
        return RatioEstimate(RatioCI(ratio=float(ratio), method="none", pairs=pairs), None)
    base_idx = _indices(rng, len(base_num), resamples)
    spec_idx = base_idx if paired else _indices(rng, len(spec_num), resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        base_rate = base_num[base_idx].sum(axis=1) / base_den[base_idx].sum(axis=1)   # (B,)
        spec_rate = spec_num[spec_idx].sum(axis=1) / spec_den[spec_idx].sum(axis=1)   # (B,)
        replicates = spec_rate / base_rate * (ratio / raw)
    low, high = _quantiles(replicates)
    return RatioEstimate(RatioCI(ratio=float(ratio), ci_low=low, ci_high=high, method=method, pairs=pairs), replicates)


def ratio_of_statistic(base: np.ndarray, spec: np.ndarray, *, paired: bool, rng: np.random.Generator,
                       statistic: Callable[..., np.ndarray] = np.mean,
                       resamples: int = DEFAULT_RESAMPLES) -> RatioEstimate:
    """statistic(spec) / statistic(base) with a bootstrap interval (``np.mean`` or ``np.median``).

    ``statistic`` must accept ``axis=1`` on a (B, n) array.
    """
    base, spec = np.asarray(base, dtype=float), np.asarray(spec, dtype=float)
    if len(base) == 0 or len(spec) == 0:
        return RatioEstimate(RatioCI(), None)
    denominator = float(statistic(base))
    if denominator == 0:
        return RatioEstimate(RatioCI(), None)
    ratio = float(statistic(spec)) / denominator
    pairs = len(base) if paired else min(len(base), len(spec))
    if min(len(base), len(spec)) < MIN_SAMPLES:
        return RatioEstimate(RatioCI(ratio=ratio, method="none", pairs=pairs), None)
    base_idx = _indices(rng, len(base), resamples)
    spec_idx = base_idx if paired else _indices(rng, len(spec), resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicates = statistic(spec[spec_idx], axis=1) / statistic(base[base_idx], axis=1)   # (B,)
    low, high = _quantiles(replicates)
    return RatioEstimate(RatioCI(ratio=ratio, ci_low=low, ci_high=high,
                                 method="paired_requests" if paired else "within_arm", pairs=pairs), replicates)


def significant_change(ci: RatioCI) -> int:
    """+1 when the interval lies wholly above 1, -1 wholly below, 0 when it includes 1 (or is missing)."""
    if ci.ci_low is None or ci.ci_high is None:
        return 0
    if ci.ci_low > 1.0:
        return 1
    if ci.ci_high < 1.0:
        return -1
    return 0
