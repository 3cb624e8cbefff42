"""Machine drift folded into every interval (docs/compare.md, "Drift").

The bootstrap resamples requests, so its interval covers request-to-request spread only. Two arms
are measured at different moments, and a shared machine changes speed between moments (thermal
state, other jobs): two servers of identical speed then differ by the drift, with a tight interval.

A comparison measures that drift itself: the same arm, on the same prompts, measured at two
moments — a domain's single stream and the sweep's concurrency 1 on the same suite, and, with
``--rounds`` ≥ 2, the same point of the same arm in different rounds. Each such repeat gives one
log ratio ``ln(tok/s at t1 / tok/s at t2)``; an arm-vs-arm comparison at one point carries a drift
error of the same kind (two moments). The drift per measurement is estimated as

    sigma = sqrt(mean(log_ratio²))        (RMS over every repeat the run measured)

and a point's ratio, pooled over R rounds measured at independent moments, carries drift with
standard deviation ``sigma / sqrt(R)``. Every bootstrap replicate is multiplied by
``exp(N(0, sigma / sqrt(R)))`` (independently per point and replicate), so the 95% interval's
quantiles cover request spread and drift together, and the crossover's interval (computed from
the same replicates) widens alike. More rounds narrow the drift term; a quieter machine shrinks
sigma itself. When nothing was repeated (sigma unknown) intervals are left as they are and the
verdict says the drift was not measured.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from specgauge.analysis.paired import RatioEstimate, _quantiles
from specgauge.analysis.results import DriftEstimate


def estimate_drift(repeats: Iterable[tuple[float | None, float | None]], rounds: int) -> DriftEstimate:
    """The drift of ``repeats`` (tok/s of the same arm and prompts at two moments), for ``rounds`` rounds."""
    logs = [math.log(a / b) for a, b in repeats if a and b and a > 0 and b > 0]
    if not logs:
        return DriftEstimate(sigma=None, repeats=0, per_measurement=None, widened_by=None)
    sigma = math.sqrt(sum(x * x for x in logs) / len(logs))
    return DriftEstimate(sigma=sigma, repeats=len(logs), per_measurement=math.exp(sigma) - 1.0,
                         widened_by=sigma / math.sqrt(max(1, rounds)))


def with_drift(estimate: RatioEstimate, drift: DriftEstimate, rng: np.random.Generator) -> RatioEstimate:
    """``estimate`` with its replicates (and so its interval) widened by the drift term."""
    if not drift.widened_by or estimate.replicates is None or estimate.ci.ci_low is None:
        return estimate
    noise = np.exp(rng.normal(0.0, drift.widened_by, size=estimate.replicates.shape))   # (B,)
    replicates = estimate.replicates * noise
    low, high = _quantiles(replicates)
    return RatioEstimate(estimate.ci.model_copy(update={"ci_low": low, "ci_high": high}), replicates)
