"""Distribution summaries (mean and percentiles) used in every per-point figure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable

import numpy as np

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Summary:
    """Mean, p50, p90, p99 and the sample count of one metric; all ``None`` when there is no sample.

    Percentiles use numpy's default (linear interpolation between closest ranks, the same as
    ``statistics.quantiles(..., method="inclusive")``) so figures are reproducible with any tool.
    """

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    count: int

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Summary":
        return cls(**{k: data.get(k) for k in ("mean", "p50", "p90", "p99")}, count=int(data.get("count", 0)))


EMPTY_SUMMARY = Summary(None, None, None, None, 0)


def summarize(values: Iterable[float]) -> Summary:
    """Summarise ``values`` (``None`` entries are the caller's to drop)."""
    array = np.fromiter(values, dtype=np.float64)
    if array.size == 0:
        return EMPTY_SUMMARY
    p50, p90, p99 = np.percentile(array, PERCENTILES)
    return Summary(float(array.mean()), float(p50), float(p90), float(p99), int(array.size))
