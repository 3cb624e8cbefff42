"""Where the speculative/baseline throughput ratio crosses 1, interpolated in log-concurrency.

Rule: scanning from the lowest tested concurrency, the first pair of neighbours (c_i, c_{i+1}) with
r_i ≥ 1 > r_{i+1}; the crossover is where the straight line through (log c_i, r_i) and
(log c_{i+1}, r_{i+1}) meets 1. If the ratio is already below 1 at the lowest concurrency it is
``always_below``; if it never falls below 1, ``never``. The interval: the same rule applied to every
bootstrap replicate of the curve, 2.5% and 97.5% quantiles; a bound is None when it falls outside
the tested range (replicates that never cross, or are below 1 from the start).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from specgauge.analysis.results import Crossover


def crossing_point(concurrency: Sequence[float], ratios: Sequence[float]) -> tuple[str, float | None, int | None]:
    """``(kind, crossover, i)`` for one curve; ``i`` is the lower neighbour's index when it crosses."""
    usable = [(c, r) for c, r in zip(concurrency, ratios) if r is not None and math.isfinite(r)]
    if len(usable) < 2:
        return "insufficient", None, None
    if usable[0][1] < 1.0:
        return "always_below", None, None
    for i in range(len(usable) - 1):
        (c0, r0), (c1, r1) = usable[i], usable[i + 1]
        if r0 >= 1.0 > r1:
            x0, x1 = math.log(c0), math.log(c1)
            x = x0 + (r0 - 1.0) / (r0 - r1) * (x1 - x0)
            return "crosses", math.exp(x), i
    return "never", None, None


def find_crossover(concurrency: Sequence[int], ratios: Sequence[float | None],
                   replicates: np.ndarray | None = None) -> Crossover:
    """The crossover of the measured curve, with an interval from ``replicates`` (B, points).

    ``replicates[b, j]`` is bootstrap replicate b of the ratio at ``concurrency[j]``.
    """
    points = [(c, r) for c, r in zip(concurrency, ratios) if r is not None]
    levels = [float(c) for c, _ in points]
    kind, value, _ = crossing_point(levels, [r for _, r in points])
    if kind != "crosses":
        return Crossover(kind=kind)
    assert value is not None
    between = next((int(a), int(b)) for a, b in zip(levels, levels[1:]) if a <= value <= b)
    low = high = None
    if replicates is not None and replicates.size:
        keep = [j for j, r in enumerate(ratios) if r is not None]
        per_replicate = []
        for row in np.asarray(replicates)[:, keep]:
            k, v, _ = crossing_point(levels, list(row))
            per_replicate.append(v if k == "crosses" else (-math.inf if k == "always_below" else math.inf))
        lo_q, hi_q = np.quantile(np.array(per_replicate), [0.025, 0.975], method="inverted_cdf")
        low = float(lo_q) if math.isfinite(lo_q) else None
        high = float(hi_q) if math.isfinite(hi_q) else None
    return Crossover(kind="crosses", concurrency=value, ci_low=low, ci_high=high, between=between)
